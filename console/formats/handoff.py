"""The episode's hand-off ``.atrex_long_horizon/handoff.json`` (FORMATS §4).

The agent writes ``candidate_ready``, ``pivot`` or ``blocked`` (newer: ``staged_ready``);
archived copies may also read ``invalid_handoff`` or ``interrupted``. A ``candidate_ready``
hand-off without a candidate commit is malformed. Whether the commit is acceptable (equals
HEAD, clean, descends from base, changes exactly kernel.py, no timeline probe) is a git
fact checked elsewhere; this module only reads the document.
"""

import os
from collections.abc import Callable
from typing import Any, Literal

from .problems import ReadResult
from .records import Record, blank_to_none, convert, read_document

AGENT_STATUSES = ("candidate_ready", "staged_ready", "pivot", "blocked")
STATUSES = AGENT_STATUSES + ("invalid_handoff", "interrupted")

HandoffStatus = Literal["candidate_ready", "staged_ready", "pivot", "blocked", "invalid_handoff", "interrupted"]


class Handoff(Record, frozen=True):
    status: HandoffStatus
    candidate_commit: str | None = None
    last_trial_commit: str | None = None
    checkpoint_commit: str | None = None  # newer generation (staged hand-offs)

    def __post_init__(self) -> None:
        blank_to_none(self, ("candidate_commit", "last_trial_commit", "checkpoint_commit"))
        if self.status == "candidate_ready" and self.candidate_commit is None:
            raise ValueError("candidate_commit is required when status is candidate_ready")


def parse_handoff(obj: Any) -> Handoff:
    return convert(obj, Handoff)


def read_handoff(path: str | os.PathLike[str]) -> ReadResult[Handoff]:
    parse: Callable[[Any, Callable[[str], None]], Handoff] = lambda obj, note: parse_handoff(obj)
    return read_document(path, parse)
