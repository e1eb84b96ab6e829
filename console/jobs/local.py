"""Running a job's command locally, under the supervisor (``supervisor.py``), which holds
the command's whole process tree and ends it on exit, timeout or cancellation.

The command's output goes to the job's logs as produced, up to a limit per stream (the head
and the tail are kept, a marker line stands for the middle). A process is named by its pid
*and* its start time, so a recycled pid or a forged record never points a signal at a
process that is not the job's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POLL_SECONDS = 0.1
KILL_GRACE_SECONDS = 3.0
SUPERVISOR_SLACK_SECONDS = 15.0  # past the grace: the supervisor's SIGKILL rounds, then ours
READ_CHUNK = 64 * 1024
DEFAULT_LOG_LIMIT = 64 * 1024 * 1024  # bytes per stream
TAIL_BYTES = 4 * 1024 * 1024  # of a cut log, the last bytes kept
SUPERVISOR = Path(__file__).with_name("supervisor.py")
# Forces one containment (pidns | cgroup | subreaper) instead of the best the machine allows.
CONTAINMENT_ENV = "EPISCOPE_SANDBOX_CONTAINMENT"

OutputSink = Callable[[str, bytes], None]
RawSink = Callable[[str, bytes], None]


@dataclass(frozen=True, slots=True)
class ProcessResult:
    state: str  # succeeded | failed | timed_out | cancelled
    returncode: int | None  # None when the command never started
    pid: int | None  # the supervisor's
    pgid: int | None
    failure_type: str | None = None  # timeout | cancelled | spawn_error (None: see returncode)
    message: str | None = None
    containment: str | None = None  # pidns | cgroup | subreaper: how the tree was held
    notes: tuple[str, ...] = ()  # why better containments were not available


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot; ``None`` when there is no such process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def same_process(pid: int | None, started: int | None) -> bool:
    """Whether ``pid`` is alive and is the process that started at ``started``."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not isinstance(started, int):
        return False
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in (b"Z", b"X") and int(fields[19]) == started


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of group ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                members.append(int(entry))
    return members


