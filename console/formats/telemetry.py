"""Telemetry records: ``.atrex_long_horizon/telemetry.jsonl`` (FORMATS §2).

This is the hottest reader in episcope (a long campaign holds millions of lines), so a
record is a NamedTuple built positionally and the decoded dict is kept as ``raw`` for the
rarely used extra fields instead of copying every key.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

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


class TelemetryRecord(NamedTuple):
    event: str
    iteration_id: str
    attempt_id: str
    monotonic_seconds: float | None
    timestamp: str | None
    campaign_id: str | None
    source: str | None
    measurement: str | None
    raw: dict

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @property
    def phase(self) -> str | None:
        return self.raw.get("phase")

    @property
    def operation_id(self) -> str | None:
        return self.raw.get("operation_id")


def parse_telemetry_line(line: bytes | str) -> TelemetryRecord:
    """Decode one telemetry line; raise :class:`FormatError` with a one-line reason."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON: {exc}") from None
    return telemetry_from_obj(obj)


def telemetry_from_obj(obj: Any) -> TelemetryRecord:
    if type(obj) is not dict:
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    event = obj.get("event")
    if event not in EVENTS:
        raise FormatError(f"unknown telemetry event {event!r}")
    mono = obj.get("monotonic_seconds")
    if mono is not None and (type(mono) is not float and type(mono) is not int or type(mono) is bool):
        raise FormatError(f"monotonic_seconds is {type(mono).__name__}, not a number")
    iteration = obj.get("iteration_id")
    attempt = obj.get("attempt_id")
    return TelemetryRecord(
        event,
        iteration if type(iteration) is str else "unknown",
        attempt if type(attempt) is str else "attempt",
        mono,
        obj.get("timestamp"),
        obj.get("campaign_id"),
        obj.get("source"),
        obj.get("measurement"),
        obj,
    )
