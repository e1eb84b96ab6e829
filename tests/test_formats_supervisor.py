"""Supervisor state, active episode, attempts and log lines (FORMATS §3)."""

from __future__ import annotations

import json

import pytest

from console.formats.problems import FormatError
from console.formats.supervisor import (
    MODES,
    parse_attempt,
    parse_state,
    read_active_episode,
    read_attempt,
    read_state,
)

SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40

# Newer generation: the full attempt record with an ABBA verification and telemetry block.
FULL_ATTEMPT = {
    "episode": 3, "version": "v5", "mode": "full", "fast_trials": 1, "status": "candidate_ready",
    "accepted": True, "violation": None, "base_commit": SHA_A, "episode_branch": "atrex/long-e0003-1a2b3c4d",
    "episode_head": SHA_B, "candidate_commit": SHA_B, "changed_paths": ["kernel.py"], "session_id": "sess-9",
    "resume_count": 1, "tokens": 1843210, "summary": "Fuse normalization with the reduction",
    "next_directions": ["Try split-K", "Tune the tail"],
    "verification": {"gate": "PASS", "candidate_latency_us": 38.1, "incumbent_latency_us": 41.2,
                     "improvement_pct": 7.52, "runs": [], "error": None, "artifact": "v/result.json"},
    "telemetry": {"summary": ".atrex_long_horizon/episodes/e0003/telemetry.summary.json",
                  "measurement": "partial", "reason_codes": ["same_session_resume_usage_semantics_unqualified"]},
    "promotion_commit": SHA_C,
}
# Older generation: a short record, integer version, no telemetry, verification without runs.
SHORT_ATTEMPT = {"episode": 1, "version": 2, "mode": "fast", "status": "blocked", "accepted": False,
                 "tokens": 0, "summary": "Awaiting a backend", "verification": None}
INTERRUPTED = {"episode": 4, "status": "interrupted", "accepted": False,
               "violation": "supervisor process interrupted", "base_commit": "", "outcome_commit": SHA_A}


def write(path, obj):
    path.write_text(json.dumps(obj, indent=2))
    return path


def test_attempts_of_both_generations(tmp_path):
    full = read_attempt(write(tmp_path / "attempt.json", FULL_ATTEMPT))
    assert full.ok
    a = full.value
    assert (a.episode, a.version, a.mode, a.accepted, a.tokens) == (3, 5, "full", True, 1843210)
    assert a.verification.gate == "PASS" and a.verification.runs == ()
    assert a.telemetry.measurement == "partial" and a.promotion_commit == SHA_C and a.outcome_commit is None
    assert a.changed_paths == ("kernel.py",)
    short = parse_attempt(SHORT_ATTEMPT)
    assert short.version == 2 and short.verification is None
    assert short.fast_trials is None and short.resume_count is None and short.changed_paths is None  # never 0
    interrupted = parse_attempt(INTERRUPTED)
    assert interrupted.base_commit is None and interrupted.violation == "supervisor process interrupted"
    # A fast episode checked by the single evaluator stores a verification with no gate.
    assert parse_attempt(dict(SHORT_ATTEMPT, verification={"evaluator": "fast"})).verification is None
    assert json.loads(json.dumps(a.to_json()))["verification"]["gate"] == "PASS"


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"episode": "3"}, "episode"),
        ({"accepted": "yes"}, "accepted"),
        ({"tokens": 1.5}, "tokens"),
        ({"tokens": True}, "tokens"),
        ({"version": "five"}, "version"),
        ({"changed_paths": "kernel.py"}, "changed_paths"),
        ({"verification": {"gate": "MAYBE"}}, "verification.gate"),
        ({"verification": {"gate": "PASS", "improvement_pct": "7"}}, "verification.improvement_pct"),
        ({"verification": "PASS"}, "verification"),
        ({"telemetry": {"reason_codes": [1]}}, "telemetry.reason_codes[0]"),
    ],
)
def test_attempt_wrong_types(tmp_path, patch, field):
    with pytest.raises(FormatError) as info:
        parse_attempt(dict(FULL_ATTEMPT, **patch))
    assert field in str(info.value)
    result = read_attempt(write(tmp_path / "attempt.json", dict(FULL_ATTEMPT, **patch)))
    assert result.value is None and result.problems[0].path == str(tmp_path / "attempt.json")
    assert field in result.problems[0].error


def test_state_keeps_good_attempts_and_reports_bad_ones(tmp_path):
    state = {"episodes": 4, "accepted": 1, "rejected": 1, "pivoted": 0, "blocked": 1, "protocol_failures": 0,
             "interrupted": 1, "tokens": 4200000, "consecutive_without_promotion": 2,
             "attempts": [FULL_ATTEMPT, SHORT_ATTEMPT, {"episode": "x"}, INTERRUPTED],
             "usage_receipts": {"invocation-1": 1843210}, "staged": 0}
    result = read_state(write(tmp_path / "state.json", state))
    value = result.value
    assert value.tokens == 4200000 and value.interrupted == 1 and value.usage_receipts["invocation-1"] == 1843210
    assert [a.episode for a in value.attempts] == [3, 1, 4]
    assert len(result.problems) == 1 and "attempts[2].episode" in result.problems[0].error
    # to_json() is the document as read, minus the skipped attempt: it parses strictly again.
    again = parse_state(value.to_json())
    assert again.attempts == value.attempts and again.tokens == value.tokens
    older = read_state(write(tmp_path / "old.json", {"episodes": 1, "accepted": 0, "tokens": 0, "attempts": []})).value
    assert older.interrupted is None and older.usage_receipts is None and older.attempts == ()
    bad = read_state(write(tmp_path / "bad.json", dict(state, tokens="many")))
    assert bad.value is None and "tokens" in bad.problems[0].error


def test_active_episode_modes(tmp_path):
    active = {"episode": 9, "memory_version": 10, "base_commit": SHA_A, "episode_branch": "atrex/long-e0009-0badc0de",
              "worktree": "/srv/c/.atrex_long_horizon_worktrees/c/e0009-0badc0de", "mode": "goal", "fast_trials": 1,
              "phase": "verifying", "restart_count": 1, "resumed_from_phase": "exploring"}
    value = read_active_episode(write(tmp_path / "active.json", active)).value
    assert (value.mode, value.mode in MODES, value.phase, value.restart_count) == ("goal", True, "verifying", 1)
    assert value.terminal_status is None and value.promotion_commit is None
    for mode in ("fast", "full", "episode"):
        assert read_active_episode(write(tmp_path / "a.json", dict(active, mode=mode))).value.mode in MODES
    # An unknown mode from a newer supervisor is kept as written, not refused.
    future = read_active_episode(write(tmp_path / "a.json", dict(active, mode="marathon"))).value
    assert future.mode == "marathon" and future.mode not in MODES
    demo = read_active_episode(write(tmp_path / "a.json", {"episode": 9, "memory_version": "v10", "mode": "full", "phase": "exploring"}))
    assert demo.ok and demo.value.memory_version == 10 and demo.value.worktree is None
    bad = read_active_episode(write(tmp_path / "a.json", dict(active, mode=3)))
    assert bad.value is None and "mode" in bad.problems[0].error
    assert read_active_episode(tmp_path / "missing.json").problems == ()
