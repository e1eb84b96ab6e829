"""Running a job's command locally: its own process group, logs as produced, and a kill
of the whole group on timeout or cancellation (SIGTERM, a grace period, then SIGKILL).

A group is gone when no process in it is left other than zombies: on machines whose init
does not reap orphans, a killed grandchild stays a zombie but holds nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

POLL_SECONDS = 0.1
KILL_GRACE_SECONDS = 3.0
READ_CHUNK = 64 * 1024

OutputSink = Callable[[str, bytes], None]


@dataclass(frozen=True, slots=True)
class ProcessResult:
    state: str  # succeeded | failed | timed_out | cancelled
    returncode: int | None  # None when the command never started
    pid: int | None
    pgid: int | None
    failure_type: str | None = None  # timeout | cancelled | spawn_error (None: see returncode)
    message: str | None = None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of group ``pgid``."""
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces and parentheses).
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) > 2 and int(rest[2]) == pgid and rest[0] not in (b"Z", b"X"):
            members.append(int(entry))
    return members


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_group_gone(pgid: int, seconds: float, leader: subprocess.Popen | None) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if leader is not None:
            leader.poll()  # reap the leader so it does not linger as our zombie
        if not group_members(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def terminate_group(pgid: int, grace: float = KILL_GRACE_SECONDS, leader: subprocess.Popen | None = None) -> None:
    """SIGTERM the group, give it ``grace`` seconds, then SIGKILL whatever is left."""
    if not group_members(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    if _wait_group_gone(pgid, grace, leader):
        return
    _signal_group(pgid, signal.SIGKILL)
    _wait_group_gone(pgid, 5.0, leader)


def _pump(fd: int, stream: str, log: Path, sink: OutputSink | None) -> None:
    with open(log, "ab", buffering=0) as out:
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                break
            if not chunk:
                break
            out.write(chunk)
            if sink is not None:
                sink(stream, chunk)
    os.close(fd)


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict,
    timeout: float,
    stdout_log: Path,
    stderr_log: Path,
    on_output: OutputSink | None = None,
    should_cancel: Callable[[], bool] = lambda: False,
    on_started: Callable[[int, int], None] | None = None,
    kill_grace: float = KILL_GRACE_SECONDS,
) -> ProcessResult:
    """Run ``argv`` in a new session; logs and ``on_output`` get its output as it comes."""
    stdout_log.touch()
    stderr_log.touch()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult("failed", None, None, None, "spawn_error", f"cannot start {argv[0]!r}: {exc.strerror or exc}")
    pgid = proc.pid  # a new session's leader leads its own process group
    # The pumps own the pipe descriptors from here on.
    out_fd, err_fd = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
    proc.stdout.close()
    proc.stderr.close()
    pumps = [
        threading.Thread(target=_pump, args=(out_fd, "stdout", stdout_log, on_output), daemon=True),
        threading.Thread(target=_pump, args=(err_fd, "stderr", stderr_log, on_output), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    if on_started is not None:
        on_started(proc.pid, pgid)
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
    # Also on a normal exit: whatever the command left running in its group goes too.
    terminate_group(pgid, kill_grace if stopped else min(kill_grace, 1.0), proc)
    returncode = proc.wait()
    for pump in pumps:
        # A process that left the group may still hold the pipe; do not wait on it forever.
        pump.join(timeout=5.0)
    if stopped == "timed_out":
        return ProcessResult("timed_out", returncode, proc.pid, pgid, "timeout", f"timed out after {timeout:g} s")
    if stopped == "cancelled":
        return ProcessResult("cancelled", returncode, proc.pid, pgid, "cancelled", "cancelled by request")
    if returncode == 0:
        return ProcessResult("succeeded", 0, proc.pid, pgid)
    return ProcessResult("failed", returncode, proc.pid, pgid, None, f"command exited with status {returncode}")