class LogLimit:
    """What of a stream is kept: its first bytes up to the limit, less a tail, and its last
    bytes; the middle of a flood is replaced by one line saying how much was left out."""

    def __init__(self, stream: str, limit: int) -> None:
        self.stream = stream
        self.tail_limit = min(limit // 8, TAIL_BYTES)
        self.head_room = limit - self.tail_limit
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0

    def take(self, chunk: bytes) -> bytes:
        """The part of ``chunk`` to keep now; the rest waits in the tail or is dropped."""
        kept = chunk[: max(0, self.head_room)]
        self.head_room -= len(kept)
        rest = chunk[len(kept) :]
        if rest:
            self.tail.append(rest)
            self.tail_size += len(rest)
            while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_limit:
                self.dropped += len(self.tail[0])
                self.tail_size -= len(self.tail.popleft())
        return kept

    def finish(self) -> bytes:
        """What comes at the end: the marker and the tail, when the limit was reached."""
        tail = b"".join(self.tail)
        excess = max(0, len(tail) - self.tail_limit)
        self.dropped += excess
        tail = tail[excess:]
        if not self.dropped:
            return tail
        marker = f"\n[sandbox] {self.stream} cut: {self.dropped} bytes left out here (log limit); the last {len(tail)} bytes follow\n"
        return marker.encode() + tail


def _pump(fd: int, stream: str, log: Path, sink: OutputSink | None, raw: RawSink | None, limit: int) -> None:
    kept = LogLimit(stream, limit)
    with open(log, "ab", buffering=0) as out:
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                break
            if not chunk:
                break
            if raw is not None:
                raw(stream, chunk)
            chunk = kept.take(chunk)
            if chunk:
                out.write(chunk)
                if sink is not None:
                    sink(stream, chunk)
        end = kept.finish()
        if end:
            out.write(end)
            if sink is not None:
                sink(stream, end)
    os.close(fd)


def _read_reports(fd: int) -> dict:
    """The supervisor's report lines, merged (it has exited: the pipe holds all of them)."""
    data = b""
    while chunk := os.read(fd, READ_CHUNK):
        data += chunk
    os.close(fd)
    report: dict = {}
    for line in data.splitlines():
        try:
            fields = json.loads(line)
        except ValueError:
            continue
        if isinstance(fields, dict):
            report.update(fields)
    return report


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict,
    timeout: float,
    stdout_log: Path,
    stderr_log: Path,
    job_dir: Path,
    job_id: str,
    on_output: OutputSink | None = None,
    on_raw_output: RawSink | None = None,
    should_cancel: Callable[[], bool] = lambda: False,
    on_started: Callable[[int, int, int | None], None] | None = None,
    kill_grace: float = KILL_GRACE_SECONDS,
    read_only: tuple[str, ...] = (),
    host_pids: bool = False,
    slot_fd: int | None = None,
    log_limit: int = DEFAULT_LOG_LIMIT,
) -> ProcessResult:
    """Run ``argv`` under the supervisor; logs and ``on_output`` get its output as it comes.

    ``on_raw_output`` sees every byte; the logs and ``on_output`` see at most ``log_limit``
    bytes of each stream. ``slot_fd`` (the job's slot lock) is handed to the supervisor,
    which keeps it until the last process of the job has ended.
    """
    stdout_log.touch()
    stderr_log.touch()
    control_r, control_w = os.pipe()
    report_r, report_w = os.pipe()
    passed = [control_r, report_w] + ([slot_fd] if slot_fd is not None else [])
    supervisor = [
        sys.executable, "-I", "-S", str(SUPERVISOR),  # the standard library only: no site start-up
        "--job-dir", str(job_dir), "--job-id", job_id, "--stage", str(cwd), "--grace", f"{kill_grace:g}",
        "--control-fd", str(control_r), "--report-fd", str(report_w),
        "--containment", os.environ.get(CONTAINMENT_ENV) or "auto",
    ]
    for path in read_only:
        supervisor += ["--read-only", path]
    if host_pids:
        supervisor.append("--host-pids")
    try:
        proc = subprocess.Popen(
            [*supervisor, "--", *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=passed,
        )
    except OSError as exc:
        for fd in (control_r, control_w, report_r, report_w):
            os.close(fd)
        return ProcessResult("failed", None, None, None, "spawn_error", f"cannot start the supervisor: {exc.strerror or exc}")
    os.close(control_r)
    os.close(report_w)
    pgid = proc.pid  # a new session's leader leads its own process group
    # The pumps own the pipe descriptors from here on.
    out_fd, err_fd = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
    proc.stdout.close()
    proc.stderr.close()
    pumps = [
        threading.Thread(target=_pump, args=(out_fd, "stdout", stdout_log, on_output, on_raw_output, log_limit), daemon=True),
        threading.Thread(target=_pump, args=(err_fd, "stderr", stderr_log, on_output, on_raw_output, log_limit), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    if on_started is not None:
        on_started(proc.pid, pgid, process_start(proc.pid))
    deadline = time.monotonic() + timeout
    stopped: str | None = None
    while stopped is None:
        try:
            proc.wait(timeout=POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= deadline:
            stopped = "timed_out"
        elif should_cancel():
            stopped = "cancelled"
    if stopped is not None:
        # The supervisor ends the whole tree (SIGTERM, the grace period, SIGKILL), then exits.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=kill_grace + SUPERVISOR_SLACK_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
    supervisor_status = proc.wait()
    os.close(control_w)
    report = _read_reports(report_r)
    for pump in pumps:
        pump.join(timeout=5.0)
    returncode = report.get("returncode")
    if not isinstance(returncode, int) or isinstance(returncode, bool):
        returncode = supervisor_status
    containment = report.get("containment")
    notes = tuple(n for n in report.get("notes") or () if isinstance(n, str))
    extra = {"containment": containment if isinstance(containment, str) else None, "notes": notes}
    if report.get("error"):
        return ProcessResult("failed", None, proc.pid, pgid, "spawn_error", str(report["error"]), **extra)
    if stopped == "timed_out":
        return ProcessResult("timed_out", returncode, proc.pid, pgid, "timeout", f"timed out after {timeout:g} s", **extra)
    if stopped == "cancelled":
        return ProcessResult("cancelled", returncode, proc.pid, pgid, "cancelled", "cancelled by request", **extra)
    if returncode == 0:
        return ProcessResult("succeeded", 0, proc.pid, pgid, **extra)
    return ProcessResult("failed", returncode, proc.pid, pgid, None, f"command exited with status {returncode}", **extra)
