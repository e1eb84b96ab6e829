"""``run_job``: one sandbox job from request to final record, and ``cancel_job``.

The sandbox command line and the console (from a worker thread) both come through here.
Every backend shares one lifecycle: record the job, wait for one of the workspace's four
slots, stage the workspace, execute, copy the requested outputs back, read the verdict and
record the end. Only the execute step differs: locally the command runs in its own process
group (``local``); on Ray the staged copy travels to the cluster and its outputs come back
into the stage (``ray_backend``).
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from console.formats.gpu_side import RECORD_NAME, TERMINAL_STATES, job_dir, read_job_record
from console.formats.plainjson import append_line
from console.formats.problems import FormatError
from console.formats.profile_record import profile_job_record
from console.formats.telemetry_builders import (
    ENV_ITERATION,
    ENV_TRACE,
    new_operation_id,
    record_line,
    sandbox_completed_record,
    sandbox_started_record,
    utc_timestamp,
)

from . import results
from .local import KILL_GRACE_SECONDS, SUPERVISOR, SUPERVISOR_SLACK_SECONDS, ProcessResult, run_process, same_process
from .private_shapes import table_path
from .record import JobRecordWriter, request_cancel
from .request import PRIVATE_SHAPES_ENV, JobRequest
from .slots import acquire_slot
from .staging import StagingError, resolve_private_case, stage_workspace, sync_back
from .supervisor import remove_tree

OutputSink = Callable[[str, bytes], None]

RAY_DEFAULT_ADDRESS = "http://127.0.0.1:8265"  # Ray's dashboard on this machine
# Errors that say "the machine is short of something right now", not "the job is wrong".
_TRANSIENT = frozenset({errno.EAGAIN, errno.ENOMEM, errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.EDQUOT})


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be used here (its optional dependencies are missing)."""


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job_id: str
    state: str  # a terminal job state: succeeded | failed | cancelled | timed_out
    code: int  # the sandbox's exit status (FORMATS §8)
    exit_code: int | None  # the command's own status; None when it never started
    record: dict  # the job record as written (console.formats.job_record reads it)
    result: dict | None = None  # the evaluator's RESULT_JSON (kind run)
    profile: dict | None = None  # gateway_profile.json (kind profile)
    synced: tuple[str, ...] = ()
    refused: tuple[dict, ...] = ()
    message: str | None = None


def run_job(
    request: JobRequest,
    on_output: OutputSink | None = None,
    *,
    cancel: threading.Event | None = None,
    launcher: str = "console",
    kill_grace: float = KILL_GRACE_SECONDS,
) -> JobOutcome:
    """Run ``request`` to the end and return its outcome; never raises for a failing job.

    ``on_output(stream, data)`` receives the command's output as produced ("stdout" or
    "stderr") plus the sandbox's own lines. Setting ``cancel`` (or ``episcope jobs cancel``)
    stops the job, killing its whole process tree. Raises :class:`BackendUnavailable`
    when the backend cannot be loaded.
    """
    if request.backend == "ray":
        _check_ray()
    return _run_staged(request, on_output, cancel=cancel, launcher=launcher, kill_grace=kill_grace)


def _check_ray() -> None:
    try:
        from .ray_backend import job_submission_client

        job_submission_client()
    except ImportError as exc:
        raise BackendUnavailable(f"ray backend needs episcope-console[ray] ({exc})") from None


def emit(on_output: OutputSink | None, stream: str, text: str | bytes) -> None:
    if on_output is not None:
        on_output(stream, text if isinstance(text, bytes) else (text.rstrip("\n") + "\n").encode())


def trace(record: dict) -> None:
    """Append a telemetry record when the episode traces (ATREX_TELEMETRY_TRACE)."""
    path = os.environ.get(ENV_TRACE)
    if path:
        try:
            append_line(path, record_line(record))  # byte for byte as AKA's sandbox writes it
        except OSError:
            pass  # telemetry must never fail the job it describes


