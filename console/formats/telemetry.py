"""Telemetry records: ``.atrex_long_horizon/telemetry.jsonl`` (FORMATS §2).

This is the hottest reader in episcope (a long campaign holds millions of lines). Records
are msgspec Structs decoded straight from JSON: msgspec checks every field's type in C and
builds no intermediate dict. Unknown extra keys are ignored.

The event path decodes each line into a ``TelemetryRecord``; a cold scan, which only
folds, decodes into ``FoldedTelemetry``, the fields the reducer reads and nothing else.
"""

from datetime import UTC, datetime
from typing import Any, Literal

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

    action: str | None = None
    attempt_id: str = "attempt"
    campaign_id: str | None = None
    category: str | None = None
    duration_seconds: float | None = None
    event: EventName
    exit_status: int | None = None
    failure_type: str | None = None
    iteration_id: str = "unknown"
    marker_id: str | None = None
    measurement: str | None = None
    monotonic_seconds: float | None = None
    operation_id: str | None = None
    phase: str | None = None
    reference: str | None = None
    schema_version: str | None = None
    source: str | None = None
    source_kind: str | None = None
    status: str | None = None
    timestamp: datetime | None = None  # decoded in C; naive times are taken as UTC

    def __post_init__(self) -> None:
        _require_phase(self.event, self.phase)

    def to_json(self) -> dict[str, Any]:
        built: dict[str, Any] = msgspec.to_builtins(self)
        return built

    @property
    def epoch(self) -> float | None:
        """``timestamp`` as seconds since the epoch (None when the record has none)."""
        return record_epoch(self.timestamp)


def _require_phase(event: str, phase: str | None) -> None:
    # msgspec checks types only; a phase marker without its phase cannot be placed on the
    # timeline, so it is a broken record (reported with its offset), not a span.
    if phase is None and event[0] == "p":
        raise ValueError(f"{event} without a phase")


def record_epoch(ts: datetime | None) -> float | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


_decoder = msgspec.json.Decoder(TelemetryRecord)


class FoldedTelemetry(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What the reducer folds of a telemetry record, for a cold scan (FORMATS §2).

    The same fields, types and defaults as ``TelemetryRecord``, less the ones the fold
    never reads (action, campaign_id, marker_id, measurement, schema_version, source): a
    cold scan of a million lines builds a million of these. So a record whose only fault
    is a wrong type in one of those six is folded here, and reported as unreadable by the
    event path. The phase check is ``decode_folded_lines``'s, once per chunk.
    """

    attempt_id: str = "attempt"
    category: str | None = None
    duration_seconds: float | None = None
    event: EventName
    exit_status: int | None = None
    failure_type: str | None = None
    iteration_id: str = "unknown"
    monotonic_seconds: float | None = None
    operation_id: str | None = None
    phase: str | None = None
    reference: str | None = None
    source_kind: str | None = None
    status: str | None = None
    timestamp: datetime | None = None


_folded_decoder = msgspec.json.Decoder(FoldedTelemetry)


def decode_folded_lines(lines: list[bytes]) -> list[FoldedTelemetry] | None:
    """The records of a chunk of lines (empty lines skipped), or None when a line is not
    exactly one record: then read the lines one by one to report the bad ones."""
    # Line by line, not ``Decoder.decode_lines`` over the chunk: that reads JSON values, not
    # lines (it skips a blank line, takes two records glued on one line, one spread over
    # two), so telling a chunk of one record per line apart costs a count of its newlines
    # and of its record boundaries, which measured as much as splitting it.
    try:
        records = list(map(_folded_decoder.decode, filter(None, lines)))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return None
    # TelemetryRecord's own check, made here over the chunk rather than by a Python call
    # per record, which costs as much as the decoding itself.
    if any(record.phase is None and record.event[0] == "p" for record in records):
        return None
    return records


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
    except RecursionError:  # msgspec's answer to a value nested too deep, even in an ignored key
        raise FormatError("invalid JSON: nested too deeply") from None
