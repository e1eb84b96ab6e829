"""Telemetry records: ``.atrex_long_horizon/telemetry.jsonl`` (FORMATS §2).

This is the hottest reader in episcope (a long campaign holds millions of lines). Records
are msgspec Structs decoded straight from JSON: msgspec checks every field's type in C and
builds no intermediate dict, which is both faster and several times smaller in memory than
``orjson.loads`` followed by validation. Unknown extra keys are ignored.
"""

from __future__ import annotations

from datetime import datetime, timezone
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


class TelemetryRecord(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One FORMATS §2 record; absent fields are None (never 0)."""

    event: EventName
    schema_version: Optional[str] = None
    campaign_id: Optional[str] = None
    iteration_id: str = "unknown"
    attempt_id: str = "attempt"
    timestamp: Optional[datetime] = None  # decoded in C; naive times are taken as UTC
    monotonic_seconds: Optional[float] = None
    source: Optional[str] = None
    measurement: Optional[str] = None
    phase: Optional[str] = None
    action: Optional[str] = None
    marker_id: Optional[str] = None
    source_kind: Optional[str] = None
    reference: Optional[str] = None
    operation_id: Optional[str] = None
    category: Optional[str] = None
    duration_seconds: Optional[float] = None
    status: Optional[str] = None
    exit_status: Optional[int] = None
    failure_type: Optional[str] = None

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


_decoder = msgspec.json.Decoder(TelemetryRecord)


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


def decode_telemetry_lines(data: bytes) -> list[TelemetryRecord]:
    """Decode a block of whole lines at once; raises on the first bad line (see ingest)."""
    try:
        return _decoder.decode_lines(data)
    except UnicodeDecodeError as exc:  # keep the DecodeError contract callers catch
        raise msgspec.DecodeError(f"invalid UTF-8: {exc}") from None


def telemetry_from_obj(obj: Any) -> TelemetryRecord:
    """Check an already decoded object (for callers that hold dicts, e.g. tests)."""
    if type(obj) is not dict:
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    try:
        return msgspec.convert(obj, TelemetryRecord)
    except msgspec.ValidationError as exc:
        raise FormatError(f"invalid telemetry record: {exc}") from None
