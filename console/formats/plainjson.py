"""JSON with the standard library only, for code that runs where orjson is absent.

The sandbox and ``tools/iteration_trace.py`` run on the GPU machine, which has no orjson.
They write the same bytes :mod:`console.formats.jsonio` would for the objects episcope
writes (sorted keys, no spaces, UTF-8), with the same two safe ways of writing: a whole
document through a temporary file renamed over the target, and one whole line per
``O_APPEND`` write.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from .bounded_read import read_regular_file
from .problems import FormatError, ReadResult, Unreadable, one_line

T = TypeVar("T")


def loads(data: bytes | str) -> Any:
    """Decode JSON with the standard library, which (unlike strict JSON) accepts the
    ``NaN``/``Infinity`` tokens Python writers emit for a kernel that produced NaNs, but
    refuses a number no float holds (``1e999999``) rather than reading it as infinity."""
    return json.loads(data, parse_float=_float)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def dumps(obj: Any, *, indent: bool = False) -> bytes:
    try:
        return _dumps(obj, indent)
    except ValueError:
        # NaN and infinities are not JSON; like orjson, write them as null.
        return _dumps(_finite(obj), indent)


def _dumps(obj: Any, indent: bool) -> bytes:
    if indent:
        text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    else:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def append_line(path: str | os.PathLike[str], line: bytes) -> None:
    """Append one whole line with a single ``write`` on an ``O_APPEND`` descriptor.

    POSIX appends of one ``write`` land at the end of the file as a unit, so concurrent
    writers never interleave inside a line. Only a regular file is appended to: a FIFO,
    socket or device named as ``path`` raises ``OSError`` at once instead of blocking.
    """
    if not line.endswith(b"\n"):
        line += b"\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader forever (with
    # it, no reader is ENXIO); it changes nothing for a regular file.
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY, 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "not a regular file", str(target)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(target))
        written = os.write(fd, line)
        if written != len(line):  # pragma: no cover - only on a full disk
            raise OSError(f"short append to {target}: {written} of {len(line)} bytes")
    finally:
        os.close(fd)


def append_json_line(path: str | os.PathLike[str], obj: Any) -> None:
    append_line(path, dumps(obj) + b"\n")


@contextmanager
def atomic_replacement(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh empty file beside ``path`` to write the new content into (by any means: a
    copy, a git command); when the block ends it is renamed over ``path`` in one step, or
    removed if the block raised. Readers of ``path`` see the old file or the new, never half
    of one. The one temporary-file-and-rename of the host side; ``atomic_write_bytes`` is
    built on it."""
    import tempfile  # only writers need it; readers start faster without

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over: never half a file."""
    with atomic_replacement(path) as fresh, open(fresh, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: bool = True) -> None:
    atomic_write_bytes(path, dumps(obj, indent=indent) + b"\n")


def read_json_document(
    path: str | os.PathLike[str], parse: Callable[[Any], T], *, decode: Callable[[bytes], Any] = loads
) -> ReadResult[T]:
    """Read one JSON document and hand the decoded object to ``parse``.

    ``parse`` raises :class:`FormatError` for a document that does not follow its format.
    A missing file is not a problem (the artifact simply does not exist yet): the result is
    empty with no problems. Anything but a bounded regular file is refused unread
    (:mod:`bounded_read`), and a document nested too deeply to decode is reported like any
    other unreadable one. ``decode`` lets :mod:`jsonio` use orjson for the same rules.
    """
    name = str(path)
    try:
        data = read_regular_file(path)
    except FileNotFoundError:
        return ReadResult(None)
    except (OSError, FormatError) as exc:
        return ReadResult(None, (Unreadable(name, None, one_line(exc)),))
    try:
        obj = decode(data)
    except ValueError as exc:  # json's and orjson's decode errors, and bad UTF-8
        return ReadResult(None, (Unreadable(name, None, f"invalid JSON: {one_line(exc)}"),))
    except RecursionError:
        return ReadResult(None, (Unreadable(name, None, "invalid JSON: nested too deeply"),))
    try:
        return ReadResult(parse(obj))
    except FormatError as exc:
        return ReadResult(None, (Unreadable(name, None, one_line(exc)),))
    except RecursionError:
        return ReadResult(None, (Unreadable(name, None, "nested too deeply"),))