# The directory holding the console package this sandbox runs with.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def python_path(current: str | None) -> str:
    """PYTHONPATH for a command that runs in the stage, not in the caller's directory.

    Relative entries (``PYTHONPATH=.``) are made absolute against the caller's directory, or
    they would name the stage; the console package's own root comes first so a profiling
    script's ``python3 -m console.profiling.funnel`` finds the same package as the sandbox.
    """
    entries = [_PACKAGE_ROOT]
    for entry in (current or "").split(os.pathsep):
        if entry:
            entries.append(os.path.abspath(entry))
    return os.pathsep.join(dict.fromkeys(entries))


def command_env(request: JobRequest) -> dict:
    env = {k: v for k, v in os.environ.items() if k != PRIVATE_SHAPES_ENV}
    env["PYTHONPATH"] = python_path(env.get("PYTHONPATH"))
    env.update(request.env)
    return env


def finish(
    writer: JobRecordWriter,
    state: str,
    code: int,
    *,
    exit_code: int | None = None,
    message: str | None = None,
    on_output: OutputSink | None = None,
    **extra,
) -> JobOutcome:
    """Write the terminal record and build the outcome (any backend)."""
    synced = tuple(extra.pop("synced", ()))
    refused = tuple(extra.pop("refused", ()))
    writer.update(
        state=state,
        finished_at=utc_timestamp(),
        exit_code=exit_code,
        result_code=code,
        message=message,
        synced=list(synced),
        refused=list(refused),
    )
    if message and state != "succeeded":
        emit(on_output, "stderr", f"[sandbox] {state}: {message}")
    return JobOutcome(
        job_id=writer.job_id,
        state=state,
        code=code,
        exit_code=exit_code,
        record=writer.record(),
        synced=synced,
        refused=refused,
        message=message,
        **extra,
    )


def _run_staged(
    request: JobRequest,
    on_output: OutputSink | None,
    *,
    cancel: threading.Event | None,
    launcher: str,
    kill_grace: float,
) -> JobOutcome:
    writer = JobRecordWriter.create(request, launcher=launcher)
    workspace = Path(request.workspace)

    def cancelled() -> bool:
        return (cancel is not None and cancel.is_set()) or writer.cancel_requested()

    try:
        private_case = resolve_private_case(request, table_path())
    except StagingError as exc:
        return finish(writer, "failed", results.EXIT_FAILED, message=str(exc), on_output=on_output)

    def queued() -> None:
        emit(on_output, "stderr", f"[sandbox] job {writer.job_id} queued: four jobs already run in this workspace")

    slot = acquire_slot(workspace, should_stop=cancelled, on_queued=queued)
    if slot is None:
        return finish(writer, "cancelled", results.EXIT_FAILED, message="cancelled while queued", on_output=on_output)
    try:
        with slot:
            writer.update(slot=slot.index)
            return _run_in_slot(request, writer, private_case, on_output, cancelled, kill_grace, slot.fileno())
    finally:
        if writer.stage is not None:
            try:
                remove_tree(str(writer.stage))
            except OSError as exc:
                emit(on_output, "stderr", f"[sandbox] staged copy {writer.stage} not removed: {exc.strerror or exc}")


