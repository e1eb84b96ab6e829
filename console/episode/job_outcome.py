"""How a sandbox job ended, counted one way everywhere, and the line that says why it failed.

A job record's state is one of queued, running, succeeded, failed, cancelled, timed_out or
lost. ``status`` counts and the console's failure toasts both go through ``job_outcome``: a
job *failed* when it ended without a result (failed, timed out or lost); a cancelled job was
ended on purpose and is counted apart.

The reason shown for a failure is the first line of the job's stderr (then stdout) that reads
like an error (``ncu not found``, ``ModuleNotFoundError: ...``), from the log tails the state
already holds; the sandbox's own bookkeeping lines and traceback frames are passed over.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .state import EpisodeState, JobLogTail

if TYPE_CHECKING:
    from console.formats.job_record import JobRecord

ERROR_WORDS = re.compile(r"error|not found|no such|fatal|failed|cannot|denied|unavailable|missing", re.IGNORECASE)
SANDBOX_PREFIX = "[sandbox]"  # the sandbox's own notes: what it ran, not why the command failed
MAX_CHARS = 200


def job_outcome(state: str) -> str:
    """running (queued too), succeeded, cancelled, or failed (failed, timed out, lost)."""
    if state in ("queued", "running"):
        return "running"
    if state in ("succeeded", "cancelled"):
        return state
    return "failed"


def failure_line(job: JobRecord, tail: JobLogTail | None) -> str:
    """One line on why ``job`` failed: the first error-like line of its stderr, else of its
    stdout (an evaluator reports a failed shape there), else stderr's last line, else the
    record's message, else its exit status."""
    lines = [line.strip() for line in (tail.stderr if tail else ()) if line.strip()]
    own = _own(lines)
    printed = _own(line.strip() for line in (tail.stdout if tail else ()))
    found = next((line for line in (*own, *printed) if ERROR_WORDS.search(line)), None)
    if found is None and own:
        found = own[-1]
    if found is None:
        found = job.message or (lines[-1] if lines else None)
    if found is None:
        found = f"exit status {job.exit_code if job.exit_code is not None else job.result_code}"
    return found[:MAX_CHARS]


def _own(lines: Iterable[str]) -> list[str]:
    """The command's own lines: no blanks, sandbox notes or traceback frames."""
    return [line for line in lines if line and not line.startswith(SANDBOX_PREFIX)
            and not line.startswith(("Traceback (most recent call last)", "File \""))]


def newly_failed(before: EpisodeState, after: EpisodeState) -> list[JobRecord]:
    """Jobs that failed between two states: failed now, and not already over before."""
    earlier = {job.job_id: job for job in before.jobs}
    out = []
    for job in after.jobs:
        if job_outcome(job.state) != "failed":
            continue
        previous = earlier.get(job.job_id)
        if previous is None or not previous.terminal:
            out.append(job)
    return out
