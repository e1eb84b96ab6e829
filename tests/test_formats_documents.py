"""Telemetry summary, journal, handoff, live memory and canonical memory (FORMATS §2, §4, §5)."""

from __future__ import annotations

import json
import math

import pytest

from console.formats.handoff import parse_handoff, read_handoff
from console.formats.journal import parse_journal, read_journal
from console.formats.live_memory import read_live_memory
from console.formats.memory import (
    incumbent_curve,
    parse_memory_version,
    read_memory_version,
    version_number_from_path,
)
from console.formats.problems import FormatError
from console.formats.telemetry_summary import parse_telemetry_summary, read_telemetry_summary

SHA_A, SHA_B = "a" * 40, "b" * 40


def write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) if not isinstance(obj, str) else obj)
    return path


def tokens(total, measurement="exact"):
    return {"input_tokens": int(total * 0.8), "output_tokens": total - int(total * 0.8), "cache_read_tokens": int(total * 0.4),
            "cache_write_tokens": 0, "total_tokens": total, "measurement": measurement}


# -- telemetry summary --------------------------------------------------------------------


def test_telemetry_summary_generations(tmp_path):
    full = {
        "schema_version": "atrex_long_horizon_episode_telemetry_v1", "episode": 3, "version": "v5",
        "status": "candidate_ready", "accepted": True, "control_tokens": 190000, "resume_count": 0,
        "invocation_count": 1, "measurement": "exact", "reason_codes": [],
        "phase_tokens": {"terminal_usage": tokens(190000),
                         "phases": {"profile": {"usage": tokens(19000), "interval_count": 2, "measurement": "exact", "reason": None},
                                    "research": {"usage": tokens(15200)}},
                         "orchestration": tokens(9500), "unattributed": tokens(1900), "coverage": 0.99,
                         "reconciliation_status": "reconciled", "measurement": "exact", "reason_codes": []},
    }
    value = read_telemetry_summary(write(tmp_path / "s.json", full)).value
    assert (value.episode, value.version, value.control_tokens, value.measurement) == (3, 5, 190000, "exact")
    assert value.phases["profile"].interval_count == 2 and value.phases["research"].interval_count is None
    assert value.terminal_usage.total_tokens == 190000 and value.orchestration.cache_write_tokens == 0
    assert value.coverage == 0.99 and value.reconciliation_status == "reconciled"
    assert parse_telemetry_summary(value.to_json()) == value
    # Unavailable usage: the numbers stay unknown (None), never 0.
    unavailable = {"episode": 1, "version": "v2", "control_tokens": 0, "reason_codes": ["backend_usage_unavailable"],
                   "measurement": "unavailable",
                   "phase_tokens": {"terminal_usage": {"total_tokens": None, "measurement": "unavailable"}, "measurement": "unavailable"}}
    value = read_telemetry_summary(write(tmp_path / "u.json", unavailable)).value
    assert value.terminal_usage.total_tokens is None and value.terminal_usage.input_tokens is None
    assert value.phases is None and value.orchestration is None and value.schema_version is None
    bad = read_telemetry_summary(write(tmp_path / "b.json", dict(full, phase_tokens={"phases": {"profile": {"usage": {"total_tokens": "9"}}}})))
    assert bad.value is None and "phase_tokens.phases.profile.usage.total_tokens" in bad.problems[0].error


# -- journal ------------------------------------------------------------------------------


