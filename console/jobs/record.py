"""Writing a job's live record and finding its files (``.atrex_long_horizon/sandbox/<id>/``).

The record is rewritten whole (temporary file, then rename) at each change of state, so a
console polling it never reads half a record. Any backend uses this writer, so local and
remote jobs look the same to ``episcope jobs`` and the console.

The staged copy the command runs in lies outside the workspace (in the temporary directory),
so no relative path from it (``../../../../kernel.py``) reaches the workspace.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from console.formats.gpu_side import JOB_SCHEMA, RECORD_NAME, check_job_record, job_dir
from console.formats.plainjson import atomic_write_json
from console.formats.telemetry_builders import sandbox_category, utc_timestamp

from .local import process_start
from .request import JobRequest

STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
CANCEL_REQUEST = "cancel"  # its presence asks whoever runs the job to cancel it


class StageUnavailable(OSError):
    """No staging directory outside the workspace can be made."""


def make_stage(workspace: str, job_id: str) -> Path:
    """A new private (0700) directory for the job's copy, outside ``workspace``."""
    stage = Path(tempfile.mkdtemp(prefix=f"episcope-stage-{job_id}-")).resolve()
    root = Path(workspace).resolve()
    if stage == root or root in stage.parents:
        os.rmdir(stage)
        raise StageUnavailable(f"the temporary directory {stage.parent} lies inside the workspace; set TMPDIR elsewhere")
    return stage


def new_job_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


class JobRecordWriter:
    """Owns one job's directory and record."""

    def __init__(self, directory: Path, fields: dict) -> None:
        self.directory = directory
        self.fields = fields
        self.stage: Path | None = None  # made when the job gets its slot

    @classmethod
    def create(cls, request: JobRequest, *, launcher: str) -> JobRecordWriter:
        while True:
            job_id = new_job_id()
            directory = job_dir(request.workspace, job_id)
            try:
                directory.mkdir(parents=True)
                break
            except FileExistsError:
                continue
        fields = {
            "schema": JOB_SCHEMA,
            "job_id": job_id,
            "state": "queued",
            "argv": list(request.argv),
            "kind": request.kind,
            "backend": request.backend,
            "workspace": request.workspace,
            "created_at": utc_timestamp(),
            "started_at": None,
            "finished_at": None,
            "exit_code": None,
            "result_code": None,
            "sync": list(request.sync),
            "timeout": request.timeout,
            "pid": None,
            "pgid": None,
            "pid_started": None,  # the supervisor's start time: with pid, names that process only
            "sandbox_pid": os.getpid(),
            "sandbox_started": process_start(os.getpid()),
            "launcher": launcher,
            "slot": None,
            "operation_id": None,
            "category": sandbox_category(list(request.argv)),
            "message": None,
            "synced": None,
            "refused": None,
            "containment": None,  # pidns | cgroup | subreaper: how the job's processes were held
            "containment_notes": None,  # why a stronger containment was not available
            "stage": None,
        }
        writer = cls(directory, fields)
        writer.write()
        return writer

    @property
    def job_id(self) -> str:
        return self.fields["job_id"]

    @property
    def path(self) -> Path:
        return self.directory / RECORD_NAME

    @property
    def stdout_log(self) -> Path:
        return self.directory / STDOUT_LOG

    @property
    def stderr_log(self) -> Path:
        return self.directory / STDERR_LOG

    def make_stage(self) -> Path:
        self.stage = make_stage(self.fields["workspace"], self.job_id)
        self.update(stage=str(self.stage))
        return self.stage

    def cancel_requested(self) -> bool:
        return (self.directory / CANCEL_REQUEST).exists()

    def update(self, **changes) -> None:
        unknown = set(changes) - set(self.fields)
        if unknown:
            raise KeyError(f"not job record fields: {sorted(unknown)}")
        self.fields.update(changes)
        self.write()

    def write(self) -> None:
        atomic_write_json(self.path, self.fields)

    def record(self) -> dict:
        """The record as written, checked as any reader of it checks it."""
        return check_job_record(dict(self.fields))


def request_cancel(directory: Path) -> None:
    (directory / CANCEL_REQUEST).write_text(utc_timestamp() + "\n")
