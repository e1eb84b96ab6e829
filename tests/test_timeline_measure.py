"""measure with real fresh processes (CPU only): schedule, live runs log, adaptive stop, drift."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.timeline.measure import MeasureConfig, MeasureError, measure, runs_log_path, verify_measurement
from timeline_support import FIXTURES

PROGRAM = [sys.executable, "-S", str(FIXTURES / "sample_program.py")]
SCRIPT = Path(__file__).parents[1] / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"


def _config(tmp_path, **kw) -> MeasureConfig:
    for name in ("clean.cu", "inst.cu"):
        if not (tmp_path / name).exists():
            (tmp_path / name).write_text(name)
    env = {"SAMPLE_COUNTER": str(tmp_path / "counter")}
    env.update(kw.pop("env", {}))
    return MeasureConfig(baseline_command=PROGRAM, instrumented_command=PROGRAM,
                         baseline_source=str(tmp_path / "clean.cu"), instrumented_source=str(tmp_path / "inst.cu"),
                         output=str(tmp_path / "measurement.json"), env=env, **kw)


def test_abba_baab_schedule_and_live_log(tmp_path):
    art = measure(_config(tmp_path, max_blocks=2))
    assert art["block_patterns"] == ["ABBA", "BAAB"]
    # AKA's schedule: the variant of each run
    assert art["schedule"] == [r["variant"] for r in art["runs"]] == ["baseline", "instrumented", "instrumented",
                                                                      "baseline", "instrumented", "baseline",
                                                                      "baseline", "instrumented"]
    assert [r["variant"][0] for r in art["runs"]] == list("biibibbi")
    assert art["aggregation"]["center"] == "median"
    assert 1.5 < art["overhead_percent"] < 2.5
    assert art["interval"]["method"] == "hodges_lehmann_exact"
    assert art["interval"]["low_percent"] <= art["overhead_percent"] <= art["interval"]["high_percent"]
    lines = [json.loads(x) for x in runs_log_path(tmp_path / "measurement.json").read_text().splitlines()]
    assert [x["event"] for x in lines] == ["run"] * 4 + ["block"] + ["run"] * 4 + ["block", "done"]
    assert verify_measurement(json.loads((tmp_path / "measurement.json").read_text())) == []


def test_adaptive_blocks_stop_on_interval_width(tmp_path):
    art = measure(_config(tmp_path, min_blocks=2, max_blocks=8, ci_width=5.0))
    assert art["stop_reason"] == "ci_width" and art["blocks"] == 2
    art = measure(_config(tmp_path, min_blocks=3, max_blocks=4, ci_width=1e-9))
    assert art["stop_reason"] == "max_blocks" and art["blocks"] == 4
    assert art["rank_test"]["difference_detected"] is True
    assert art["bootstrap_interval"]["low_percent"] <= art["bootstrap_interval"]["high_percent"]


def test_adaptive_blocks_stop_only_after_a_whole_abba_baab_pair(tmp_path):
    # any width satisfies the stop rule at block 3, but AKA reads only balanced blocks
    art = measure(_config(tmp_path, min_blocks=3, max_blocks=8, ci_width=1e9))
    assert art["stop_reason"] == "ci_width" and art["block_patterns"] == ["ABBA", "BAAB", "ABBA", "BAAB"]
    assert verify_measurement(art) == []
    with pytest.raises(MeasureError, match="even max_blocks"):
        measure(_config(tmp_path, max_blocks=3))


def _abba_baab_file() -> dict:
    variants = ["baseline", "instrumented", "instrumented", "baseline",
                "instrumented", "baseline", "baseline", "instrumented"]
    return {"schema": "atrex-autonomous-timeline-measurement/v1", "schedule": list(variants),
            "runs": [{"ordinal": i, "variant": v, "latency_ms": 1.0 + (v == "instrumented")}
                     for i, v in enumerate(variants)],
            "aggregation": {"center": "median", "overhead_percent": "(instrumented_ms / baseline_ms - 1) * 100"}}


def _old_block_pattern_schedule(obj):
    obj["schedule"] = ["ABBA", "BAAB"]


def _three_blocks(obj):
    obj["schedule"] += obj["schedule"][:4]
    obj["runs"] += [{**r, "ordinal": r["ordinal"] + 8} for r in obj["runs"][:4]]


@pytest.mark.parametrize("change,reason", [
    (_old_block_pattern_schedule, "measurement schedule is invalid"),
    (lambda o: o.update(schedule=[]), "measurement schedule is invalid"),
    (lambda o: o["schedule"].pop(), "complete ABBA/BAAB blocks"),
    (lambda o: o["schedule"].__setitem__(slice(0, 4), ["baseline"] * 2 + ["instrumented"] * 2),
     "ABBA or BAAB blocks"),
    (_three_blocks, "equally many ABBA and BAAB"),
    (lambda o: o["runs"].pop(), "runs do not match schedule"),
    (lambda o: o["runs"][2].update(ordinal=7), "run 2 has an invalid ordinal"),
    (lambda o: o["runs"][1].update(variant="baseline"), "run 1 does not match schedule"),
    (lambda o: o["runs"][3].update(latency_ms=float("nan")), "run 3 latency_ms"),
])
def test_measurement_schedule_follows_akas_rule(change, reason):
    obj = _abba_baab_file()
    assert verify_measurement(obj) == []
    change(obj)
    assert any(reason in r for r in verify_measurement(obj))


def test_the_h200_measurement_in_its_earlier_form_is_refused():
    # episcope once wrote the block patterns as the schedule; AKA refuses that file, and so do we
    obj = json.loads((FIXTURES.parent / "iket" / "measurement.json").read_text())
    assert verify_measurement(obj) == []
    obj["schedule"] = obj["block_patterns"]
    assert verify_measurement(obj) == ["measurement schedule is invalid (it must name the variant of each run)"]


@pytest.mark.parametrize("env,reason", [
    ({"SAMPLE_DRIFT_AFTER": "2"}, "workload drift"),
    ({"SAMPLE_DEVICE_DRIFT": "1"}, "device drift"),
    ({"SAMPLE_EXTRA_LINE": "1"}, "exactly one"),
])
def test_drift_and_bad_samples_are_rejected(tmp_path, env, reason):
    with pytest.raises(MeasureError, match=reason):
        measure(_config(tmp_path, env=env))
    assert not (tmp_path / "measurement.json").exists()
    last = json.loads(runs_log_path(tmp_path / "measurement.json").read_text().splitlines()[-1])
    assert last["event"] == "rejected"


def test_source_changed_mid_run_is_rejected(tmp_path):
    cfg = _config(tmp_path)
    touch = [sys.executable, "-c", f"open({str(tmp_path / 'inst.cu')!r}, 'a').write('x')"]
    cfg.instrumented_command = ["sh", "-c", " ".join(f"'{a}'" for a in touch) + " && " +
                                " ".join(f"'{a}'" for a in PROGRAM)]
    with pytest.raises(MeasureError, match="changed"):
        measure(cfg)


def test_failing_process_and_wrong_iterations(tmp_path):
    cfg = _config(tmp_path)
    cfg.instrumented_command = [sys.executable, "-c", "import sys; sys.exit(3)"]
    with pytest.raises(MeasureError, match="exited 3"):
        measure(cfg)
    cfg = _config(tmp_path)
    sample = {"latency_ms": 1.0, "correctness": "passed", "synchronized": True, "workload_identity": "shape=1024",
              "device_identity": {"uuid": "GPU-1"}, "warmup": 10, "iterations": 5}
    cfg.instrumented_command = [sys.executable, "-c", f"print('__ATREX_TIMELINE_SAMPLE__=' + {json.dumps(sample)!r})"]
    with pytest.raises(MeasureError, match="warmup/iterations"):
        measure(cfg)


def test_edited_measurement_fails_verification(tmp_path):
    art = measure(_config(tmp_path))
    edited = json.loads(json.dumps(art))
    edited["runs"][1]["latency_ms"] *= 0.9
    assert any("differs" in r for r in verify_measurement(edited))
    edited = json.loads(json.dumps(art))
    edited["runs"][0]["variant"] = "instrumented"
    assert verify_measurement(edited)
    edited = json.loads(json.dumps(art))
    edited["overhead_percent"] = 0.1
    assert verify_measurement(edited) == ["measurement overhead_percent differs from its runs"]


def test_cli_measure_exit_codes(tmp_path):
    _config(tmp_path)
    base = [sys.executable, str(SCRIPT), "measure", "--baseline-command", json.dumps(PROGRAM),
            "--instrumented-command", json.dumps(PROGRAM), "--baseline-source", str(tmp_path / "clean.cu"),
            "--instrumented-source", str(tmp_path / "inst.cu"), "--output", str(tmp_path / "m.json")]
    env = {"SAMPLE_COUNTER": str(tmp_path / "c"), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(base, capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["verdict"] == "within_target"
    over = subprocess.run(base + ["--target-percent", "0.5"], capture_output=True, text=True, env=env)
    assert over.returncode == 1
    bad = subprocess.run(base, capture_output=True, text=True, env=dict(env, SAMPLE_DEVICE_DRIFT="1"))
    assert bad.returncode == 2 and bad.stderr.startswith("timeline: device drift")
    assert bad.stderr.count("\n") == 1