def test_journal_generations(tmp_path):
    journal = {
        "schema_version": 1, "episode": 3, "memory_version": 5, "base_commit": SHA_A,
        "episode_branch": "atrex/long-e0003-1a2b3c4d", "state": "candidate_ready",
        "experiments": [
            {"name": "vectorize loads", "hypothesis": "loads are uncoalesced", "change": "float4 loads",
             "evidence": {"ncu": "profiles/episode_3/shape-0", "dram_pct": 81.0}, "result": "-6%",
             "decision": "continue", "timestamp": "2025-05-01T10:00:00+00:00", "wiki_usage_status": "not_queried"},
            "a stray string",
            {"name": "bigger tiles", "decision": "revert"},
        ],
        "outcome": {"summary": "vectorized loads", "next_directions": ["split-K"]},
        "created_at": "2025-05-01T09:00:00+00:00", "finalized_at": "2025-05-01T11:00:00+00:00", "candidate_commit": SHA_B,
    }
    result = read_journal(write(tmp_path / "journal.json", journal))
    value = result.value
    assert value.state == "candidate_ready" and value.candidate_commit == SHA_B and len(value.experiments) == 2
    first = value.experiments[0]
    assert json.loads(first.evidence) == {"ncu": "profiles/episode_3/shape-0", "dram_pct": 81.0}
    assert first.raw["wiki_usage_status"] == "not_queried"
    assert value.experiments[1].hypothesis is None
    assert value.outcome.next_directions == ("split-K",)
    assert len(result.problems) == 1 and "experiments[1]" in result.problems[0].error
    assert parse_journal(value.to_json()) == parse_journal(dict(journal, experiments=[journal["experiments"][0], journal["experiments"][2]]))
    # The older, smaller journal of an archived episode.
    old = read_journal(write(tmp_path / "old.json", {"episode": 3, "memory_version": 5, "outcome": {"summary": "x"},
                                                     "experiments": [{"name": "n", "result": "r"}]}))
    assert old.ok and old.value.state is None and old.value.schema_version is None and old.value.finalized_at is None
    bad = read_journal(write(tmp_path / "bad.json", dict(journal, outcome={"summary": "s", "next_directions": "split-K"})))
    assert bad.value is None and "outcome.next_directions" in bad.problems[0].error


# -- handoff ------------------------------------------------------------------------------


def test_handoff(tmp_path):
    value = read_handoff(write(tmp_path / "h.json", {"status": "candidate_ready", "candidate_commit": SHA_B, "last_trial_commit": SHA_A})).value
    assert (value.status, value.candidate_commit, value.last_trial_commit) == ("candidate_ready", SHA_B, SHA_A)
    for status in ("pivot", "blocked", "invalid_handoff", "interrupted", "staged_ready"):
        assert parse_handoff({"status": status}).candidate_commit is None
    for obj, field in [
        ({"status": "candidate_ready"}, "candidate_commit"),
        ({"status": "candidate_ready", "candidate_commit": ""}, "candidate_commit"),
        ({"status": "done"}, "status"),
        ({}, "status"),
        ({"status": "pivot", "last_trial_commit": 7}, "last_trial_commit"),
    ]:
        with pytest.raises(FormatError, match=field):
            parse_handoff(obj)
    bad = read_handoff(write(tmp_path / "bad.json", {"status": "candidate_ready"}))
    assert bad.value is None and bad.problems[0].path == str(tmp_path / "bad.json")


# -- live memory --------------------------------------------------------------------------


def test_live_memory(tmp_path):
    live = {"schema_version": "atrex_long_horizon_live_v1", "canonical": False, "canonical_memory_recorded": False,
            "note": "Live optimization progress only", "version": "v10", "episode": 9, "phase": "exploring",
            "journal_state": "in_progress", "experiment_count": 5, "latest_experiment": {"name": "overlap loads"},
            "outcome": None, "candidate_commit": None, "base_commit": SHA_A, "episode_branch": "atrex/long-e0009-0badc0de",
            "created_at": "2025-05-01T09:00:00+00:00", "updated_at": "2025-05-01T09:30:00+00:00",
            "canonical_memory": None, "accepted": None}
    value = read_live_memory(write(tmp_path / "live.json", live)).value
    assert (value.version, value.canonical, value.experiment_count) == (10, False, 5)
    assert value.latest_experiment.name == "overlap loads" and value.accepted is None
    short = read_live_memory(write(tmp_path / "old.json", {"episode": 1, "version": "v2", "phase": "recorded"})).value
    assert short.canonical is None and short.experiment_count is None
    bad = read_live_memory(write(tmp_path / "bad.json", dict(live, experiment_count="5")))
    assert bad.value is None and "experiment_count" in bad.problems[0].error


# -- canonical memory ---------------------------------------------------------------------


