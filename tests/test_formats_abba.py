"""ABBA schedule, verdict and artifacts (FORMATS §7)."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from console.formats.abba import (
    AbbaRun,
    compute_verdict,
    parse_abba_batch,
    parse_abba_run,
    parse_verdict,
    read_abba_request,
    read_abba_verdict,
)
from console.formats.gpu_side import abba_schedule
from console.formats.problems import FormatError


def run_obj(revision, repeat, latency, *, exit_code=0, all_pass=True):
    result = None if latency is None else {"all_pass": all_pass, "failures": [] if all_pass else ["sid=0: mismatch"], "latency_us_geomean": latency}
    return {"revision": revision, "repeat": repeat, "exit_code": exit_code, "result": result, "stdout_tail": "ok", "stderr_tail": ""}


def runs_for(latencies: dict[str, list[float | None]], repeats: int, overrides: dict | None = None) -> list[dict]:
    overrides = overrides or {}
    seen = {"incumbent": 0, "candidate": 0}
    out = []
    for index, revision in enumerate(abba_schedule(repeats)):
        out.append(run_obj(revision, index // 2, latencies[revision][seen[revision]], **overrides.get((revision, seen[revision]), {})))
        seen[revision] += 1
    return out


def parsed(objs):
    return [parse_abba_run(obj) for obj in objs]


def test_schedule():
    assert abba_schedule(1) == ["incumbent", "candidate"]
    assert abba_schedule(2) == ["incumbent", "candidate", "candidate", "incumbent"]
    assert abba_schedule(3)[4:] == ["incumbent", "candidate"]
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            abba_schedule(bad)


def test_pass_uses_geometric_means_and_point_estimate():
    runs = parsed(runs_for({"incumbent": [100.0, 104.0], "candidate": [90.0, 92.0]}, 2))
    verdict = compute_verdict(runs, 2)
    inc, cand = statistics.geometric_mean([100.0, 104.0]), statistics.geometric_mean([90.0, 92.0])
    assert verdict.gate == "PASS" and verdict.error is None and verdict.passed
    assert math.isclose(verdict.incumbent_latency_us, inc) and math.isclose(verdict.candidate_latency_us, cand)
    assert math.isclose(verdict.improvement_pct, (inc - cand) / inc * 100)
    assert len(verdict.runs) == 4
    # The threshold is strict: an improvement equal to it fails.
    assert compute_verdict(runs, 2, min_improvement_pct=verdict.improvement_pct).gate == "FAIL"
    assert compute_verdict(runs, 2, min_improvement_pct=50.0).gate == "FAIL"


def test_slower_candidate_fails():
    runs = parsed(runs_for({"incumbent": [100.0, 100.0], "candidate": [101.0, 102.0]}, 2))
    verdict = compute_verdict(runs, 2)
    assert verdict.gate == "FAIL" and verdict.improvement_pct < 0 and verdict.error


@pytest.mark.parametrize(
    "override",
    [
        {("candidate", 1): {"exit_code": 1}},
        {("incumbent", 0): {"all_pass": False}},
        {("incumbent", 1): {"exit_code": -1}},
    ],
)
def test_invalid_run_means_fail(override):
    runs = parsed(runs_for({"incumbent": [100.0, 100.0], "candidate": [50.0, 50.0]}, 2, override))
    verdict = compute_verdict(runs, 2)
    assert verdict.gate == "FAIL" and verdict.improvement_pct is None
    assert "of 2" in verdict.error


def test_missing_result_or_latency_means_fail():
    runs = parsed(runs_for({"incumbent": [100.0, None], "candidate": [50.0, 50.0]}, 2))
    assert compute_verdict(runs, 2).gate == "FAIL"
    runs = parsed(runs_for({"incumbent": [100.0, 0.0], "candidate": [50.0, 50.0]}, 2))
    assert compute_verdict(runs, 2).gate == "FAIL"


def test_schedule_violations_are_errors():
    good = parsed(runs_for({"incumbent": [100.0, 100.0], "candidate": [90.0, 90.0]}, 2))
    assert compute_verdict(good[:3], 2).gate == "ERROR"
    assert compute_verdict([good[1], good[0], *good[2:]], 2).gate == "ERROR"
    assert compute_verdict(good, 1).gate == "ERROR"
    assert compute_verdict(good, 0).gate == "ERROR"
    assert compute_verdict([], 2).gate == "ERROR"


def test_run_parsing_type_checks():
    with pytest.raises(FormatError, match="revision"):
        parse_abba_run(dict(run_obj("incumbent", 0, 1.0), revision="baseline"))
    with pytest.raises(FormatError, match="repeat"):
        parse_abba_run(dict(run_obj("incumbent", 0, 1.0), repeat="0"))
    with pytest.raises(FormatError, match="result.latency_us_geomean"):
        parse_abba_run(dict(run_obj("incumbent", 0, 1.0), result={"all_pass": True, "latency_us_geomean": "1"}))
    run = parse_abba_run({"revision": "candidate", "repeat": 0})
    assert isinstance(run, AbbaRun) and run.exit_code is None and run.result is None and not run.valid


def write(path, obj):
    path.write_text(json.dumps(obj, indent=2))
    return path


def test_verification_directory(tmp_path):
    schedule = [{"revision": r, "repeat": i // 2} for i, r in enumerate(abba_schedule(2))]
    write(tmp_path / "request-0000.json", {
        "schema_version": 1, "schedule": schedule,
        "manifests": {"incumbent": {"kernel.py": "snapshots/incumbent/0000.bin"}, "candidate": {"kernel.py": "snapshots/candidate/0000.bin"}},
        "command": ["python3", "test_kernel.py", "--version", "vlong", "--no-memory"], "run_timeout_seconds": 120,
    })
    payload = {"schema_version": 1, "runs": runs_for({"incumbent": [100.0, 102.0], "candidate": [95.0, 96.0]}, 2), "error": None}
    write(tmp_path / "result-0000.json", payload)
    write(tmp_path / "result.json", dict(payload, shape_batch_count=1))

    request = read_abba_request(tmp_path / "request-0000.json")
    assert request.ok and request.value.repeats == 2 and request.value.schedule[1] == ("candidate", 0)
    batch = parse_abba_batch(json.loads((tmp_path / "result-0000.json").read_text()))
    assert [r.revision for r in batch.runs] == abba_schedule(2)
    verdict = read_abba_verdict(tmp_path / "result.json")
    assert verdict.ok and verdict.value.gate == "PASS"
    assert verdict.value.artifact == str(tmp_path / "result.json")
    # R from the request: a payload with only the first repeat is a schedule violation.
    write(tmp_path / "result.json", dict(payload, runs=payload["runs"][:2]))
    assert read_abba_verdict(tmp_path / "result.json").value.gate == "ERROR"
    # A batch that reported an error.
    write(tmp_path / "result.json", dict(payload, runs=[], error="RuntimeError: gpu lost"))
    error = read_abba_verdict(tmp_path / "result.json").value
    assert error.gate == "ERROR" and error.error == "RuntimeError: gpu lost"
    # A malformed run inside the payload is an ERROR verdict, not a lost document.
    write(tmp_path / "result.json", dict(payload, runs=[{"revision": "x"}]))
    assert read_abba_verdict(tmp_path / "result.json").value.gate == "ERROR"
    # A single run record is read as a batch of one.
    write(tmp_path / "result-0001.json", payload["runs"][0])
    assert len(parse_abba_batch(json.loads((tmp_path / "result-0001.json").read_text())).runs) == 1


def test_repeats_come_from_the_first_request_however_it_is_numbered(tmp_path):
    schedule = [{"revision": r, "repeat": i // 2} for i, r in enumerate(abba_schedule(2))]
    write(tmp_path / "request-0001.json", {"schema_version": 1, "schedule": schedule, "command": ["python3", "test_kernel.py"]})
    payload = {"schema_version": 1, "runs": runs_for({"incumbent": [100.0], "candidate": [95.0]}, 1), "error": None}
    write(tmp_path / "result.json", payload)
    # The request asks for two repeats; one repeat of runs breaks the schedule.
    assert read_abba_verdict(tmp_path / "result.json").value.gate == "ERROR"


def test_stored_verdicts_of_both_generations(tmp_path):
    older = {"gate": "FAIL", "candidate_latency_us": 8.9, "incumbent_latency_us": 9.5, "error": None}
    verdict = read_abba_verdict(write(tmp_path / "a.json", older)).value
    assert verdict.gate == "FAIL" and verdict.runs is None and verdict.improvement_pct is None
    newer = dict(older, gate="PASS", improvement_pct=6.3, runs=runs_for({"incumbent": [9.5], "candidate": [8.9]}, 1),
                 error="", artifact="x/result.json", candidate_performance_score=1.3, incumbent_performance_score=1.2)
    verdict = parse_verdict(newer)
    assert verdict.error is None and verdict.candidate_performance_score == 1.3 and len(verdict.runs) == 2
    assert json.loads(json.dumps(verdict.to_json()))["runs"][0]["result"]["all_pass"] is True


def test_unreadable_documents_name_the_path(tmp_path):
    missing = read_abba_verdict(tmp_path / "nope.json")
    assert missing.value is None and missing.problems == ()
    for name, text in [("a.json", "{"), ("b.json", '{"gate": "MAYBE"}'), ("c.json", "[1]"), ("d.json", '{"other": 1}')]:
        (tmp_path / name).write_text(text)
        result = read_abba_verdict(tmp_path / name)
        assert result.value is None and result.problems[0].path == str(tmp_path / name)
    bad_request = write(tmp_path / "request-0001.json", {"schedule": [{"revision": "incumbent", "repeat": "0"}]})
    problem = read_abba_request(bad_request).problems[0]
    assert "schedule[0].repeat" in problem.error