def _run_in_slot(
    request: JobRequest,
    writer: JobRecordWriter,
    private_case: dict | None,
    on_output: OutputSink | None,
    cancelled: Callable[[], bool],
    kill_grace: float,
    slot_fd: int,
) -> JobOutcome:
    workspace = Path(request.workspace)
    try:
        staged = stage_workspace(request, writer.make_stage(), private_case)
    except StagingError as exc:
        return finish(writer, "failed", results.EXIT_FAILED, message=str(exc), on_output=on_output)
    except OSError as exc:
        code = results.EXIT_NOT_STARTED if exc.errno in _TRANSIENT else results.EXIT_FAILED
        return finish(writer, "failed", code, message=f"staging failed: {exc.strerror or exc}", on_output=on_output)
    for item in staged.skipped:
        emit(on_output, "stderr", f"[sandbox] not staged: {item['path']} ({item['reason']})")

    scanner = results.ScannerSink(on_output) if request.kind == "run" else None
    operation_id = new_operation_id()
    category = writer.fields["category"]
    writer.update(state="running", started_at=utc_timestamp(), operation_id=operation_id)
    trace(sandbox_started_record(operation_id, category))
    started = time.monotonic()

    if request.backend == "ray":
        outcome, backend_refused = _execute_on_ray(request, writer, scanner if scanner is not None else on_output, cancelled)
    else:
        outcome = run_process(
            list(request.argv),
            cwd=writer.stage,
            env=command_env(request),
            timeout=request.timeout,
            stdout_log=writer.stdout_log,
            stderr_log=writer.stderr_log,
            job_dir=writer.directory,
            job_id=writer.job_id,
            on_output=on_output,
            # The verdict is looked for in the whole output, also past the log limit.
            on_raw_output=scanner.feed_stream if scanner is not None else None,
            should_cancel=cancelled,
            on_started=lambda pid, pgid, started: writer.update(pid=pid, pgid=pgid, pid_started=started),
            kill_grace=kill_grace,
            read_only=(request.workspace,),
            host_pids=request.kind == "profile",
            slot_fd=slot_fd,
            log_limit=request.max_log_bytes,
        )
        writer.update(containment=outcome.containment, containment_notes=list(outcome.notes) or None)
        backend_refused = []
    duration = time.monotonic() - started
    if outcome.failure_type is not None:
        trace(sandbox_completed_record(operation_id, category, duration, failure_type=outcome.failure_type))
    else:
        trace(sandbox_completed_record(operation_id, category, duration, exit_status=outcome.returncode))
    if outcome.failure_type in ("spawn_error", "not_submitted"):
        code = results.EXIT_NOT_STARTED if outcome.failure_type == "not_submitted" else results.EXIT_FAILED
        return finish(writer, "failed", code, message=outcome.message, on_output=on_output, refused=backend_refused)

    synced = sync_back(request, writer.stage, staged.manifest)
    synced.refused[:0] = backend_refused
    for item in synced.refused:
        emit(on_output, "stderr", f"[sandbox] not synced: {item['path']} ({item['reason']})")

    result = result_error = profile = profile_error = None
    message = outcome.message
    if scanner is not None:
        try:
            result = scanner.scanner.result()
        except FormatError as exc:
            result_error = results.describe_result_error(exc)
        if result is not None:
            try:
                if results.append_evaluation(workspace, result, job_id=writer.job_id, gateway_kind="run") is None:
                    emit(on_output, "stderr", "[sandbox] no kernel.py in the workspace: evaluation not recorded")
            except (OSError, FormatError) as exc:
                emit(on_output, "stderr", f"[sandbox] evaluation not recorded: {exc}")
    if request.kind == "profile":
        profile, profile_error = results.gateway_profile(writer.stage, request.sync, request.argv)
        if profile is not None:
            emit(on_output, "stdout", results.profile_line(profile))
    code = results.exit_status(
        request.kind,
        outcome.state,
        outcome.returncode,
        result=result,
        result_error=result_error,
        profile_error=profile_error,
    )
    if outcome.state in ("timed_out", "cancelled"):
        state = outcome.state
    else:
        state = "succeeded" if code == results.EXIT_OK else "failed"
    if state == "failed" and message is None:
        message = result_error or profile_error or ("not all shapes pass" if result is not None else "no RESULT_JSON line")
    if profile is not None:
        error = None if state == "succeeded" else message
        results.record_profile_job(workspace, writer.stage, request.sync, request.argv,
                                   profile_job_record(writer.job_id, state, profile, error))
    return finish(
        writer,
        state,
        code,
        exit_code=outcome.returncode,
        message=message,
        on_output=on_output,
        result=result,
        profile=profile,
        synced=synced.synced,
        refused=synced.refused,
    )


