"""Single AKA-written files read by episcope's readers, against what AKA's readers said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from console.episode.phase_timing import PhaseTimer
from console.episode.session import Session
from console.episode.summary import status_document
from console.formats.profile_json import parse_profile_json, read_gateway_profile
from console.formats.telemetry import parse_telemetry_line

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "aka"
PHASE_CASES = FIXTURES / "phase_cases"
AKA_PHASES = json.loads((PHASE_CASES / "expected_by_aka.json").read_text())["cases"]
AKA_CAMPAIGN = json.loads((FIXTURES / "campaign_inflight.expected_by_aka.json").read_text())


def _expected_profile() -> dict:
    (theirs,) = [p for p in AKA_CAMPAIGN["profiles"] if "worktrees" in p["path"]]
    return theirs


def test_job_record_profile_is_the_gateway_result():
    doc = read_gateway_profile(FIXTURES / "profiles" / "job_record" / "gateway_profile.json")
    assert doc.ok, doc.problems
    profile, theirs = doc.value, _expected_profile()
    assert (profile.job_id, profile.job_status) == (theirs["job_id"], theirs["status"])
    assert profile.profiler == theirs["profiler"] and profile.level == theirs["level"]
    assert len(profile.kernels) == len(theirs["kernels"])
    for ours, kernel in zip(profile.kernels, theirs["kernels"], strict=True):
        assert ours.name == kernel["name"]
        assert ours.duration_ns == pytest.approx(kernel["duration"])  # AKA writes ns
        assert (ours.compute_sol_pct, ours.mem_sol_pct, ours.dram_pct, ours.occupancy_pct, ours.bound) == (
            kernel["compute_sol_pct"], kernel["mem_sol_pct"], kernel["dram_pct"], kernel["occupancy_pct"], kernel["bound"])
    # The generation without aggregates: none is made up.
    assert profile.kernel_count is None and profile.total_duration_us is None and profile.kernels_omitted is None


def test_projected_profile_keeps_its_aggregates():
    doc = read_gateway_profile(FIXTURES / "profiles" / "projected" / "gateway_profile.json")
    assert doc.ok, doc.problems
    profile, theirs = doc.value, _expected_profile()["projected_by_newer_generation"]
    assert profile.kernel_count == theirs["kernel_count"]
    assert profile.total_duration_us == pytest.approx(theirs["total_duration_us"])
    assert profile.dominant_kernel == theirs["dominant_kernel"]
    assert profile.kernels_omitted == theirs["kernels_omitted"]
    (kernel,) = profile.kernels
    assert kernel.duration_ns == pytest.approx(theirs["total_duration_us"] * 1e3)
    assert kernel.mem_sol_pct == 22.18 and kernel.bound == theirs["dominant_bound"]
    assert profile.profiler is None  # the projection drops it: unknown, not guessed


def test_projection_capped_at_32_kernels_says_how_many_were_left_out():
    kernels = [{"name": f"k{i}", "duration_us": 100.0 - i, "compute_sol_pct": 10.0, "memory_sol_pct": 50.0}
               for i in range(32)]
    record = {"job_id": "pf_x", "kind": "profile", "status": "succeeded", "error": None,
              "result": {"level": "survey", "kernel_count": 40, "total_duration_us": 4000.0,
                         "dominant_kernel": "k0", "kernels": kernels, "kernels_omitted": 8}}
    profile = parse_profile_json(record)
    assert (profile.kernel_count, profile.kernels_omitted, len(profile.kernels)) == (40, 8, 32)
    assert profile.kernels[0].duration_ns == pytest.approx(100_000.0)


def test_failed_profile_job_is_unreadable_with_its_error(tmp_path):
    path = tmp_path / "gateway_profile.json"
    path.write_text(json.dumps({"job_id": "pf_y", "kind": "profile", "status": "failed", "result": None,
                                "error": {"reason": "profiler_unavailable", "message": "ncu not found"}}))
    doc = read_gateway_profile(path)
    assert doc.value is None
    (problem,) = doc.problems
    assert "pf_y" in problem.error and "failed" in problem.error and "ncu not found" in problem.error


@pytest.mark.parametrize("case", sorted(AKA_PHASES))
def test_phase_timer_agrees_with_akas_reader(case):
    aka = AKA_PHASES[case]["wall_time"]
    timer = PhaseTimer()
    timer.read([parse_telemetry_line(line) for line in (PHASE_CASES / case).read_bytes().splitlines()])
    timing = timer.timing()
    assert list(timing.reason_codes) == aka["timing"]["reason_codes"]
    assert timing.measurement == aka["timing"]["measurement"]
    for phase, theirs in aka["phases"].items():
        ours = timing.phases[phase]
        assert (ours.interval_count, ours.measurement) == (theirs["interval_count"], theirs["measurement"]), phase
        assert ours.wall_seconds == (None if theirs["wall_seconds"] is None else pytest.approx(theirs["wall_seconds"], abs=1e-6))


@pytest.mark.parametrize("case", sorted(AKA_PHASES))
def test_status_reports_akas_phase_measurement_and_reasons(case, tmp_path):
    runtime = tmp_path / ".atrex_long_horizon"
    runtime.mkdir()
    shutil.copy(PHASE_CASES / case, runtime / "telemetry.jsonl")
    status = status_document(Session(str(tmp_path)).scan(), now=0.0)
    aka = AKA_PHASES[case]["wall_time"]
    assert status["phase_timing"]["reason_codes"] == aka["timing"]["reason_codes"]
    assert status["phase_timing"]["measurement"] == aka["timing"]["measurement"]
    assert {p: v["measurement"] for p, v in status["phase_timing"]["phases"].items()} == {
        p: v["measurement"] for p, v in aka["phases"].items()}
    assert status["source_reads"] == aka["source_reads"]["count"]


def test_funnel_diffs_against_a_synced_job_record(tmp_path):
    """A profile the sandbox synced back is its job record; ``--diff`` reads the profile in it."""
    import gzip

    from console.formats.profile_record import profile_job_record
    from console.profiling import funnel

    fixture = Path(__file__).resolve().parent / "fixtures" / "profiling" / "copy"
    runs = {}
    for level in ("sol", "deep"):
        out = tmp_path / level
        (out / "analysis").mkdir(parents=True)
        for gz in (fixture / level / "analysis").glob("*.csv.gz"):
            (out / "analysis" / gz.name[:-3]).write_bytes(gzip.decompress(gz.read_bytes()))
        diff_dir = str(tmp_path / "sol") if level == "deep" else None
        if diff_dir:
            bare = json.loads((tmp_path / "sol" / "gateway_profile.json").read_text())
            (tmp_path / "sol" / "gateway_profile.json").write_text(json.dumps(profile_job_record("pf_1", "succeeded", bare)))
        runs[level] = funnel.assemble(str(out), level, source=(out / "analysis" / "source_sass.csv").exists(), diff_dir=diff_dir)
    (row,) = runs["deep"]["diff"]["kernels"]
    assert row["name"] == "copy_f32" and row["duration_before"] > 0


def test_trace_lines_are_byte_for_byte_in_akas_form(tmp_path):
    """AKA's iteration_trace.py wrote the phase cases; episcope's tool writes the same form, so
    a byte diff of the two differs only in the values (ids, clocks)."""
    import os
    import subprocess
    import sys

    def form(line: bytes) -> bytes:
        return json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True).encode()

    aka_lines = (PHASE_CASES / "clean.jsonl").read_bytes().splitlines()
    assert all(line == form(line) for line in aka_lines)
    tool = Path(__file__).resolve().parents[1] / "tools" / "iteration_trace.py"
    env = {**os.environ, "ATREX_TELEMETRY_TRACE": str(tmp_path / "t.jsonl"), "ATREX_TELEMETRY_CAMPAIGN_ID": "softmax",
           "ATREX_TELEMETRY_ITERATION_ID": "episode-0001", "ATREX_TELEMETRY_ATTEMPT_ID": "invocation-1"}
    for argv in (["phase-start", "profile"], ["phase-end", "profile"], ["source-read", "gpu_wiki", "kernel_wiki/softmax"]):
        subprocess.run([sys.executable, str(tool), *argv], env=env, check=True, capture_output=True)
    ours = (tmp_path / "t.jsonl").read_bytes().splitlines()
    assert all(line == form(line) for line in ours)
    # The same keys in the same order as AKA's lines of the same events.
    aka_by_event = {json.loads(line)["event"]: list(json.loads(line)) for line in aka_lines}
    assert [list(json.loads(line)) for line in ours] == [aka_by_event[json.loads(line)["event"]] for line in ours]
