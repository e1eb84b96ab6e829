"""Running a staged sandbox job on a Ray cluster through Ray's Job Submission API.

The caller (the sandbox runner) stages the workspace, holds one of the workspace's four
slots for the whole job and syncs outputs back from the stage afterwards, exactly as for a
local job: Ray cannot take back a job still pending, so the queue stays on this side.
:func:`run_on_ray` only moves the staged copy to the cluster, runs the command there on one
GPU and brings the ``--sync`` outputs back into the staged copy.

How a job travels:

- The staged directory, plus ``.episcope_ray/`` (the wrapper, ``sync_archive.py``, the
  ``tar_check.py`` it imports and the job's ``job.json``), is zipped here and given to Ray
  as the ``working_dir``. A zip made here, not the directory itself, because Ray's own
  packing drops files named by ``.gitignore`` / ``.rayignore`` and ``.git``, ``.venv`` or
  ``__pycache__`` directories, so the worker would see another tree than a local job.
  ``job.json`` holds a random nonce: Ray unpacks equal packages into one shared directory,
  and two jobs must never share one. It also holds the key of the frame's HMAC, which the
  wrapper deletes before the command starts, so the command cannot sign a verdict of its own
  (``sync_archive``).
- The entrypoint is the wrapper (``ray_wrapper.py``) on ``python3`` (``EPISCOPE_RAY_PYTHON``
  names another interpreter), with ``entrypoint_num_gpus=1``: Ray reserves one GPU and sets
  ``CUDA_VISIBLE_DEVICES`` for it. The submission id is ``episcope-<job id>-<nonce>``;
  the metadata holds ``episcope_job_id`` and ``episode_id``.
- Ray keeps one log per job, stdout and stderr merged: all of the command's output arrives
  through ``on_stdout``. ``on_stderr`` gets this side's own lines, and Ray's messages when
  the wrapper never started (a runtime environment that failed to set up).
- Outputs come back framed in the log (``sync_archive``), or, when ``EPISCOPE_RAY_SHARED_DIR``
  names a directory mounted at the same path on this machine and the workers, as a file
  there, for outputs too large for a log.
- A timeout is enforced by the wrapper itself (it still sends back what the command wrote);
  this side stops the job only if the wrapper does not finish in time, if Ray does not start
  it within :data:`START_LIMIT_SECONDS`, or when ``should_cancel`` says so. Ray's stop
  reaches a job only once it runs: a job cancelled while pending is reported cancelled
  only after Ray has started and stopped it (or the start limit has passed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import queue
import secrets
import stat
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import sync_archive

SHARED_DIR_ENV = "EPISCOPE_RAY_SHARED_DIR"
PYTHON_ENV = "EPISCOPE_RAY_PYTHON"
ADDRESS_ENV = "EPISCOPE_RAY_ADDRESS"
MISSING_RAY = "the ray backend needs Ray: pip install 'episcope-console[ray]' (ray[default]==2.60.0)"

PACKAGE_DIR = ".episcope_ray"
WRAPPER_NAME = "ray_wrapper.py"
SPEC_NAME = "job.json"
_HERE = Path(__file__).resolve().parent
_SHIPPED = {WRAPPER_NAME: _HERE / "ray_wrapper.py", "sync_archive.py": _HERE / "sync_archive.py",
            "tar_check.py": _HERE.parent / "formats" / "tar_check.py"}

MAX_LOG_ARCHIVE_BYTES = 64 * 1024 * 1024  # contents of an archive framed into the log
MAX_SHARED_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024
START_LIMIT_SECONDS = 300.0  # PENDING on Ray: no free GPU, or a slow runtime environment
FINISH_GRACE_SECONDS = 60.0  # after the command's timeout: killing, packing, log delivery
STOP_WAIT_SECONDS = 30.0
LOST_CONTACT_SECONDS = 60.0
POLL_SECONDS = 0.25
FINISH_POLL_SECONDS = 0.05  # Ray notices the entrypoint's exit within 0.1 s
TAIL_SETTLE_SECONDS = 5.0  # Ray's log tail re-checks the file about once a second
# Ray chooses the GPU; a value passed down would defeat the reservation.
RAY_OWNED_ENV = ("CUDA_VISIBLE_DEVICES",)


class RayUnavailable(ImportError):
    """Ray (with its job submission client) is not installed; the message is one line."""


@dataclass(frozen=True, slots=True)
class RayOutcome:
    exit_code: int | None  # the command's status as the wrapper saw it; None if it never ran
    state: str  # succeeded | failed | cancelled | timed_out
    submission_id: str | None  # None: nothing was submitted (cluster unreachable, refused)
    archive_members: list[str] = field(default_factory=list)  # unpacked into stage_dir
    error: str | None = None
    refused: list[dict] = field(default_factory=list)  # outputs the worker would not send


def job_submission_client():
    """Ray's JobSubmissionClient class, or :class:`RayUnavailable`."""
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:
        raise RayUnavailable(f"{MISSING_RAY}: {exc}") from None
    # Ray's client logs each upload and websocket close at INFO on stderr, which is the
    # sandbox's own channel to its caller; keep its warnings and errors only.
    for name in ("ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return JobSubmissionClient


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def build_package(stage_dir: Path, spec: dict, target: Path) -> None:
    """Zip the staged copy and the wrapper into ``target``; refuse links in the stage."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for dirpath, dirnames, filenames in os.walk(stage_dir):
            here = Path(dirpath)
            for name in sorted(dirnames + filenames):
                if (here / name).is_symlink():
                    raise ValueError(f"staged path {(here / name).relative_to(stage_dir)} is a symbolic link")
            if here == stage_dir:
                dirnames[:] = [d for d in dirnames if d != PACKAGE_DIR]
            dirnames.sort()
            if here != stage_dir:
                # Empty directories travel too: the command sees the tree it would see locally.
                archive.writestr(zipfile.ZipInfo(here.relative_to(stage_dir).as_posix() + "/"), b"")
            for name in sorted(filenames):
                full = here / name
                if not stat.S_ISREG(full.lstat().st_mode):
                    raise ValueError(f"staged path {full.relative_to(stage_dir)} is not a regular file")
                archive.write(full, full.relative_to(stage_dir).as_posix())
        for name, source in _SHIPPED.items():
            archive.write(source, f"{PACKAGE_DIR}/{name}")
        archive.writestr(f"{PACKAGE_DIR}/{SPEC_NAME}", json.dumps(spec, sort_keys=True))


def _tail_logs(client, submission_id: str, chunks: queue.Queue) -> None:
    """Follow the job's log over Ray's websocket; put text, then ``None`` (end) or the error."""

    async def follow() -> None:
        async for text in client.tail_job_logs(submission_id):
            chunks.put(text)

    try:
        asyncio.run(follow())
    except Exception as exc:  # any failure of the tail: the caller falls back to polling
        chunks.put(exc)
        return
    chunks.put(None)


class _LogFollower:
    """The job's log as it grows: Ray's websocket tail, or polling when the tail fails.

    Both read the log from its beginning, so what was already received is a prefix of the
    whole and polling only needs the text past it.
    """

    def __init__(self, client, submission_id: str) -> None:
        self._client = client
        self._id = submission_id
        self._chunks: queue.Queue = queue.Queue()
        self._received = 0
        self.tail_ended = False
        self.tail_failed = False
        threading.Thread(target=_tail_logs, args=(client, submission_id, self._chunks), daemon=True).start()

    def read(self, wait: float) -> str:
        """New log text, waiting up to ``wait`` seconds for some."""
        parts = []
        deadline = time.monotonic() + wait
        while not (self.tail_ended or self.tail_failed):
            try:
                item = self._chunks.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                self.tail_ended = True
            elif isinstance(item, Exception):
                self.tail_failed = True
            else:
                parts.append(item)
                self._received += len(item)
            if self._chunks.empty():
                break
        if self.tail_failed:
            time.sleep(max(0.0, deadline - time.monotonic()))
            parts.append(self.poll())
        return "".join(parts)

    def poll(self) -> str:
        """Fetch the whole log and return the part not yet received."""
        try:
            text = self._client.get_job_logs(self._id)
        except Exception:
            return ""  # the next poll tries again; a lost cluster shows in the job status
        new = text[self._received :]
        self._received = len(text)
        return new


def run_on_ray(
    *,
    stage_dir: Path,
    argv: list[str],
    env: dict[str, str],
    sync_paths: list[str],
    timeout: float,
    job_id: str,
    episode_id: str | None,
    address: str,
    on_stdout: Callable[[bytes], None],
    on_stderr: Callable[[bytes], None],
    should_cancel: Callable[[], bool],
    max_output_bytes: int,
) -> RayOutcome:
    """Run ``argv`` in a copy of ``stage_dir`` on the Ray cluster at ``address`` and unpack
    its new or changed ``sync_paths`` files into ``stage_dir``.

    ``env`` is set on top of the worker's environment: pass the request's variables, not
    this machine's whole environment. ``max_output_bytes`` caps each output file. Never
    raises for a failing job; raises :class:`RayUnavailable` when Ray is not installed.
    """
    client_class = job_submission_client()
    stage_dir = Path(stage_dir)

    def note(text: str) -> None:
        on_stderr(f"[sandbox] {text}\n".encode())

    if should_cancel():
        return RayOutcome(None, "cancelled", None, error="cancelled before submission")
    nonce = secrets.token_hex(8)
    key = secrets.token_hex(32)
    submission_id = f"episcope-{job_id}-{nonce[:8]}"
    dropped = sorted(set(env).intersection(RAY_OWNED_ENV))
    if dropped:
        note(f"not passed to the Ray job (Ray assigns the GPU): {', '.join(dropped)}")
    shared_dir = os.environ.get(SHARED_DIR_ENV) or None
    spec = {
        "nonce": nonce,
        "key": key,
        "argv": list(argv),
        "env": {k: v for k, v in env.items() if k not in RAY_OWNED_ENV},
        "sync": list(sync_paths),
        "timeout": float(timeout),
        "max_file_bytes": int(max_output_bytes),
        "max_log_bytes": MAX_LOG_ARCHIVE_BYTES,
        "max_shared_bytes": MAX_SHARED_ARCHIVE_BYTES,
        "shared_dir": shared_dir,
        "shared_name": f"{submission_id}.tar.gz",
    }
    metadata = {"episcope_job_id": job_id}
    if episode_id is not None:
        metadata["episode_id"] = episode_id
    python = os.environ.get(PYTHON_ENV) or "python3"
    entrypoint = f"{python} {PACKAGE_DIR}/{WRAPPER_NAME} {PACKAGE_DIR}/{SPEC_NAME}"

    with tempfile.TemporaryDirectory(prefix="episcope-ray-") as tmp:
        package = Path(tmp) / f"{submission_id}.zip"
        try:
            build_package(stage_dir, spec, package)
        except (OSError, ValueError) as exc:
            return RayOutcome(None, "failed", None, error=f"cannot package the staged job: {_one_line(exc)}")
        try:
            client = client_class(address)
            client.submit_job(
                entrypoint=entrypoint,
                submission_id=submission_id,
                runtime_env={"working_dir": str(package)},
                metadata=metadata,
                entrypoint_num_gpus=1,
            )
        except Exception as exc:  # whatever Ray or the network says, nothing was submitted
            return RayOutcome(None, "failed", None, error=f"Ray at {address} refused the job: {_one_line(exc)}")
    note(f"submitted to Ray as {submission_id}")
    reader = sync_archive.FrameReader(nonce, key)
    return _follow(client, submission_id, reader, stage_dir, float(timeout), shared_dir, on_stdout, on_stderr, should_cancel)


def _follow(client, submission_id, reader, stage_dir, timeout, shared_dir, on_stdout, on_stderr, should_cancel) -> RayOutcome:
    from ray.job_submission import JobStatus

    logs = _LogFollower(client, submission_id)
    submitted = last_contact = time.monotonic()
    running_since = None
    stop_reason = None  # cancelled | timed_out
    stop_asked_at = last_stop_call = 0.0
    terminal_at = None
    status = JobStatus.PENDING
    error = None

    def show(text: str) -> None:
        if text:
            on_stdout(text.encode("utf-8"))

    while True:
        show(reader.feed(logs.read(POLL_SECONDS)))
        if logs.tail_ended:
            break
        if reader.complete:
            # The wrapper has said all it will; Ray's tail would take another second or two
            # to notice. Only wait for Ray to mark the job finished, so a freed slot never
            # lets a fifth job onto the cluster.
            _wait_until_terminal(client, submission_id, STOP_WAIT_SECONDS)
            break
        now = time.monotonic()
        try:
            status = client.get_job_status(submission_id)
            last_contact = now
        except Exception:
            if now - last_contact > LOST_CONTACT_SECONDS:
                error = f"lost contact with the Ray cluster for {LOST_CONTACT_SECONDS:g} s"
                break
            # A blip of the dashboard: go on with the last status known.
        if status == JobStatus.RUNNING and running_since is None:
            running_since = now
        if status.is_terminal():
            terminal_at = terminal_at or now
            # The tail ends by itself soon after; if it does not, poll what is left.
            if logs.tail_failed or now - terminal_at > TAIL_SETTLE_SECONDS:
                show(reader.feed(logs.poll()))
                break
            continue
        if stop_reason is None:
            if should_cancel():
                stop_reason = "cancelled"
            elif running_since is None and now - submitted > START_LIMIT_SECONDS:
                stop_reason = "timed_out"
                error = f"Ray did not start the job within {START_LIMIT_SECONDS:g} s (no free GPU?)"
            elif running_since is not None and now - running_since > timeout + FINISH_GRACE_SECONDS:
                stop_reason = "timed_out"
                error = f"the job did not finish within {timeout:g} s (+{FINISH_GRACE_SECONDS:g} s grace)"
            if stop_reason is not None:
                stop_asked_at = now
        if stop_reason is not None:
            limit = STOP_WAIT_SECONDS
            if running_since is None:
                # Ray cannot take back a pending job: it starts once a GPU frees and only
                # then does the stop reach it. Keep asking (and keep the slot) until then.
                limit += max(0.0, START_LIMIT_SECONDS - (stop_asked_at - submitted))
            if now - stop_asked_at > limit:
                error = f"Ray did not confirm the stop of {submission_id} within {now - stop_asked_at:.0f} s"
                break
            if now - last_stop_call >= 1.0:
                last_stop_call = now
                try:
                    client.stop_job(submission_id)
                except Exception:
                    pass
    show(reader.close())
    return _outcome(client, submission_id, reader, stage_dir, shared_dir, stop_reason, error, on_stderr)


def _wait_until_terminal(client, submission_id: str, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if client.get_job_status(submission_id).is_terminal():
                return
        except Exception:
            pass
        time.sleep(FINISH_POLL_SECONDS)


def _outcome(client, submission_id, reader, stage_dir, shared_dir, stop_reason, error, on_stderr) -> RayOutcome:
    if not reader.started and reader.preamble:
        # The wrapper never ran: Ray's own lines say why.
        on_stderr("".join(reader.preamble).encode("utf-8"))
    try:
        info = client.get_job_info(submission_id)
    except Exception as exc:
        info = None
        error = error or f"cannot read the job's final status from Ray: {_one_line(exc)}"
    header = reader.header if reader.complete else None
    exit_code = header.get("exit_code") if header else None
    if stop_reason is not None:
        state = stop_reason
    elif header is not None and header.get("timed_out"):
        state = "timed_out"
    elif header is not None and header.get("stopped"):
        state, error = "cancelled", error or "stopped on the Ray cluster"
    elif header is not None and exit_code is not None:
        state = "succeeded" if exit_code == 0 else "failed"
    else:
        state = "failed"
        if info is not None and str(info.status) == "STOPPED":
            state = "cancelled"
        if info is not None and header is None:
            exit_code = getattr(info, "driver_exit_code", None)
        error = error or (header or {}).get("message") or reader.error
        if error is None and info is not None and info.message:
            error = f"Ray: {_one_line(info.message)}"
        error = error or "the job ended without reporting a result"

    members: list[str] = []
    refused = list((header or {}).get("refused") or [])
    if header is not None and header.get("members"):
        try:
            data = reader.data if header.get("transport") == "log" else _read_shared(shared_dir, submission_id, header)
            if data is None:
                raise sync_archive.ArchiveError(reader.error or "the output archive is missing")
            limit = MAX_LOG_ARCHIVE_BYTES if header.get("transport") == "log" else MAX_SHARED_ARCHIVE_BYTES
            members = sync_archive.unpack(data, str(stage_dir), max_total_bytes=limit)
        except (sync_archive.ArchiveError, OSError) as exc:
            if state == "succeeded":
                state = "failed"
            error = error or f"outputs not synced back: {_one_line(exc)}"
    elif header is not None and header.get("transport") == "shared":
        try:
            _read_shared(shared_dir, submission_id, header)  # removes the (empty) archive
        except (sync_archive.ArchiveError, OSError):
            pass  # nothing to bring back either way
    return RayOutcome(exit_code, state, submission_id, members, error, refused)


def _read_shared(shared_dir: str | None, submission_id: str, header: dict) -> bytes:
    """The archive the wrapper left in the shared directory (then removed), digest checked."""
    if not shared_dir:
        raise sync_archive.ArchiveError(f"the archive went to a shared directory, but {SHARED_DIR_ENV} is not set here")
    path = Path(shared_dir) / f"{submission_id}.tar.gz"
    try:
        data = path.read_bytes()
    finally:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    if hashlib.sha256(data).hexdigest() != header.get("sha256"):
        raise sync_archive.ArchiveError(f"{path.name} in the shared directory does not match its sha256")
    return data
