"""Telemetry records: ``.atrex_long_horizon/telemetry.jsonl`` (FORMATS §2).

This is the hottest reader in episcope (a long campaign holds millions of lines). Records
are msgspec Structs decoded straight from JSON: msgspec checks every field's type in C and
builds no intermediate dict, which is both faster and several times smaller in memory than
``orjson.loads`` followed by validation. Unknown extra keys are ignored.

A cold scan needs less than a record: ``decode_telemetry_block`` gives the reducer one row
per line (``ROW_FIELDS``), through the compiled decoder in ``_telemetry_rows.c`` where it
is built, with msgspec as its reference and fallback.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from itertools import repeat
from operator import attrgetter, sub
from typing import Any, Literal, Optional

import msgspec

from .problems import FormatError
from .telemetry_builders import (  # noqa: F401 - re-exported: the writers' public names
    ENV_ATTEMPT,
    ENV_CAMPAIGN,
    ENV_ITERATION,
    ENV_TRACE,
    EVENTS,
    MAX_REFERENCE_CHARS,
    PHASES,
    RECEIPT_PREFIX,
    RECEIPT_SCHEMA,
    SANDBOX_CATEGORIES,
    SCHEMA_VERSION,
    SOURCE_KINDS,
    common_fields,
    new_operation_id,
    phase_receipt,
    phase_record,
    safe_reference,
    sandbox_category,
    sandbox_completed_record,
    sandbox_started_record,
    source_read_record,
    utc_timestamp,
)


EventName = Literal[
    "phase_started",
    "phase_completed",
    "source_read",
    "sandbox_operation_started",
    "sandbox_operation_completed",
]


class TelemetryRecord(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """One FORMATS §2 record; absent fields are None (never 0).

    Fields are in alphabetical order, the order writers emit keys in (sorted): msgspec
    looks each key up starting after the field it matched last, so in this order every
    lookup hits at once, which makes decoding a fifth cheaper.
    """

    action: Optional[str] = None
    attempt_id: str = "attempt"
    campaign_id: Optional[str] = None
    category: Optional[str] = None
    duration_seconds: Optional[float] = None
    event: EventName
    exit_status: Optional[int] = None
    failure_type: Optional[str] = None
    iteration_id: str = "unknown"
    marker_id: Optional[str] = None
    measurement: Optional[str] = None
    monotonic_seconds: Optional[float] = None
    operation_id: Optional[str] = None
    phase: Optional[str] = None
    reference: Optional[str] = None
    schema_version: Optional[str] = None
    source: Optional[str] = None
    source_kind: Optional[str] = None
    status: Optional[str] = None
    timestamp: Optional[datetime] = None  # decoded in C; naive times are taken as UTC

    def __post_init__(self) -> None:
        # msgspec checks types only; a phase marker without its phase cannot be placed on
        # the timeline, so it is a broken record (reported with its offset), not a span.
        if self.phase is None and self.event[0] == "p":
            raise ValueError(f"{self.event} without a phase")

    def to_json(self) -> dict:
        return msgspec.to_builtins(self)

    @property
    def epoch(self) -> float | None:
        """``timestamp`` as seconds since the epoch (None when the record has none)."""
        return record_epoch(self.timestamp)


def record_epoch(ts: datetime | None) -> float | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.timestamp()


_timestamp_of = attrgetter("timestamp")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def record_epochs(records: Sequence[TelemetryRecord]) -> list[float | None]:
    """``epoch`` of every record, in one pass (a cold ingest converts millions).

    ``(ts - epoch).total_seconds()`` is exactly what ``datetime.timestamp`` computes for
    an aware time; mapped over the records it runs without the interpreter. A record
    without a timestamp, or with a naive one, makes the subtraction raise, and then the
    block is converted one record at a time.
    """
    try:
        return list(map(timedelta.total_seconds, map(sub, map(_timestamp_of, records), repeat(_EPOCH))))
    except TypeError:
        return [record_epoch(ts) for ts in map(_timestamp_of, records)]


_decoder = msgspec.json.Decoder(TelemetryRecord)

# What the reducer folds of a record, as one tuple per record: a "row". The cold scan
# gets rows straight from the compiled decoder; records read any other way become rows
# through ``record_rows``.
ROW_FIELDS = (
    "event", "iteration_id", "attempt_id", "phase", "monotonic_seconds", "source_kind", "reference",
    "operation_id", "category", "duration_seconds", "status", "exit_status", "failure_type",
)
row_of = attrgetter(*ROW_FIELDS)

try:
    from ._telemetry_rows import ROW_FIELDS as _COMPILED_ROW_FIELDS
    from ._telemetry_rows import decode_block as _compiled_decode_block
except ImportError:  # not compiled on this machine: msgspec reads everything
    _compiled_decode_block = None
else:
    if _COMPILED_ROW_FIELDS != ROW_FIELDS:
        raise ImportError("console/formats/_telemetry_rows.c disagrees with ROW_FIELDS; rebuild it")

COMPILED = _compiled_decode_block is not None
# EPISCOPE_PURE_PYTHON=1 reads telemetry through msgspec alone (same results, slower).
_decode_block = None if os.environ.get("EPISCOPE_PURE_PYTHON") == "1" else _compiled_decode_block


def use_compiled_decoder(enabled: bool) -> bool:
    """Turn the compiled decoder on or off (where it is built); returns the previous
    setting. The benchmarks time both paths in one run with it."""
    global _decode_block
    previous = _decode_block is not None
    _decode_block = _compiled_decode_block if enabled else None
    return previous


def record_rows(records: Sequence[TelemetryRecord]) -> list[tuple]:
    return list(map(row_of, records))


def decode_telemetry_block(block) -> tuple[list[tuple], list[float | None]] | None:
    """Rows and times (``epoch``) of a block of lines joined by newlines, or None when a
    line is not exactly one record (then read the lines one by one to report it).

    Empty lines are skipped. The compiled decoder reads the plain form writers emit; a
    line in any other form (an escape, a non-ASCII byte...) is read by msgspec, and the
    compiled decoder goes on after it. Both give the same rows.
    """
    if _decode_block is None:
        return decode_telemetry_block_msgspec(block)
    view = memoryview(block)
    rows, ats, declined = _decode_block(view)
    while declined is not None:
        start, end = declined
        try:
            record = _decoder.decode(view[start:end])
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return None
        rows.append(row_of(record))
        ats.append(record_epoch(record.timestamp))
        view = view[end + 1:]
        more_rows, more_ats, declined = _decode_block(view)
        rows += more_rows
        ats += more_ats
    return rows, ats


def decode_telemetry_block_msgspec(block) -> tuple[list[tuple], list[float | None]] | None:
    """``decode_telemetry_block`` through msgspec alone: the reference the compiled
    decoder is tested against, and the path where it is not built."""
    records = decode_telemetry_all(list(filter(None, bytes(block).split(b"\n"))))
    if records is None:
        return None
    return record_rows(records), record_epochs(records)


def parse_telemetry_line(line: bytes | str) -> TelemetryRecord:
    """Decode one telemetry line; raise :class:`FormatError` with a one-line reason."""
    try:
        return _decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise FormatError(f"invalid telemetry record: {exc}") from None
    except msgspec.DecodeError as exc:
        raise FormatError(f"invalid JSON: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec raises this for bad UTF-8 inside a string
        raise FormatError(f"invalid UTF-8: {exc}") from None


def decode_telemetry_each(lines: list[bytes]) -> list[TelemetryRecord]:
    """Decode lines, one record each, in one C loop; raises msgspec's DecodeError or
    ValidationError on the first line that is not exactly one record (a blank one too)."""
    try:
        return list(map(_decoder.decode, lines))
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"invalid UTF-8: {exc}") from None


def decode_telemetry_all(lines: list[bytes]) -> list[TelemetryRecord] | None:
    """``decode_telemetry_each``, or None when a line is not exactly one record (a bad
    one, or a blank one): then read the lines one by one to report the bad ones."""
    try:
        return decode_telemetry_each(lines)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def telemetry_from_obj(obj: Any) -> TelemetryRecord:
    """Check an already decoded object (for callers that hold dicts, e.g. tests)."""
    if type(obj) is not dict:
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    try:
        return msgspec.convert(obj, TelemetryRecord)
    except msgspec.ValidationError as exc:
        raise FormatError(f"invalid telemetry record: {exc}") from None
