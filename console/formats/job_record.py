"""Sandbox job records: ``.atrex_long_horizon/sandbox/<job-id>/job.json``.

The sandbox rewrites this document atomically at every state change (queued, running, and
one terminal state), so a reader always sees a whole record. A record read from disk that
says queued or running while the process that runs the job is gone reads as ``lost``. The standard library reads it:
the sandbox itself consults records on the GPU machine, where orjson is absent, and a
workspace holds only a handful of these small documents.
"""

# Annotations are evaluated here (no __future__ import): typing.NamedTuple would compile
# each string annotation into a ForwardRef, doubling the cost of defining these records.
import os
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from .plainjson import read_json_document
from .problems import FormatError, ReadResult, Unreadable

JOB_SCHEMA = "episcope-sandbox-job/v1"
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "timed_out", "lost")
# lost: the sandbox process died before it could record an outcome (its processes are ended).
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "timed_out", "lost"})
SANDBOX_DIR = Path(".atrex_long_horizon") / "sandbox"
RECORD_NAME = "job.json"
# At most four jobs of one workspace run at once (FORMATS §8): the sandbox's slots, the
# console's refusal and the concurrency guard all count against this one number.
MAX_SANDBOX_JOBS = 4


class JobRecord(NamedTuple):
    """One sandbox job as its record states it; fields the record lacks are ``None``."""

    job_id: str
    state: str
    argv: tuple[str, ...] | None
    kind: str | None  # run | profile | dev
    backend: str | None  # local | ray
    workspace: str | None
    created_at: str | None  # UTC ISO-8601
    started_at: str | None
    finished_at: str | None
    exit_code: int | None  # the command's own status (negative: killed by that signal)
    result_code: int | None  # the sandbox's exit status (FORMATS §8)
    sync: tuple[str, ...] | None  # paths copied back into the workspace
    timeout: float | None  # seconds allowed to the command
    pid: int | None  # the command's process (leader of its own group)
    pgid: int | None
    sandbox_pid: int | None  # the process that runs the job
    launcher: str | None  # "sandbox" (tools/sandbox.py, cancel by signal) or "console"
    slot: int | None  # which of the workspace's four slots the job held
    operation_id: str | None  # telemetry operation id
    category: str | None  # telemetry category: profile | correctness | benchmark | dev
    message: str | None  # one line on why a job failed or was refused
    synced: tuple[str, ...] | None  # files copied back
    refused: tuple[dict[str, Any], ...] | None  # {"path", "reason"} for outputs not copied back
    raw: dict[str, Any]
    schema: str = JOB_SCHEMA

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
        out: dict[str, Any] = {name: value for name, value in zip(self._fields, self) if name != "raw"}
        for key in ("argv", "sync", "synced", "refused"):
            if out[key] is not None:
                out[key] = list(out[key])
        return out


def _instant(text: str | None) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strings(obj: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = obj.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)


def job_record_from_obj(obj: Any) -> JobRecord:
    if not isinstance(obj, dict):
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    if obj.get("schema") != JOB_SCHEMA:
        raise FormatError(f"schema is {obj.get('schema')!r}, expected {JOB_SCHEMA!r}")
    job_id = obj.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise FormatError("job_id missing")
    state = obj.get("state")
    if state not in JOB_STATES:
        raise FormatError(f"unknown job state {state!r}")
    timeout = obj.get("timeout")
    refused = obj.get("refused")
    return JobRecord(
        job_id=job_id,
        state=state,
        argv=_strings(obj, "argv"),
        kind=_str(obj, "kind"),
        backend=_str(obj, "backend"),
        workspace=_str(obj, "workspace"),
        created_at=_str(obj, "created_at"),
        started_at=_str(obj, "started_at"),
        finished_at=_str(obj, "finished_at"),
        exit_code=_int(obj, "exit_code"),
        result_code=_int(obj, "result_code"),
        sync=_strings(obj, "sync"),
        timeout=float(timeout) if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) else None,
        pid=_int(obj, "pid"),
        pgid=_int(obj, "pgid"),
        sandbox_pid=_int(obj, "sandbox_pid"),
        launcher=_str(obj, "launcher"),
        slot=_int(obj, "slot"),
        operation_id=_str(obj, "operation_id"),
        category=_str(obj, "category"),
        message=_str(obj, "message"),
        synced=_strings(obj, "synced"),
        refused=tuple(r for r in refused if isinstance(r, dict)) if isinstance(refused, list) else None,
        raw=obj,
    )


def job_dir(workspace: str | os.PathLike[str], job_id: str) -> Path:
    return Path(workspace) / SANDBOX_DIR / job_id


def _runner_gone(obj: dict[str, Any]) -> bool:
    """Whether the process a record names as running its job (pid and start time) is gone."""
    pid, started = obj.get("sandbox_pid"), obj.get("sandbox_started")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False  # a record that names no runner: nothing to tell
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[:1] in ([b"Z"], [b"X"]):
        return True
    return isinstance(started, int) and int(fields[19]) != started  # the pid now names another process


def _live_job_record(obj: Any) -> JobRecord:
    if isinstance(obj, dict) and obj.get("state") in ("queued", "running") and _runner_gone(obj):
        obj = {**obj, "state": "lost", "message": obj.get("message") or "the sandbox process running the job is gone"}
    return job_record_from_obj(obj)


def read_job_record(path: str | os.PathLike[str]) -> ReadResult[JobRecord]:
    """The record as it stands now: ``lost`` when it says queued or running but its runner is gone."""
    return read_json_document(path, _live_job_record)

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
