"""Telemetry records: ``.atrex_long_horizon/telemetry.jsonl`` (FORMATS §2).

This is the hottest reader in episcope (a long campaign holds millions of lines). Records
are msgspec Structs decoded straight from JSON: msgspec checks every field's type in C and
builds no intermediate dict. Unknown extra keys are ignored.

The event path and a cold scan decode into the same ``TelemetryRecord``, so a line one
of them reads the other reads alike, and a line one reports as broken so does the other.
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

    def to_json(self) -> dict[str, Any]:
        built: dict[str, Any] = msgspec.to_builtins(self)
        return built


def record_epoch(ts: datetime | None) -> float | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


_decoder = msgspec.json.Decoder(TelemetryRecord)


def decode_folded_lines(lines: list[bytes]) -> list[TelemetryRecord] | None:
    """The records of a chunk of lines (empty lines skipped), for a cold scan to fold; None
    when a line is not exactly one record: then read the lines one by one to report the bad
    ones."""
    # Line by line, not ``Decoder.decode_lines`` over the chunk: that reads JSON values, not
    # lines (it skips a blank line, takes two records glued on one line, one spread over
    # two), so telling a chunk of one record per line apart costs a count of its newlines
    # and of its record boundaries, which measured as much as splitting it.
    try:
        records = list(map(_decoder.decode, filter(None, lines)))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return None
    # msgspec checks types only; a phase marker without its phase cannot be placed on the
    # timeline, so it is a broken record (reported with its offset), not a span. Checked
    # over the chunk, not by a call per record (as ``__post_init__`` would), which cost as
    # much as the decoding itself.
    if any(record.phase is None and record.event[0] == "p" for record in records):
        return None
    return records


def parse_telemetry_line(line: bytes | str) -> TelemetryRecord:
    """Decode one telemetry line; raise :class:`FormatError` with a one-line reason."""
    try:
        record = _decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise FormatError(f"invalid telemetry record: {exc}") from None
    except msgspec.DecodeError as exc:
        raise FormatError(f"invalid JSON: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec raises this for bad UTF-8 inside a string
        raise FormatError(f"invalid UTF-8: {exc}") from None
    except RecursionError:  # msgspec's answer to a value nested too deep, even in an ignored key
        raise FormatError("invalid JSON: nested too deeply") from None
    if record.phase is None and record.event[0] == "p":  # as decode_folded_lines checks a chunk
        raise FormatError(f"invalid telemetry record: {record.event} without a phase")
    return record
