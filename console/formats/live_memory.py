"""The non-canonical progress mirror ``memory/live.json`` (FORMATS §4).

An observability view only, never promotion evidence: nothing here feeds the incumbent
curve. Older mirrors carry only a few of the fields; the rest stay ``None``.
"""

import os
from collections.abc import Callable
from typing import Any

import msgspec

from .journal import Experiment, Outcome, parse_experiment
from .problems import ReadResult
from .records import Record, Version, blank_to_none, convert, read_document

SCHEMA_VERSION = "atrex_long_horizon_live_v1"


class LiveMemory(Record, frozen=True):
    schema_version: str | None = None
    schema: str | None = None  # the older spelling of schema_version
    canonical: bool | None = None
    canonical_memory_recorded: bool | None = None
    note: str | None = None
    version: Version | None = None
    episode: int | None = None
    phase: str | None = None
    journal_state: str | None = None
    experiment_count: int | None = None
    latest_experiment: Experiment | None = None
    outcome: Outcome | None = None
    candidate_commit: str | None = None
    base_commit: str | None = None
    episode_branch: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    canonical_memory: str | None = None
    accepted: bool | None = None

    def __post_init__(self) -> None:
        blank_to_none(self, ("candidate_commit", "base_commit", "episode_branch", "canonical_memory"))
        if self.schema_version is None and self.schema:
            msgspec.structs.force_setattr(self, "schema_version", self.schema)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.latest_experiment is not None:
            out["latest_experiment"] = self.latest_experiment.to_json()
        return out


def parse_live_memory(obj: Any) -> LiveMemory:
    live = convert(_without_latest(obj), LiveMemory)
    latest = obj.get("latest_experiment")
    if latest is None:
        return live
    return msgspec.structs.replace(live, latest_experiment=parse_experiment(latest, "latest_experiment"))


def _without_latest(obj: Any) -> Any:
    return {k: v for k, v in obj.items() if k != "latest_experiment"} if isinstance(obj, dict) else obj


def read_live_memory(path: str | os.PathLike[str]) -> ReadResult[LiveMemory]:
    parse: Callable[[Any, Callable[[str], None]], LiveMemory] = lambda obj, note: parse_live_memory(obj)
    return read_document(path, parse)
