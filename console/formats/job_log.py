"""A sandbox job's ``stdout.log`` and ``stderr.log`` (FORMATS §8): plain text, one event a line.

The job writes whatever it likes; a line is decoded leniently (invalid UTF-8 becomes U+FFFD)
and kept as written, control characters included. Whoever shows it makes them visible.
"""

from __future__ import annotations

import os

from .problems import FormatError

STREAMS = ("stdout", "stderr")


def parse_log_line(line: bytes | str) -> str:
    """One line of a job log, without its line break."""
    if isinstance(line, (bytes, bytearray)):
        line = bytes(line).decode("utf-8", errors="replace")
    return line.rstrip("\r\n")


def parse_recorded_line(obj: object) -> str:
    """A line as a recording stores it: a JSON string (the line's text is not JSON itself)."""
    if not isinstance(obj, str):
        raise FormatError(f"a job log line is a string, not {type(obj).__name__}")
    return obj


def log_owner(path: str) -> tuple[str, str]:
    """(job id, stream) of ``.../sandbox/<job id>/<stream>.log``."""
    directory, name = os.path.split(path)
    return os.path.basename(directory), name.removesuffix(".log")
