"""Sandbox job records: ``.atrex_long_horizon/sandbox/<job-id>/job.json``, as the host reads them.

The sandbox rewrites this document atomically at every state change (queued, running, and
one terminal state), so a reader always sees a whole record. A record read from disk that
says queued or running while the process that runs the job is gone reads as ``lost``. The
sandbox itself re-reads its records on the GPU machine with :mod:`gpu_side`; a field of the
wrong type makes the record unreadable on both sides, with the field's name.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from .gpu_side import JOB_SCHEMA as JOB_SCHEMA
from .gpu_side import MAX_SANDBOX_JOBS as MAX_SANDBOX_JOBS
from .gpu_side import RECORD_NAME as RECORD_NAME
from .gpu_side import SANDBOX_DIR, TERMINAL_STATES, live_job_record
from .gpu_side import job_dir as job_dir
from .plainjson import read_json_document
from .problems import ReadResult, Unreadable
from .records import Record, as_object, convert

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled", "timed_out", "lost"]


class JobRecord(Record, frozen=True):
    """One sandbox job as its record states it; fields the record lacks are ``None``."""

    schema: Literal["episcope-sandbox-job/v1"]
    job_id: Annotated[str, msgspec.Meta(min_length=1)]
    state: JobState
    argv: tuple[str, ...] | None = None
    kind: str | None = None  # run | profile | dev
    backend: str | None = None  # local | ray
    workspace: str | None = None
    created_at: str | None = None  # UTC ISO-8601
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None  # the command's own status (negative: killed by that signal)
    result_code: int | None = None  # the sandbox's exit status (FORMATS §8)
    sync: tuple[str, ...] | None = None  # paths copied back into the workspace
    timeout: float | None = None  # seconds allowed to the command
    pid: int | None = None  # the command's process (leader of its own group)
    pgid: int | None = None
    sandbox_pid: int | None = None  # the process that runs the job
    launcher: str | None = None  # "sandbox" (tools/sandbox.py, cancel by signal) or "console"
    slot: int | None = None  # which of the workspace's four slots the job held
    operation_id: str | None = None  # telemetry operation id
    category: str | None = None  # telemetry category: profile | correctness | benchmark | dev
    message: str | None = None  # one line on why a job failed or was refused
    synced: tuple[str, ...] | None = None  # files copied back
    refused: tuple[dict[str, Any], ...] | None = None  # {"path", "reason"} for outputs not copied back
    raw: dict[str, Any] = {}  # the record as written (the sandbox keeps more than is shown)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def duration_seconds(self) -> float | None:
        start, end = _instant(self.started_at), _instant(self.finished_at)
        if start is None or end is None:
            return None
        return (end - start).total_seconds()

    def to_json(self) -> dict[str, Any]:
        fields = msgspec.structs.asdict(self)
        return {name: list(value) if isinstance(value, tuple) else value for name, value in fields.items() if name != "raw"}


def _instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def job_record_from_obj(obj: Any) -> JobRecord:
    return msgspec.structs.replace(convert(as_object(obj), JobRecord), raw=obj)


def read_job_record(path: str | os.PathLike[str]) -> ReadResult[JobRecord]:
    """The record as it stands now: ``lost`` when it says queued or running but its runner is gone."""
    return read_json_document(path, lambda obj: job_record_from_obj(live_job_record(obj)))


def list_job_records(workspace: str | os.PathLike[str]) -> tuple[tuple[JobRecord, ...], tuple[Unreadable, ...]]:
    """Every job record of a workspace, newest first, and the records that could not be read."""
    root = Path(workspace) / SANDBOX_DIR
    records: list[JobRecord] = []
    problems: list[Unreadable] = []
    try:
        entries = sorted(root.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return (), ()
    for entry in entries:
        path = entry / RECORD_NAME
        if not path.is_file():
            continue
        result = read_job_record(path)
        if result.value is not None:
            records.append(result.value)
        problems.extend(result.problems)
    records.sort(key=lambda r: (r.created_at or "", r.job_id), reverse=True)
    return tuple(records), tuple(problems)
