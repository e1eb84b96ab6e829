"""The episode journal ``.atrex_long_horizon/journal.json`` (FORMATS §4).

Experiments are free-form objects written by the agent. The usual keys become text fields
(a non-string value, say a structured ``evidence`` object, is shown as compact JSON) and
the object itself stays in ``raw``. An element that is not an object is skipped and
reported, the rest of the journal is kept.
"""

import os
from collections.abc import Callable
from typing import Any

import msgspec

from .problems import ReadResult, parse_each
from .records import Record, Rendered, Version, blank_to_none, convert, read_document

STATES = ("in_progress", "candidate_ready", "staged_ready", "pivot", "blocked")
DECISIONS = ("continue", "revert", "pivot", "keep_as_best", "reject_and_continue", "blocked")
EXPERIMENT_KEYS = ("name", "hypothesis", "change", "evidence", "result", "decision", "timestamp")


class _ExperimentText(Record, frozen=True):
    name: Rendered | None = None
    hypothesis: Rendered | None = None
    change: Rendered | None = None
    evidence: Rendered | None = None
    result: Rendered | None = None
    decision: Rendered | None = None
    timestamp: Rendered | None = None


class Experiment(_ExperimentText, frozen=True):
    # The agent's object as written: experiments carry keys of their own (wiki usage...).
    raw: dict[str, Any] = msgspec.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


def parse_experiment(obj: Any, where: str | None = None) -> Experiment:
    text = convert(obj, _ExperimentText, where)
    return Experiment(**msgspec.structs.asdict(text), raw=obj)


class Outcome(Record, frozen=True):
    summary: str | None = None
    next_directions: tuple[str, ...] | None = None


class Journal(Record, frozen=True):
    schema_version: int | None = None
    episode: int | None = None
    memory_version: Version | None = None
    base_commit: str | None = None
    episode_branch: str | None = None
    state: str | None = None
    experiments: tuple[Experiment, ...] | None = None
    outcome: Outcome | None = None
    created_at: str | None = None
    finalized_at: str | None = None
    candidate_commit: str | None = None

    def __post_init__(self) -> None:
        blank_to_none(self, ("base_commit", "episode_branch", "candidate_commit"))

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.experiments is not None:
            out["experiments"] = [experiment.to_json() for experiment in self.experiments]
        return out


def experiments_of(items: Any, where: str, note: Callable[[str], None] | None) -> tuple[Experiment, ...] | None:
    """Each experiment of an array; a bad one is noted and skipped, or raised without ``note``."""
    return None if items is None else parse_each(convert(items, list[Any], where), parse_experiment, where, note)


def parse_journal(obj: Any, note: Callable[[str], None] | None = None) -> Journal:
    """A journal; a non-object experiment raises, or with ``note`` is skipped and noted."""
    journal = convert(_without(obj, "experiments"), Journal)
    return msgspec.structs.replace(journal, experiments=experiments_of(obj.get("experiments"), "experiments", note))


def _without(obj: Any, *keys: str) -> Any:
    """The object minus keys its reader parses apart (a non-object is left to ``convert``)."""
    return {k: v for k, v in obj.items() if k not in keys} if isinstance(obj, dict) else obj


def read_journal(path: str | os.PathLike[str]) -> ReadResult[Journal]:
    return read_document(path, parse_journal)