def _execute_on_ray(
    request: JobRequest,
    writer: JobRecordWriter,
    sink: OutputSink | None,
    cancelled: Callable[[], bool],
) -> tuple[ProcessResult, list[dict]]:
    """Run the staged job on Ray; its outputs land in the stage, as a local run's would."""
    from .ray_backend import ADDRESS_ENV, run_on_ray

    logs = {"stdout": open(writer.stdout_log, "ab", buffering=0), "stderr": open(writer.stderr_log, "ab", buffering=0)}

    def stream(name: str) -> Callable[[bytes], None]:
        def write(data: bytes) -> None:
            logs[name].write(data)
            if sink is not None:
                sink(name, data)

        return write

    try:
        ray = run_on_ray(
            stage_dir=writer.stage,
            argv=list(request.argv),
            env=dict(request.env),
            sync_paths=list(request.sync),
            timeout=request.timeout,
            job_id=writer.job_id,
            episode_id=os.environ.get(ENV_ITERATION),
            address=request.address or os.environ.get(ADDRESS_ENV) or os.environ.get("RAY_ADDRESS") or RAY_DEFAULT_ADDRESS,
            on_stdout=stream("stdout"),
            on_stderr=stream("stderr"),
            should_cancel=cancelled,
            max_output_bytes=request.max_output_bytes,
        )
    finally:
        for log in logs.values():
            log.close()
    if ray.submission_id is None and ray.state == "failed":
        # Nothing reached the cluster (unreachable, refused): the job may simply be retried.
        return ProcessResult("failed", None, None, None, "not_submitted", ray.error), list(ray.refused)
    failure = {"timed_out": "timeout", "cancelled": "cancelled"}.get(ray.state)
    if failure is None and ray.exit_code is None:
        failure = "backend_error"
    message = ray.error
    if message is None and ray.state == "failed" and ray.exit_code is not None:
        message = f"command exited with status {ray.exit_code}"
    return ProcessResult(ray.state, ray.exit_code, None, None, failure, message), list(ray.refused)


# -- cancelling ----------------------------------------------------------------------------


class UnknownJob(LookupError):
    pass


def _supervisor_of(record: dict) -> int | None:
    """The pid of the job's supervisor, when the record names it truly; else ``None``.

    A record is written by the sandbox, but it lies in the workspace, where a job may write:
    its pid is trusted only when that process started when the record says it did and is a
    supervisor of this very job. A group id is never trusted: nothing is killed by group.
    """
    pid = record.get("pid")
    if not same_process(pid, record.get("pid_started")):
        return None
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    try:
        job_id = args[args.index(b"--job-id") + 1]
    except (ValueError, IndexError):
        return None
    if os.fsencode(str(SUPERVISOR)) not in args[:3] or job_id != record["job_id"].encode():
        return None
    return pid


def stop_supervisor(record: dict, *, wait: float = KILL_GRACE_SECONDS + SUPERVISOR_SLACK_SECONDS) -> bool:
    """Ask the job's supervisor to end the job's whole tree; wait until it has.

    Returns whether a supervisor of this job was found.
    """
    pid = _supervisor_of(record)
    if pid is None:
        return False
    started = record.get("pid_started")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + wait
    while same_process(pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def cancel_job(workspace: str | os.PathLike, job_id: str, *, wait: float = KILL_GRACE_SECONDS + 5.0) -> dict:
    """Cancel a queued or running job and return its final record (as written).

    The runner is asked through a cancel request file it polls, so it records the
    cancellation itself. If the job is not over within ``wait`` seconds (its runner hangs),
    or its runner died (the record reads ``lost``) while its supervisor still ends the
    tree, the supervisor is asked here. Raises :class:`UnknownJob`; a finished job is
    returned as is.
    """
    directory = job_dir(workspace, job_id)
    path = directory / RECORD_NAME
    found = read_job_record(path)
    if found.value is None:
        reason = found.problems[0].error if found.problems else "no such job"
        raise UnknownJob(f"job {job_id}: {reason}")
    record = found.value
    if record["state"] in TERMINAL_STATES:
        return record
    request_cancel(directory)
    deadline = time.monotonic() + wait
    current = record
    while time.monotonic() < deadline:
        current = read_job_record(path).value or current
        if current["state"] in TERMINAL_STATES:
            break
        time.sleep(0.1)
    if current["state"] not in TERMINAL_STATES or current["state"] == "lost":
        stop_supervisor(current)
    return read_job_record(path).value or current
