"""The overhead measurement in AKA's file form, and ``measure --order`` (real fresh processes)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from console.timeline.measure import BLOCK_PATTERNS, MeasureConfig, measure, verify_measurement
from timeline_support import FIXTURES

PROGRAM = [sys.executable, "-S", str(FIXTURES / "sample_program.py")]
SCRIPT = Path(__file__).parents[1] / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
AKA_KEYS = ("schema", "schedule", "runs", "warmup", "iterations", "synchronized", "workload_identity",
            "device_identity", "variants", "aggregation")


def _sources(tmp_path: Path) -> None:
    for name in ("clean.cu", "inst.cu"):
        (tmp_path / name).write_text(name)


def test_artifact_holds_to_akas_measurement_rules(tmp_path):
    _sources(tmp_path)
    out = tmp_path / "timeline" / "measurement.json"
    art = measure(MeasureConfig(baseline_command=PROGRAM, instrumented_command=PROGRAM,
                                baseline_source=str(tmp_path / "clean.cu"), instrumented_source=str(tmp_path / "inst.cu"),
                                output=str(out), env={"SAMPLE_COUNTER": str(tmp_path / "c")}, max_blocks=4))
    schedule = art["schedule"]
    blocks = ["".join("A" if v == "baseline" else "B" for v in schedule[i:i + 4]) for i in range(0, len(schedule), 4)]
    assert len(schedule) % 4 == 0 and set(blocks) <= set(BLOCK_PATTERNS) and len(blocks) >= 2
    assert blocks.count("ABBA") == blocks.count("BAAB")
    assert [(r["ordinal"], r["variant"]) for r in art["runs"]] == list(enumerate(schedule))
    assert art["synchronized"] is True and art["aggregation"] == {
        "center": "median", "overhead_percent": "(instrumented_ms / baseline_ms - 1) * 100"}
    for variant, name in (("baseline", "clean.cu"), ("instrumented", "inst.cu")):
        source = out.parent / art["variants"][variant]["source"]  # relative to the artifact, as AKA resolves it
        assert source.resolve() == (tmp_path / name).resolve()
        assert hashlib.sha256(source.read_bytes()).hexdigest() == art["variants"][variant]["source_sha256"]
    # AKA's form alone, without episcope's statistics, verifies.
    assert verify_measurement({key: art[key] for key in AKA_KEYS}) == []


def test_cli_order_runs_exactly_those_blocks(tmp_path):
    _sources(tmp_path)
    base = [sys.executable, str(SCRIPT), "measure", "--baseline-command", json.dumps(PROGRAM),
            "--instrumented-command", json.dumps(PROGRAM), "--baseline-source", str(tmp_path / "clean.cu"),
            "--instrumented-source", str(tmp_path / "inst.cu")]
    env = {"SAMPLE_COUNTER": str(tmp_path / "c"), "PATH": "/usr/bin:/bin"}
    order = ["--order", "BAAB", "--order", "ABBA"]
    ok = subprocess.run(base + order + ["--output", str(tmp_path / "m.json")], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    art = json.loads((tmp_path / "m.json").read_text())
    assert art["block_patterns"] == ["BAAB", "ABBA"] and art["schedule"][:4] == [
        "instrumented", "baseline", "baseline", "instrumented"]
    uneven = subprocess.run(base + ["--order", "ABBA", "--output", str(tmp_path / "u.json")],
                            capture_output=True, text=True, env=env)
    assert uneven.returncode == 2 and "equally many ABBA and BAAB" in uneven.stderr
