"""Per-episode token summary ``episodes/eNNNN/telemetry.summary.json`` (FORMATS §2).

Token counts the backend did not report stay ``None``: an ``unavailable`` measurement has
no numbers, and a missing count is never shown as zero tokens.
"""

import os
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .problems import ReadResult
from .records import Record, Version, convert, read_document

SCHEMA_VERSION = "atrex_long_horizon_episode_telemetry_v1"
MEASUREMENTS = ("exact", "partial", "unavailable")


class TokenUsage(Record, frozen=True):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    total_tokens: int | None = None
    measurement: str | None = None


class PhaseTokens(Record, frozen=True):
    usage: TokenUsage | None = None
    interval_count: int | None = None
    measurement: str | None = None
    reason: str | None = None


class PhaseTokenBlock(Record, frozen=True):
    """``phase_tokens``: the episode's tokens split by phase."""

    terminal_usage: TokenUsage | None = None
    phases: dict[str, PhaseTokens] | None = None
    orchestration: TokenUsage | None = None
    unattributed: TokenUsage | None = None
    coverage: Any = None  # as written (a fraction or a per-phase object, by generation)
    reconciliation_status: str | None = None
    measurement: str | None = None
    reason_codes: tuple[str, ...] | None = None


class TelemetrySummary(Record, frozen=True):
    schema_version: str | None = None
    schema: str | None = None  # the older spelling of schema_version
    episode: int | None = None
    version: Version | None = None  # memory version ("vN")
    status: str | None = None
    accepted: bool | None = None
    control_tokens: int | None = None
    resume_count: int | None = None
    invocation_count: int | None = None
    measurement: str | None = None  # exact | partial | unavailable
    reason_codes: tuple[str, ...] | None = None
    phase_tokens: PhaseTokenBlock | None = None

    def __post_init__(self) -> None:
        if self.schema_version is None and self.schema:
            msgspec.structs.force_setattr(self, "schema_version", self.schema)

    # The phase block's figures by the names the console shows them under.
    @property
    def terminal_usage(self) -> TokenUsage | None:
        return self.phase_tokens.terminal_usage if self.phase_tokens else None

    @property
    def phases(self) -> Mapping[str, PhaseTokens] | None:
        return self.phase_tokens.phases if self.phase_tokens else None

    @property
    def orchestration(self) -> TokenUsage | None:
        return self.phase_tokens.orchestration if self.phase_tokens else None

    @property
    def unattributed(self) -> TokenUsage | None:
        return self.phase_tokens.unattributed if self.phase_tokens else None

    @property
    def coverage(self) -> Any:
        return self.phase_tokens.coverage if self.phase_tokens else None

    @property
    def reconciliation_status(self) -> str | None:
        return self.phase_tokens.reconciliation_status if self.phase_tokens else None


def parse_telemetry_summary(obj: Any) -> TelemetrySummary:
    # Phases are checked one by one first so that an error names the phase, which a
    # whole-document check reports only as ``phases[...]``.
    block = obj.get("phase_tokens") if isinstance(obj, dict) else None
    phases = block.get("phases") if isinstance(block, dict) else None
    if isinstance(phases, dict):
        for name, value in phases.items():
            convert(value, PhaseTokens, f"phase_tokens.phases.{name}")
    return convert(obj, TelemetrySummary)


def read_telemetry_summary(path: str | os.PathLike[str]) -> ReadResult[TelemetrySummary]:
    parse: Callable[[Any, Callable[[str], None]], TelemetrySummary] = lambda obj, note: parse_telemetry_summary(obj)
    return read_document(path, parse)
