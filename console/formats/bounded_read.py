"""Reading a file named by a workspace without trusting it.

A path in a workspace or archive (or one a receipt names) may be a FIFO, a device such as
``/dev/zero``, a symlink to one, or a file far larger than any artifact. Opening a FIFO
blocks until a writer appears and reading ``/dev/zero`` never ends, so the file is opened
non-blocking, checked with ``fstat`` to be a regular file of bounded size, and only then
read (never past the bound, in case it grows meanwhile).

Standard library only: the GPU-side tools read with it too.
"""

from __future__ import annotations

import os
import stat
from io import BufferedReader

from .problems import FormatError

# Larger than any document an episode writes (state.json of a long campaign is well under
# a megabyte); a raw timeline buffer may pass its own bound.
MAX_DOCUMENT_BYTES = 64 << 20


def open_regular_file(path: str | os.PathLike[str]) -> BufferedReader:
    """``path`` opened for reading (binary) when it is a regular file, of any size.

    Raises ``FileNotFoundError`` for a missing file, :class:`FormatError` (one line) for
    anything that is not a regular file (a FIFO, a device, a directory), and ``OSError``
    when the OS refuses. Never blocks on a FIFO or a device.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except ValueError as exc:  # a NUL byte in the name: no such file can exist
        raise FormatError(f"unusable path: {exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FormatError(f"not a regular file ({kind_of(info.st_mode)})")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | os.PathLike[str], limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes.

    Raises ``FileNotFoundError`` for a missing file, :class:`FormatError` (one line) for
    anything that is not a regular file or is too large, and ``OSError`` when the OS
    refuses. Never blocks on a FIFO or a device.
    """
    with open_regular_file(path) as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        if size > limit:
            raise FormatError(f"file is {size} bytes, more than the {limit} allowed")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    if len(data) > limit:
        raise FormatError(f"file grew past the {limit} bytes allowed while being read")
    return data


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words ("a FIFO"), for a one-line refusal."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):  # only an lstat sees one
        return "a symbolic link"
    return "not a plain file"
