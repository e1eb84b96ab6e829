"""The episode journal ``.atrex_long_horizon/journal.json`` (FORMATS §4).

Experiments are free-form objects written by the agent. The usual keys become text fields
(a non-string value, say a structured ``evidence`` object, is shown as compact JSON) and
the object itself stays in ``raw``. An element that is not an object is skipped and
reported, the rest of the journal is kept.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import msgspec

from .fields import Fields, raw_json, read_document, render_text
from .problems import ReadResult

STATES = ("in_progress", "candidate_ready", "staged_ready", "pivot", "blocked")
DECISIONS = ("continue", "revert", "pivot", "keep_as_best", "reject_and_continue", "blocked")
EXPERIMENT_KEYS = ("name", "hypothesis", "change", "evidence", "result", "decision", "timestamp")


class Experiment(msgspec.Struct, frozen=True):
    name: str | None
    hypothesis: str | None
    change: str | None
    evidence: str | None
    result: str | None
    decision: str | None
    timestamp: str | None
    raw: dict

    to_json = raw_json


def parse_experiment(obj: Any, where: str | None = None) -> Experiment:
    f = Fields(obj, where)
    return Experiment(*(render_text(f.value(key)) for key in EXPERIMENT_KEYS), raw=obj)


class Outcome(msgspec.Struct, frozen=True):
    summary: str | None
    next_directions: tuple[str, ...] | None
    raw: dict

    to_json = raw_json


def parse_outcome(obj: Any, where: str) -> Outcome:
    f = Fields(obj, where)
    return Outcome(summary=f.string("summary"), next_directions=f.strings("next_directions"), raw=obj)


class Journal(msgspec.Struct, frozen=True):
    schema_version: int | None
    episode: int | None
    memory_version: int | None
    base_commit: str | None
    episode_branch: str | None
    state: str | None
    experiments: tuple[Experiment, ...] | None
    outcome: Outcome | None
    created_at: str | None
    finalized_at: str | None
    candidate_commit: str | None
    raw: dict

    def to_json(self) -> dict:
        if self.experiments is None:
            return dict(self.raw)
        return {**self.raw, "experiments": [experiment.to_json() for experiment in self.experiments]}


def parse_journal(obj: Any, note: Callable[[str], None] | None = None) -> Journal:
    """A journal; a non-object experiment raises, or with ``note`` is skipped and noted."""
    f = Fields(obj)
    outcome = f.value("outcome")
    return Journal(
        schema_version=f.integer("schema_version"),
        episode=f.integer("episode"),
        memory_version=f.version("memory_version"),
        base_commit=f.text("base_commit"),
        episode_branch=f.text("episode_branch"),
        state=f.string("state"),
        experiments=f.records("experiments", parse_experiment, note),
        outcome=None if outcome is None else parse_outcome(outcome, "outcome"),
        created_at=f.string("created_at"),
        finalized_at=f.string("finalized_at"),
        candidate_commit=f.text("candidate_commit"),
        raw=obj,
    )


def read_journal(path: str | os.PathLike) -> ReadResult[Journal]:
    return read_document(path, parse_journal)
