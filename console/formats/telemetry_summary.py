"""Per-episode token summary ``episodes/eNNNN/telemetry.summary.json`` (FORMATS §2).

Token counts the backend did not report stay ``None``: an ``unavailable`` measurement has
no numbers, and a missing count is never shown as zero tokens.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any, Mapping

import msgspec

from .fields import Fields, raw_json, read_document
from .problems import ReadResult

SCHEMA_VERSION = "atrex_long_horizon_episode_telemetry_v1"
MEASUREMENTS = ("exact", "partial", "unavailable")


class TokenUsage(msgspec.Struct, frozen=True):
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    total_tokens: int | None
    measurement: str | None
    raw: dict

    to_json = raw_json


def parse_token_usage(obj: Any, where: str) -> TokenUsage:
    f = Fields(obj, where)
    return TokenUsage(
        input_tokens=f.integer("input_tokens"),
        output_tokens=f.integer("output_tokens"),
        cache_read_tokens=f.integer("cache_read_tokens"),
        cache_write_tokens=f.integer("cache_write_tokens"),
        total_tokens=f.integer("total_tokens"),
        measurement=f.string("measurement"),
        raw=obj,
    )


def _usage(f: Fields | None, key: str) -> TokenUsage | None:
    if f is None or not f.has(key):
        return None
    return parse_token_usage(f.value(key), f.name(key))


class PhaseTokens(msgspec.Struct, frozen=True):
    usage: TokenUsage | None
    interval_count: int | None
    measurement: str | None
    reason: str | None
    raw: dict

    to_json = raw_json


def _phase(obj: Any, where: str) -> PhaseTokens:
    f = Fields(obj, where)
    return PhaseTokens(
        usage=_usage(f, "usage"),
        interval_count=f.integer("interval_count"),
        measurement=f.string("measurement"),
        reason=f.string("reason"),
        raw=obj,
    )


class TelemetrySummary(msgspec.Struct, frozen=True):
    schema_version: str | None
    episode: int | None
    version: int | None  # memory version ("vN")
    status: str | None
    accepted: bool | None
    control_tokens: int | None
    resume_count: int | None
    invocation_count: int | None
    measurement: str | None  # exact | partial | unavailable
    reason_codes: tuple[str, ...] | None
    terminal_usage: TokenUsage | None
    phases: Mapping[str, PhaseTokens] | None
    orchestration: TokenUsage | None
    unattributed: TokenUsage | None
    coverage: Any  # as written (a fraction or a per-phase object, by generation)
    reconciliation_status: str | None
    phase_measurement: str | None
    phase_reason_codes: tuple[str, ...] | None
    raw: dict

    to_json = raw_json


def parse_telemetry_summary(obj: Any) -> TelemetrySummary:
    f = Fields(obj)
    tokens = f.nested("phase_tokens")
    phases = tokens.mapping("phases") if tokens else None
    return TelemetrySummary(
        schema_version=f.string("schema_version") or f.string("schema"),
        episode=f.integer("episode"),
        version=f.version("version"),
        status=f.string("status"),
        accepted=f.boolean("accepted"),
        control_tokens=f.integer("control_tokens"),
        resume_count=f.integer("resume_count"),
        invocation_count=f.integer("invocation_count"),
        measurement=f.string("measurement"),
        reason_codes=f.strings("reason_codes"),
        terminal_usage=_usage(tokens, "terminal_usage"),
        phases=(
            None
            if phases is None
            else MappingProxyType(
                {name: _phase(value, f"phase_tokens.phases.{name}") for name, value in phases.items()}
            )
        ),
        orchestration=_usage(tokens, "orchestration"),
        unattributed=_usage(tokens, "unattributed"),
        coverage=tokens.value("coverage") if tokens else None,
        reconciliation_status=tokens.string("reconciliation_status") if tokens else None,
        phase_measurement=tokens.string("measurement") if tokens else None,
        phase_reason_codes=tokens.strings("reason_codes") if tokens else None,
        raw=obj,
    )


def read_telemetry_summary(path: str | os.PathLike) -> ReadResult[TelemetrySummary]:
    return read_document(path, lambda obj, note: parse_telemetry_summary(obj))
