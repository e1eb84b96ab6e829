"""The non-canonical progress mirror ``memory/live.json`` (FORMATS §4).

An observability view only, never promotion evidence: nothing here feeds the incumbent
curve. Older mirrors carry only a few of the fields; the rest stay ``None``.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from .fields import Fields, raw_json, read_document
from .journal import Experiment, Outcome, parse_experiment, parse_outcome
from .problems import ReadResult

SCHEMA_VERSION = "atrex_long_horizon_live_v1"


class LiveMemory(msgspec.Struct, frozen=True):
    schema_version: str | None
    canonical: bool | None
    canonical_memory_recorded: bool | None
    note: str | None
    version: int | None
    episode: int | None
    phase: str | None
    journal_state: str | None
    experiment_count: int | None
    latest_experiment: Experiment | None
    outcome: Outcome | None
    candidate_commit: str | None
    base_commit: str | None
    episode_branch: str | None
    created_at: str | None
    updated_at: str | None
    canonical_memory: str | None
    accepted: bool | None
    raw: dict

    to_json = raw_json


def parse_live_memory(obj: Any) -> LiveMemory:
    f = Fields(obj)
    latest = f.value("latest_experiment")
    outcome = f.value("outcome")
    return LiveMemory(
        schema_version=f.string("schema_version") or f.string("schema"),
        canonical=f.boolean("canonical"),
        canonical_memory_recorded=f.boolean("canonical_memory_recorded"),
        note=f.string("note"),
        version=f.version("version"),
        episode=f.integer("episode"),
        phase=f.string("phase"),
        journal_state=f.string("journal_state"),
        experiment_count=f.integer("experiment_count"),
        latest_experiment=None if latest is None else parse_experiment(latest, "latest_experiment"),
        outcome=None if outcome is None else parse_outcome(outcome, "outcome"),
        candidate_commit=f.text("candidate_commit"),
        base_commit=f.text("base_commit"),
        episode_branch=f.text("episode_branch"),
        created_at=f.string("created_at"),
        updated_at=f.string("updated_at"),
        canonical_memory=f.text("canonical_memory"),
        accepted=f.boolean("accepted"),
        raw=obj,
    )


def read_live_memory(path: str | os.PathLike) -> ReadResult[LiveMemory]:
    return read_document(path, lambda obj, note: parse_live_memory(obj))
