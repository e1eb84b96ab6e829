"""Where the operator's private shapes table is: known to the sandbox process alone.

``EPISCOPE_PRIVATE_SHAPES`` names the table. A job must never learn that name, or it could
read the whole table instead of the one case it is given. The first call takes the variable
out of this process's environment: from ``os.environ`` (so no child inherits it) and from the
environment block the process started with, which is what ``/proc/<pid>/environ`` shows to
any other process of the same user. The path stays in this module only.
"""

from __future__ import annotations

import os
import threading

from .request import PRIVATE_SHAPES_ENV

_lock = threading.Lock()
_taken: list[str | None] = []  # holds the path once the variable was taken


def table_path() -> str | None:
    """The table's path (``None``: not configured), taken from the environment on first use."""
    with _lock:
        if not _taken:
            _taken.append(os.environ.pop(PRIVATE_SHAPES_ENV, None) or None)
            blank_initial_environment(PRIVATE_SHAPES_ENV)
        return _taken[0]


def blank_initial_environment(name: str) -> bool:
    """Overwrite the value of ``name`` in this process's original environment block with NULs.

    ``os.environ`` is a copy; ``/proc/<pid>/environ`` reads the block itself (its bounds are
    fields 50 and 51 of ``/proc/self/stat``), which only a write to ``/proc/self/mem`` changes.
    Returns whether the block now holds no value for ``name``.
    """
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rfind(b")") + 2 :].split()
        start, end = int(fields[47]), int(fields[48])
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            key = os.fsencode(name) + b"="
            offset = 0
            for entry in block.split(b"\0"):
                if entry.startswith(key) and len(entry) > len(key):
                    mem.seek(start + offset + len(key))
                    mem.write(b"\0" * (len(entry) - len(key)))
                offset += len(entry) + 1
    except (OSError, ValueError, IndexError):
        return False
    return True
