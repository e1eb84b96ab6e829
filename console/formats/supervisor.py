"""Supervisor documents and log lines (FORMATS §3).

``state.json`` holds the campaign counters and every attempt; ``active_episode.json`` exists
only while an episode runs; ``episodes/eNNNN/attempt.json`` is one archived attempt; the
supervisor's stdout carries ``[long-horizon] ...`` lines.

``tokens`` in ``state.json`` is the settled total and the headline figure: nothing here adds
per-attempt tokens to it.
"""

import os
from collections.abc import Callable
from typing import Any

import msgspec

from .abba import AbbaVerdict, parse_verdict
from .problems import ReadResult, parse_each
from .records import Record, Rendered, Version, blank_to_none, convert, read_document

# The four modes of both generations. An unknown mode is kept as written rather than
# refusing the whole document: the console must still show an episode a newer supervisor
# runs.
MODES = ("fast", "full", "episode", "goal")
PHASES = (
    "preparing",
    "exploring",
    "verifying",
    "checking_fast_evaluator",
    "promoting",
    "promoted",
    "recording",
    "recorded",
)
ATTEMPT_STATUSES = (
    "candidate_ready",
    "staged_ready",
    "pivot",
    "blocked",
    "invalid_handoff",
    "interrupted",
    "protocol_failure",
)


class AttemptTelemetry(Record, frozen=True):
    summary: str | None = None  # path of the episode's telemetry.summary.json
    measurement: str | None = None
    reason_codes: tuple[str, ...] | None = None


class Attempt(Record, frozen=True):
    episode: int | None = None
    version: Version | None = None  # memory version, written as N or "vN"
    mode: str | None = None
    fast_trials: int | None = None
    status: str | None = None
    accepted: bool | None = None
    violation: str | None = None
    base_commit: str | None = None
    episode_branch: str | None = None
    episode_head: str | None = None
    candidate_commit: str | None = None
    changed_paths: tuple[str, ...] | None = None
    session_id: str | None = None
    resume_count: int | None = None
    tokens: int | None = None
    summary: str | None = None
    next_directions: tuple[Rendered, ...] | None = None
    # An ABBA verdict, parsed apart by parse_attempt (the verdict record is shared with the
    # GPU side); None when absent or not an ABBA verdict (a single-evaluator check).
    verification: AbbaVerdict | None = None
    telemetry: AttemptTelemetry | None = None
    promotion_commit: str | None = None
    outcome_commit: str | None = None

    def __post_init__(self) -> None:
        blank_to_none(self, ("violation", "base_commit", "episode_branch", "episode_head", "candidate_commit",
                             "session_id", "promotion_commit", "outcome_commit"))

    def to_json(self) -> dict[str, Any]:
        out = Record.to_json(msgspec.structs.replace(self, verification=None))
        # The verdict as read (its record keeps the object) parses back to an equal record.
        out["verification"] = None if self.verification is None else dict(self.verification.raw)
        return out

    @property
    def telemetry_summary(self) -> str | None:
        return self.telemetry.summary if self.telemetry else None


def parse_attempt(obj: Any, where: str | None = None) -> Attempt:
    prefix = f"{where}." if where else ""
    verification = obj.get("verification") if isinstance(obj, dict) else None
    if verification is not None:
        verification = convert(verification, dict[str, Any], f"{prefix}verification")
    rest = {k: v for k, v in obj.items() if k != "verification"} if isinstance(obj, dict) else obj
    attempt = convert(rest, Attempt, where)
    # A fast episode checked by the single evaluator stores no ABBA gate.
    if verification is None or verification.get("gate") is None:
        return attempt
    return msgspec.structs.replace(attempt, verification=parse_verdict(verification, f"{prefix}verification"))


def read_attempt(path: str | os.PathLike[str]) -> ReadResult[Attempt]:
    parse: Callable[[Any, Callable[[str], None]], Attempt] = lambda obj, note: parse_attempt(obj)
    return read_document(path, parse)


class SupervisorState(Record, frozen=True):
    episodes: int | None = None
    accepted: int | None = None
    rejected: int | None = None
    pivoted: int | None = None
    blocked: int | None = None
    protocol_failures: int | None = None
    interrupted: int | None = None
    tokens: int | None = None  # settled total: the headline figure
    consecutive_without_promotion: int | None = None
    attempts: tuple[Attempt, ...] | None = None
    usage_receipts: dict[str, Any] | None = None  # newer generation

    def to_json(self) -> dict[str, Any]:
        out = msgspec.structs.asdict(msgspec.structs.replace(self, attempts=None))
        out["attempts"] = None if self.attempts is None else [attempt.to_json() for attempt in self.attempts]
        return out


def parse_state(obj: Any, note: Callable[[str], None] | None = None) -> SupervisorState:
    """``state.json``. A malformed attempt raises, or with ``note`` is skipped and noted."""
    rest = {k: v for k, v in obj.items() if k != "attempts"} if isinstance(obj, dict) else obj
    state = convert(rest, SupervisorState)
    items = obj.get("attempts")
    if items is None:
        return state
    attempts = parse_each(convert(items, list[Any], "attempts"), parse_attempt, "attempts", note)
    return msgspec.structs.replace(state, attempts=attempts)


def read_state(path: str | os.PathLike[str]) -> ReadResult[SupervisorState]:
    """``state.json``; a bad attempt is reported as a problem and the rest is kept."""
    return read_document(path, parse_state)


class ActiveEpisode(Record, frozen=True):
    episode: int | None = None
    memory_version: Version | None = None
    base_commit: str | None = None
    episode_branch: str | None = None
    worktree: str | None = None
    mode: str | None = None
    fast_trials: int | None = None
    phase: str | None = None
    terminal_status: str | None = None
    promotion_commit: str | None = None
    outcome_commit: str | None = None
    resumed_from_phase: str | None = None
    restart_count: int | None = None

    def __post_init__(self) -> None:
        blank_to_none(self, ("base_commit", "episode_branch", "worktree", "terminal_status", "promotion_commit",
                             "outcome_commit", "resumed_from_phase"))


def parse_active_episode(obj: Any) -> ActiveEpisode:
    return convert(obj, ActiveEpisode)


def read_active_episode(path: str | os.PathLike[str]) -> ReadResult[ActiveEpisode]:
    """``active_episode.json``; a missing file means no episode is running."""
    parse: Callable[[Any, Callable[[str], None]], ActiveEpisode] = lambda obj, note: parse_active_episode(obj)
    return read_document(path, parse)