def memory(n, *, latency=None, score=None, gate="PASS", status="complete", subject="candidate", extra=None):
    perf = {"measurement_status": status, "measurement_subject": subject, "expected_shape_count": 2}
    if latency is not None:
        perf.update(latency_us=latency, latency_us_geomean=latency, latency_us_by_shape={"a": latency, "b": latency})
    if score is not None:
        perf.update(performance_objective="shape_speedup_arithmetic_mean", performance_score=score)
    record = {"version": f"v{n}", "timestamp": "2025-05-01T10:00:00+00:00", "performance": perf,
              "correctness": {"status": "PASS", "max_abs_err": 0.002, "max_rel_err": 0.01},
              "quality_gate": {"result": gate, "failure_reason": None if gate == "PASS" else "ABBA FAIL"}}
    record.update(extra or {})
    return record


def test_memory_version_fields(tmp_path):
    rich = memory(7, latency=38.5, score=1.4, extra={
        "masked": False, "git_commit_hash": SHA_B, "open_directions": ["split-K", {"idea": "tma"}],
        "long_horizon": {"status": "promoted", "mode": "full", "verification": "abba"},
        "experience": {"experiment_count": 4, "recorded_experiment_count": 3, "experiments": []},
        "optimization": {"action_category": "memory_access"},
        "profile_evidence": {"tool_used": "ncu", "bottleneck_type": "memory"}})
    rich["performance"].update(dram_peak_utilization_pct=81.5, sm_peak_utilization_pct=40, tflops=None)
    value = read_memory_version(write(tmp_path / "memory" / "v7.json", rich)).value
    assert (value.version, value.latency_us_geomean, value.performance_score) == (7, 38.5, 1.4)
    assert value.peak_utilization_pct == {"dram": 81.5, "sm": 40} and value.tflops is None
    assert value.long_horizon.verification == "abba" and value.experiment_count == 4
    assert value.open_directions == ("split-K", '{"idea": "tma"}')
    assert value.accepted and value.bottleneck_type == "memory"
    assert parse_memory_version(json.loads(json.dumps(value.to_json()))) == value
    # An old record without a version field takes it from the file name; unknowns stay None.
    old = read_memory_version(write(tmp_path / "memory" / "v3.json", {"performance": {"latency_us": 50.0}, "correctness": {"status": "FAIL"}})).value
    assert old.version == 3 and old.latency_us_geomean is None and old.latency_us == 50.0
    assert old.performance_score is None and old.experiment_count is None and not old.accepted
    assert parse_memory_version(old.to_json()).version == 3  # replay re-parses without the path
    nan = read_memory_version(write(tmp_path / "memory" / "v4.json", '{"version": "v4", "correctness": {"status": "FAIL", "max_abs_err": NaN}}')).value
    assert math.isnan(nan.max_abs_err)
    for patch, field in [({"version": "latest"}, "version"), ({"performance": {"latency_us_geomean": "38"}}, "performance.latency_us_geomean"),
                         ({"performance": []}, "performance"), ({"open_directions": "x"}, "open_directions")]:
        bad = read_memory_version(write(tmp_path / "memory" / "v9.json", dict(rich, **patch)))
        assert bad.value is None and field in bad.problems[0].error


def test_version_number_from_path():
    assert version_number_from_path("memory/v12.json") == 12
    assert version_number_from_path("memory/v0.json") == 0
    for name in ("memory/live.json", "memory/long_horizon_e0001.json", "memory/v12.json.tmp", "memory/vx.json"):
        assert version_number_from_path(name) is None


def test_incumbent_curve():
    records = [parse_memory_version(obj) for obj in [
        memory(3, latency=40.0),                                  # accepted candidate
        memory(0, latency=60.0, subject="incumbent"),             # v0 always
        memory(1, latency=55.0, subject="incumbent"),             # framework baseline
        memory(2, latency=58.0, gate="FAIL"),                     # rejected
        memory(4, latency=39.0, subject="incumbent"),             # carried-forward incumbent
        memory(5, latency=35.0, status="not_evaluated_or_incomplete"),
        memory(6, score=1.6),                                     # score-only record
        memory(7),                                                # no figure at all
    ]]
    assert incumbent_curve(records, framework_baseline_version=1) == (
        (0, 60.0, "latency_us_geomean"), (1, 55.0, "latency_us_geomean"), (3, 40.0, "latency_us_geomean"),
        (6, 1.6, "performance_score"),
    )
    assert [p[0] for p in incumbent_curve(records)] == [0, 3, 6]
    assert incumbent_curve([]) == ()
