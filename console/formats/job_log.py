"""A sandbox job's ``stdout.log`` and ``stderr.log`` (FORMATS §8): plain text, one event a line.

The job writes whatever it likes; a line is decoded leniently (invalid UTF-8 becomes U+FFFD)
and kept as written, control characters included. Whoever shows it makes them visible.
"""

from __future__ import annotations

import os

STREAMS = ("stdout", "stderr")


def parse_log_line(line: bytes | str) -> str:
    """One line of a job log, without its line break."""
    if isinstance(line, (bytes, bytearray)):
        line = bytes(line).decode("utf-8", errors="replace")
    return line.rstrip("\r\n")


def log_owner(path: str) -> tuple[str, str]:
    """(job id, stream) of ``.../sandbox/<job id>/<stream>.log``."""
    directory, name = os.path.split(path)
    return os.path.basename(directory), name.removesuffix(".log")
