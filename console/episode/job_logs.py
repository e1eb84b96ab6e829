"""The last lines of every sandbox job's logs, folded from JOB_LOG events.

Only the tail is kept (a job may print for hours); the console's jobs pane and
``status --json`` (``jobs[].log_tail``) both show it. A line is read whole up to the
tailer's limit (``tailer.MAX_LINE``, a longer one is skipped as unreadable), but a kept line
is cut to ``LINE_CHARS``: the tail is what an operator reads, and without the cut it could
hold ``TAIL_LINES`` lines of megabytes each, per job and stream.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from types import MappingProxyType

from console.formats.job_log import log_owner

from .state import JobLogTail

TAIL_LINES = 200  # per job and stream
LINE_CHARS = 4000  # of one kept line; a screen shows far less, a traceback line fits


class JobLogs:
    def __init__(self) -> None:
        self._lines: dict[str, deque[str]] = {}  # log path -> its last lines
        self._tails: Mapping[str, JobLogTail] | None = None  # the last snapshot, until a line arrives

    def add(self, path: str, line: str) -> None:
        lines = self._lines.get(path)
        if lines is None:
            lines = self._lines[path] = deque(maxlen=TAIL_LINES)
        if len(line) > LINE_CHARS:
            line = f"{line[:LINE_CHARS]} … ({len(line) - LINE_CHARS} more characters)"
        lines.append(line)
        self._tails = None

    def forget(self, path: str) -> None:
        """The log vanished or was replaced: it is read anew from its start."""
        if self._lines.pop(path, None) is not None:
            self._tails = None

    def snapshot(self) -> Mapping[str, JobLogTail]:
        if self._tails is None:
            streams: dict[str, dict[str, tuple[str, ...]]] = {}
            for path in sorted(self._lines):
                job_id, stream = log_owner(path)
                streams.setdefault(job_id, {})[stream] = tuple(self._lines[path])
            self._tails = MappingProxyType({
                job_id: JobLogTail(job_id, by_stream.get("stdout", ()), by_stream.get("stderr", ()))
                for job_id, by_stream in streams.items()
            })
        return self._tails
