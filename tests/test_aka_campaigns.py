"""episcope's status of campaigns AKA's own code wrote, held field by field to what AKA's own
readers said about the same files (tests/fixtures/aka/README.md says how both were made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.episode.session import Session
from console.episode.summary import status_document

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "aka"


def _status(name: str, cache: Path) -> tuple[dict, dict]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        state = Session(str(FIXTURES / f"campaign_{name}.tar.gz")).scan()
    expected = json.loads((FIXTURES / f"campaign_{name}.expected_by_aka.json").read_text())
    return status_document(state, now=0.0), expected


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> tuple[dict, dict]:
    return _status("idle", tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def inflight(tmp_path_factory) -> tuple[dict, dict]:
    return _status("inflight", tmp_path_factory.mktemp("cache"))


def _telemetry(expected: dict, suffix: str) -> dict:
    (found,) = [v for path, v in expected["telemetry_by_file"].items() if path.endswith(suffix)]
    return found


def assert_phase_timing(timing: dict, aka: dict) -> None:
    """episcope's ``phase_timing`` against AKA's wall-time reader for one telemetry file."""
    assert timing["measurement"] == aka["timing"]["measurement"]
    assert timing["reason_codes"] == aka["timing"]["reason_codes"]
    assert set(timing["phases"]) == set(aka["phases"])
    for phase, theirs in aka["phases"].items():
        ours = timing["phases"][phase]
        assert ours["interval_count"] == theirs["interval_count"], phase
        assert ours["measurement"] == theirs["measurement"], phase
        if theirs["wall_seconds"] is None:
            assert ours["wall_seconds"] is None, phase
        else:
            assert ours["wall_seconds"] == pytest.approx(theirs["wall_seconds"], abs=1e-6), phase


def assert_runtime(record: dict, aka_runtime: dict, aka_telemetry: dict) -> None:
    assert record["evaluations"] == aka_runtime["evaluation_count"]
    assert record["journal"] == {"state": aka_runtime["journal_state"], "experiments": aka_runtime["journal_experiments"]}
    assert record["handoff"] == (aka_runtime["handoff"] or {}).get("status")
    assert_phase_timing(record["phase_timing"], aka_telemetry)
    assert record["source_reads"] == aka_telemetry["source_reads"]["count"]
    sandbox = record["sandbox"]
    assert sandbox["succeeded"] == aka_telemetry["sandbox"]["by_status"].get("succeeded", 0)
    assert sandbox["failed"] == aka_telemetry["sandbox"]["by_status"].get("failed", 0)
    assert sandbox["seconds"] == pytest.approx(aka_telemetry["sandbox"]["total_seconds"], abs=1e-6)


# -- between episodes ---------------------------------------------------------------------


def test_idle_supervisor_counters_are_akas(idle):
    status, aka = idle
    state = aka["state"]
    for key in ("episodes", "accepted", "rejected", "pivoted", "blocked", "protocol_failures", "interrupted",
                "tokens", "consecutive_without_promotion"):
        assert status["supervisor"][key] == state[key], key
    assert status["schema_version"] == "episcope-status/v4"


def test_idle_history_has_every_archived_episode_as_aka_reads_it(idle):
    status, aka = idle
    assert [e["episode"] for e in status["episodes"]] == [e["episode"] for e in aka["episodes"]] == [1, 2]
    for record, theirs in zip(status["episodes"], aka["episodes"], strict=True):
        assert record["source"] == "archived"
        assert record["status"] == theirs["status"]
        assert record["accepted"] == theirs["accepted"]
        assert record["version"] == theirs["version"]
        assert record["candidate_commit"] == theirs["candidate_commit"]
        assert record["tokens"] == theirs["tokens"]
        assert record["gate"] == theirs["attempt_verification_gate"]
        telemetry = _telemetry(aka, f"episodes/e{theirs['episode']:04d}/episode_runtime/telemetry.jsonl")
        assert_runtime(record, theirs["runtime"], telemetry)
        assert record["telemetry_events"] > 0
        assert [(v["gate"], v["improvement_pct"]) for v in record["verifications"]] == [
            (v["gate"], pytest.approx(v["improvement_pct"])) for v in theirs["verifications"]]
        assert "accepted" not in record["unknown"] and "telemetry_events" not in record["unknown"]
    # The second episode's agent ended `research` twice: AKA calls it an orphan end.
    assert status["episodes"][1]["phase_timing"]["reason_codes"] == ["orphan_phase_end"]


def test_idle_finished_verifications_are_in_abba_with_akas_scores(idle):
    status, aka = idle
    scored = {v["uuid"]: v for e in aka["episodes"] for v in e["verifications"]}
    by_uuid = {Path(entry["directory"]).name: entry for entry in status["abba"]}
    assert set(by_uuid) == set(scored) and len(scored) == 2
    for uuid, theirs in scored.items():
        ours = by_uuid[uuid]
        assert ours["gate"] == theirs["gate"]
        assert ours["candidate_latency_us"] == pytest.approx(theirs["candidate_latency_us"])
        assert ours["incumbent_latency_us"] == pytest.approx(theirs["incumbent_latency_us"])
        assert ours["improvement_pct"] == pytest.approx(theirs["improvement_pct"])
        assert ours["runs"] == theirs["runs"]


def test_idle_current_episode_is_the_last_archived_one_not_zeros(idle):
    status, aka = idle
    last = aka["episodes"][-1]
    telemetry = _telemetry(aka, "episodes/e0002/episode_runtime/telemetry.jsonl")
    assert status["episode"]["runtime"] == "archived"
    assert status["episode"]["number"] == 2
    assert status["evaluations"]["count"] == last["runtime"]["evaluation_count"] > 0
    assert status["source_reads"] == telemetry["source_reads"]["count"] > 0
    assert status["telemetry_events"] > 0
    assert status["journal"] == {"state": last["runtime"]["journal_state"], "experiments": last["runtime"]["journal_experiments"]}
    assert_phase_timing(status["phase_timing"], telemetry)
    assert status["sandbox"]["succeeded"] == telemetry["sandbox"]["by_status"]["succeeded"]


def test_idle_memory_quality_gate_and_candidate_commit(idle):
    status, aka = idle
    by_version = {v["version"]: v for v in status["versions"]}
    rejected = aka["episodes"][1]
    assert by_version[2]["accepted"] is False
    assert by_version[2]["quality_gate"]["result"] == "FAIL"
    assert "did not exceed" in by_version[2]["quality_gate"]["failure_reason"]
    assert by_version[2]["candidate_commit"] == rejected["candidate_commit"]
    assert by_version[1]["quality_gate"]["result"] == "PASS"


def test_idle_attempts_live_memory_and_token_summaries(idle):
    status, aka = idle
    assert [a["episode"] for a in status["attempts"]] == [a["episode"] for a in aka["state"]["attempts"]]
    for ours, theirs in zip(status["attempts"], aka["state"]["attempts"], strict=True):
        assert ours["status"] == theirs["status"] and ours["accepted"] == theirs["accepted"]
        assert ours["tokens"] == theirs["tokens"] and ours["gate"] == theirs["verification"]["gate"]
        assert ours["telemetry"]["reason_codes"] == theirs["telemetry"]["reason_codes"]
    live = status["live_memory"]
    assert live["episode"] == 2 and live["journal_state"] == "candidate_ready" and live["experiment_count"] == 1
    summaries = {s["episode"]: s for s in status["telemetry_summaries"]}
    for episode in aka["episodes"]:
        ours = summaries[episode["episode"]]
        assert ours["measurement"] == episode["phase_tokens"]["measurement"]
        assert ours["reason_codes"] == episode["phase_tokens"]["reason_codes"]
        for phase, theirs in episode["phase_tokens"]["phases"].items():
            assert ours["phases"][phase]["interval_count"] == theirs["interval_count"]
            assert ours["phases"][phase]["measurement"] == theirs["measurement"]
            assert ours["phases"][phase]["reason"] == theirs["reason"]
            assert isinstance(ours["phases"][phase]["total_tokens"], int)


def test_idle_last_evaluation_names_its_gateway_job(idle):
    status, _ = idle
    last = status["evaluations"]["last"]
    assert last["gateway_kind"] == "dev" and last["job_id"] is None


# -- an episode in flight -------------------------------------------------------------------


def test_inflight_open_benchmark_is_unavailable_with_akas_reason(inflight):
    status, aka = inflight
    telemetry = _telemetry(aka, "/.atrex_long_horizon/telemetry.jsonl")
    assert status["episode"]["runtime"] == "live"
    assert status["episode"]["number"] == aka["active_episode"]["episode"] == 2
    assert_phase_timing(status["phase_timing"], telemetry)
    assert status["phase_timing"]["reason_codes"] == ["unclosed_phase"]
    assert status["phases"]["benchmark"]["active"] is True
    assert status["phases"]["benchmark"]["measurement"] == "unavailable"
    assert status["phases"]["benchmark"]["wall_seconds"] is None
    assert status["sandbox"]["running"] == 1
    assert status["evaluations"]["count"] == aka["live_episode_runtime"]["evaluation_count"]


def test_inflight_history_is_archived_then_live(inflight):
    status, aka = inflight
    archived, live = status["episodes"]
    (theirs,) = aka["episodes"]
    assert archived["source"] == "archived" and archived["episode"] == 1 and archived["gate"] == "PASS"
    assert_runtime(archived, theirs["runtime"], _telemetry(aka, "episodes/e0001/episode_runtime/telemetry.jsonl"))
    assert live["source"] == "live" and live["episode"] == 2 and live["version"] == 2
    assert live["gate"] is None and live["accepted"] is None
    assert live["unknown"]["gate"] == "the episode is still running"
    assert live["handoff"] is None and "handoff" in live["unknown"]
    assert live["evaluations"] == aka["live_episode_runtime"]["evaluation_count"]
    assert live["journal"]["experiments"] == aka["live_episode_runtime"]["journal_experiments"]
    assert live["sandbox"]["running"] == 1


def test_git_facts_follow_the_current_episode_not_the_last_file_read(idle, inflight):
    """The base and candidate git is asked about are the current episode's: between episodes
    the last archived attempt's, during one the live episode's (no candidate yet), however
    the runtime files of earlier episodes sort."""
    status, aka = idle
    last = aka["state"]["attempts"][-1]
    assert (status["git"]["base_commit"], status["git"]["candidate_commit"]) == (last["base_commit"], last["candidate_commit"])
    status, aka = inflight
    earlier = {a["candidate_commit"] for a in aka["state"]["attempts"]}
    assert status["episode"]["number"] == 2 and status["git"]["candidate_commit"] is None
    assert status["git"]["base_commit"] not in {a["base_commit"] for a in aka["state"]["attempts"]}
    assert status["git"]["candidate_commit"] not in earlier
    # the worktree named is the archive's copy that was read, not the recording machine's path
    assert status["episode"]["worktree"] == status["git"]["worktree"] != aka["active_episode"].get("worktree")
    assert not status["episode"]["worktree"].startswith("/srv/")


def test_inflight_profile_job_record_reads_as_akas_gateway_result(inflight):
    status, aka = inflight
    (theirs,) = [p for p in aka["profiles"] if "worktrees" in p["path"]]
    (ours,) = [p for p in status["profiles"] if p["current"]]  # the live episode's; e0001's is listed too
    assert ours["episode"] == 2
    assert ours["level"] == theirs["level"]
    assert ours["kernels"] == [k["name"] for k in theirs["kernels"]]
    assert ours["bottleneck"] == theirs["kernels"][0]["bound"]
    assert ours["job"] == {"job_id": theirs["job_id"], "status": theirs["status"]}
    assert status["unreadable"] == []


def test_bundled_example_history_says_why_tokens_are_null(tmp_path):
    """The bundled H200 episodes were scripted: their attempts record no token count, and the
    history says so instead of a 0; each episode is read where AKA archives it."""
    archive = Path(__file__).resolve().parents[1] / "examples" / "episodes" / "row_softmax-h200.tar.gz"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        status = status_document(Session(str(archive)).scan(), now=0.0)
    first, last = status["episodes"]
    assert first["episode"] == 1 and first["source"] == "archived" and first["gate"] == "PASS"
    assert last["episode"] == 2 and last["source"] == "archived" and last["gate"] == "FAIL"
    for record in (first, last):
        assert record["tokens"] is None and record["unknown"] == {"tokens": "the attempt records no tokens"}
    assert last["evaluations"] == status["evaluations"]["count"] > 0
    assert [v["gate"] for v in first["verifications"]] == ["PASS"] and [v["gate"] for v in last["verifications"]] == ["FAIL"]
