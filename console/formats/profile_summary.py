"""summary.txt of a profile directory (FORMATS §9)."""

import os

import msgspec

from .bounded_read import read_regular_file
from .problems import FormatError, ReadResult, Unreadable, one_line
from .profile_summary_text import DIAGNOSIS, HEADER, parse
from .records import Record, convert


class ProfileSummary(Record, frozen=True):
    kernel: str | None = None
    duration_us: float | None = None
    patterns: tuple[tuple[str, str, str, tuple[str, ...]], ...] = ()  # (id, severity, label, evidence)
    symptoms: tuple[str, ...] = ()
    localize: tuple[str, ...] = ()
    stalls: tuple[tuple[str, float], ...] = ()
    fields: dict[str, str] = msgspec.field(default_factory=dict)


def parse_profile_summary(text: str) -> ProfileSummary:
    if HEADER not in text and DIAGNOSIS not in text:
        raise FormatError(f"not an NCU profile summary (no '{HEADER}' header)")
    return convert(parse(text), ProfileSummary)


def read_profile_summary(path: str | os.PathLike[str]) -> ReadResult[ProfileSummary]:
    name = str(path)
    try:
        text = read_regular_file(path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ReadResult(None)
    except (OSError, FormatError) as exc:
        return ReadResult(None, (Unreadable(name, None, one_line(exc)),))
    try:
        return ReadResult(parse_profile_summary(text))
    except FormatError as exc:
        return ReadResult(None, (Unreadable(name, None, one_line(exc)),))
