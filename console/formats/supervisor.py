"""Supervisor documents and log lines (FORMATS §3).

``state.json`` holds the campaign counters and every attempt; ``active_episode.json`` exists
only while an episode runs; ``episodes/eNNNN/attempt.json`` is one archived attempt; the
supervisor's stdout carries ``[long-horizon] ...`` lines.

``tokens`` in ``state.json`` is the settled total and the headline figure: nothing here adds
per-attempt tokens to it.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Mapping

import msgspec

from .abba import AbbaVerdict, parse_verdict
from .fields import Fields, raw_json, read_document
from .problems import ReadResult

LOG_PREFIX = "[long-horizon]"
# The four modes of both generations. An unknown mode is kept as written rather than
# refusing the whole document: the console must still show an episode a newer supervisor
# runs; ``ActiveEpisode.known_mode`` says whether it is one of these.
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

_COUNTERS = (
    "episodes",
    "accepted",
    "rejected",
    "pivoted",
    "blocked",
    "protocol_failures",
    "interrupted",
    "tokens",
    "consecutive_without_promotion",
)


class Attempt(msgspec.Struct, frozen=True):
    episode: int | None
    version: int | None  # memory version, written as N or "vN"
    mode: str | None
    fast_trials: int | None
    status: str | None
    accepted: bool | None
    violation: str | None
    base_commit: str | None
    episode_branch: str | None
    episode_head: str | None
    candidate_commit: str | None
    changed_paths: tuple[str, ...] | None
    session_id: str | None
    resume_count: int | None
    tokens: int | None
    summary: str | None
    next_directions: tuple[str, ...] | None
    verification: AbbaVerdict | None  # None when absent or not an ABBA verdict (see raw)
    telemetry_summary: str | None  # path of the episode's telemetry.summary.json
    telemetry_measurement: str | None
    telemetry_reason_codes: tuple[str, ...] | None
    promotion_commit: str | None
    outcome_commit: str | None
    raw: dict

    to_json = raw_json


def parse_attempt(obj: Any, where: str | None = None) -> Attempt:
    f = Fields(obj, where)
    verification = f.nested("verification")
    telemetry = f.nested("telemetry")
    return Attempt(
        episode=f.integer("episode"),
        version=f.version("version"),
        mode=f.string("mode"),
        fast_trials=f.integer("fast_trials"),
        status=f.string("status"),
        accepted=f.boolean("accepted"),
        violation=f.text("violation"),
        base_commit=f.text("base_commit"),
        episode_branch=f.text("episode_branch"),
        episode_head=f.text("episode_head"),
        candidate_commit=f.text("candidate_commit"),
        changed_paths=f.strings("changed_paths"),
        session_id=f.text("session_id"),
        resume_count=f.integer("resume_count"),
        tokens=f.integer("tokens"),
        summary=f.string("summary"),
        next_directions=f.texts("next_directions"),
        # A fast episode checked by the single evaluator stores no ABBA gate.
        verification=(
            parse_verdict(verification.obj, verification.where)
            if verification is not None and verification.has("gate")
            else None
        ),
        telemetry_summary=telemetry.string("summary") if telemetry else None,
        telemetry_measurement=telemetry.string("measurement") if telemetry else None,
        telemetry_reason_codes=telemetry.strings("reason_codes") if telemetry else None,
        promotion_commit=f.text("promotion_commit"),
        outcome_commit=f.text("outcome_commit"),
        raw=obj,
    )


def read_attempt(path: str | os.PathLike) -> ReadResult[Attempt]:
    return read_document(path, lambda obj, note: parse_attempt(obj))


class SupervisorState(msgspec.Struct, frozen=True):
    episodes: int | None
    accepted: int | None
    rejected: int | None
    pivoted: int | None
    blocked: int | None
    protocol_failures: int | None
    interrupted: int | None
    tokens: int | None  # settled total: the headline figure
    consecutive_without_promotion: int | None
    attempts: tuple[Attempt, ...] | None
    usage_receipts: Mapping[str, Any] | None  # newer generation
    raw: dict

    def to_json(self) -> dict:
        if self.attempts is None:
            return dict(self.raw)
        return {**self.raw, "attempts": [attempt.to_json() for attempt in self.attempts]}


def parse_state(obj: Any, note: Callable[[str], None] | None = None) -> SupervisorState:
    """``state.json``. A malformed attempt raises, or with ``note`` is skipped and noted."""
    f = Fields(obj)
    counters = {name: f.integer(name) for name in _COUNTERS}
    return SupervisorState(
        **counters,
        attempts=f.records("attempts", parse_attempt, note),
        usage_receipts=f.mapping("usage_receipts"),
        raw=obj,
    )


def read_state(path: str | os.PathLike) -> ReadResult[SupervisorState]:
    """``state.json``; a bad attempt is reported as a problem and the rest is kept."""
    return read_document(path, parse_state)


class ActiveEpisode(msgspec.Struct, frozen=True):
    episode: int | None
    memory_version: int | None
    base_commit: str | None
    episode_branch: str | None
    worktree: str | None
    mode: str | None
    fast_trials: int | None
    phase: str | None
    terminal_status: str | None
    promotion_commit: str | None
    outcome_commit: str | None
    resumed_from_phase: str | None
    restart_count: int | None
    raw: dict

    to_json = raw_json

    @property
    def known_mode(self) -> bool:
        return self.mode in MODES


def parse_active_episode(obj: Any) -> ActiveEpisode:
    f = Fields(obj)
    return ActiveEpisode(
        episode=f.integer("episode"),
        memory_version=f.version("memory_version"),
        base_commit=f.text("base_commit"),
        episode_branch=f.text("episode_branch"),
        worktree=f.text("worktree"),
        mode=f.string("mode"),
        fast_trials=f.integer("fast_trials"),
        phase=f.string("phase"),
        terminal_status=f.text("terminal_status"),
        promotion_commit=f.text("promotion_commit"),
        outcome_commit=f.text("outcome_commit"),
        resumed_from_phase=f.text("resumed_from_phase"),
        restart_count=f.integer("restart_count"),
        raw=obj,
    )


def read_active_episode(path: str | os.PathLike) -> ReadResult[ActiveEpisode]:
    """``active_episode.json``; a missing file means no episode is running."""
    return read_document(path, lambda obj, note: parse_active_episode(obj))


# -- log lines -------------------------------------------------------------------------

_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")


def _log_value(text: str) -> Any:
    if text in ("-", "None", ""):
        return None
    if text in ("True", "False"):
        return text == "True"
    if re.fullmatch(r"-?\d{1,18}", text):
        return int(text)
    return text


def _pairs(text: str) -> dict | None:
    """``k=v k=v`` with nothing else, or ``None``."""
    tokens = text.split()
    out = {}
    for token in tokens:
        match = _PAIR.fullmatch(token)
        if match is None:
            return None
        out[match.group(1)] = _log_value(match.group(2))
    return out if tokens else None


def parse_supervisor_log_line(line: str | bytes) -> dict | None:
    """One supervisor stdout line as a dict, or ``None`` when it is not a ``[long-horizon]``
    line.

    - ``[long-horizon] episode=3 mode=full status=candidate_ready accepted=True version=v5
      tokens=1843210 commit=<sha>`` -> ``{"kind": "episode", "episode": 3, ...}`` (``-``
      reads as ``None``, ``True``/``False`` as booleans, integers as integers);
    - ``[long-horizon] STOP <reason>; episodes=.. accepted=..`` -> ``{"kind": "stop",
      "reason": ..., "episodes": .., ...}``;
    - any other ``[long-horizon]`` line -> ``{"kind": "message", "text": ...}``.
    """
    if isinstance(line, (bytes, bytearray)):
        line = bytes(line).decode("utf-8", errors="replace")
    text = line.strip()
    if not text.startswith(LOG_PREFIX):
        return None
    rest = text[len(LOG_PREFIX):].strip()
    if rest.startswith("STOP"):
        reason, separator, tail = rest[4:].rpartition(";")
        counters = _pairs(tail) if separator else None
        if counters is not None:
            return {**counters, "kind": "stop", "reason": reason.strip() or None}
        return {"kind": "stop", "reason": rest[4:].strip() or None}
    pairs = _pairs(rest)
    if pairs is not None and "episode" in pairs:
        return {**pairs, "kind": "episode"}
    return {"kind": "message", "text": rest}

