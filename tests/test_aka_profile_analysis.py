"""analysis/metrics_key_run.json in AKA's layout, and the documented differences of the two
diagnoses on the real H200 captures (what AKA's classify_ncu.py said is a fixture)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from console.profiling import funnel

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "tests" / "fixtures" / "profiling"
AKA = json.loads((ROOT / "tests" / "fixtures" / "aka" / "classify_ncu_on_episcope.json").read_text())["captures"]
REFERENCE = ROOT / "skills" / "gpu-kernel-episode-loop" / "references" / "diagnosis-vs-aka.md"


def _assemble(tmp_path: Path, capture: str) -> tuple[Path, dict]:
    case, level_dir = capture.split("/")
    out = tmp_path / case / level_dir
    (out / "analysis").mkdir(parents=True)
    for gz in (CAPTURES / case / level_dir / "analysis").glob("*.csv.gz"):
        (out / "analysis" / gz.name[:-3]).write_bytes(gzip.decompress(gz.read_bytes()))
    level = "sol" if level_dir.startswith("sol") else level_dir
    return out, funnel.assemble(str(out), level, source=(out / "analysis" / "source_sass.csv").exists())


@pytest.mark.parametrize("capture", sorted(AKA))
def test_metrics_key_is_flat_ncu_names_and_the_documented_diagnosis_holds(capture, tmp_path):
    out, doc = _assemble(tmp_path, capture)
    key = json.loads((out / "analysis" / "metrics_key_run.json").read_text())
    focus = next(k for k in doc["kernels"] if k["name"] == doc["dominant_kernel"])
    assert key["__kernel_name__"] == focus["name"]
    # AKA's classifier and summary read these by their ncu names.
    assert key["gpu__time_duration.sum"] == pytest.approx(focus["duration"], rel=1e-3)
    assert key["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(focus["compute_sol_pct"], abs=0.01)
    assert key["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(focus["mem_sol_pct"], abs=0.01)
    assert [k["name"] for k in key["episcope"]["kernels"]] and key["episcope"]["level"] == doc["level"]
    assert sorted(d["id"] for d in focus.get("diagnostics") or []) == AKA[capture]["episcope"]


def test_the_reference_table_is_what_both_tools_said():
    text = REFERENCE.read_text()
    for capture, both in AKA.items():
        mark = "" if both["aka"] == both["episcope"] else " ≠"
        row = f"| `{capture}`{mark} | {' '.join(both['episcope']) or '—'} | {' '.join(both['aka']) or '—'} |"
        assert row in text, row
