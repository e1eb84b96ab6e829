"""At most four jobs of one workspace run at once, across independent processes.

Each running job holds an exclusive ``flock`` on one of four lock files. The kernel drops a
lock when its holders exit, however they exit, so a crashed sandbox never keeps a slot. The
job's supervisor holds the lock too, until the last process of the job has ended: a job whose
sandbox died still counts until nothing of it runs. A job that finds all four taken stays
queued and tries again a few times a second.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from console.formats.gpu_side import MAX_SANDBOX_JOBS, SANDBOX_DIR

POLL_SECONDS = 0.2


def slot_dir(workspace: str | os.PathLike) -> Path:
    return Path(workspace) / SANDBOX_DIR / "slots"


class Slot:
    """A held slot; release it (or let the process end) to let a queued job start."""

    def __init__(self, index: int, fd: int) -> None:
        self.index = index
        self._fd: int | None = fd

    def fileno(self) -> int:
        """The locked descriptor: whoever also holds it keeps the slot taken."""
        if self._fd is None:
            raise ValueError("slot already released")
        return self._fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def try_acquire(workspace: str | os.PathLike) -> Slot | None:
    directory = slot_dir(workspace)
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(MAX_SANDBOX_JOBS):
        # O_CLOEXEC (Python's default) keeps the lock out of the job's own processes, which
        # would otherwise hold the slot after the sandbox let go of it.
        fd = os.open(directory / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Slot(index, fd)
    return None


def acquire_slot(
    workspace: str | os.PathLike,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_queued: Callable[[], None] | None = None,
    poll: float = POLL_SECONDS,
) -> Slot | None:
    """Wait for a free slot; ``None`` when ``should_stop`` says to give up while queued."""
    queued = False
    while True:
        slot = try_acquire(workspace)
        if slot is not None:
            return slot
        if not queued:
            queued = True
            if on_queued is not None:
                on_queued()
        if should_stop():
            return None
        time.sleep(poll)
