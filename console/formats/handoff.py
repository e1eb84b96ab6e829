"""The episode's hand-off ``.atrex_long_horizon/handoff.json`` (FORMATS §4).

The agent writes ``candidate_ready``, ``pivot`` or ``blocked`` (newer: ``staged_ready``);
archived copies may also read ``invalid_handoff`` or ``interrupted``. A ``candidate_ready``
hand-off without a candidate commit is malformed. Whether the commit is acceptable (equals
HEAD, clean, descends from base, changes exactly kernel.py, no timeline probe) is a git
fact checked elsewhere; this module only reads the document.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from .fields import Fields, raw_json, read_document
from .problems import FormatError, ReadResult

AGENT_STATUSES = ("candidate_ready", "staged_ready", "pivot", "blocked")
STATUSES = AGENT_STATUSES + ("invalid_handoff", "interrupted")


class Handoff(msgspec.Struct, frozen=True):
    status: str
    candidate_commit: str | None
    last_trial_commit: str | None
    checkpoint_commit: str | None  # newer generation (staged hand-offs)
    raw: dict

    to_json = raw_json


def parse_handoff(obj: Any) -> Handoff:
    f = Fields(obj)
    status = f.choice("status", STATUSES)
    if status is None:
        raise FormatError("status is missing")
    candidate = f.text("candidate_commit")
    if status == "candidate_ready" and candidate is None:
        raise FormatError("candidate_commit is required when status is candidate_ready")
    return Handoff(
        status=status,
        candidate_commit=candidate,
        last_trial_commit=f.text("last_trial_commit"),
        checkpoint_commit=f.text("checkpoint_commit"),
        raw=obj,
    )


def read_handoff(path: str | os.PathLike) -> ReadResult[Handoff]:
    return read_document(path, lambda obj, note: parse_handoff(obj))
