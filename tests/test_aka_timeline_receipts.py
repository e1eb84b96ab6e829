"""Receipts, traces, summaries and measurements both ways: what AKA's timeline tool wrote
(tests/fixtures/aka/timeline, see its README) holds up under episcope's ``validate``, and
episcope, given the same inputs, writes what AKA wrote (the same trace text and summary, the
same receipt keys and values; only its own ``episcope`` key is more)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from console.formats.timeline import read_timeline_measurement, read_timeline_receipt
from console.timeline.files import sha256_file
from console.timeline.measure import verify_measured_files, verify_measurement
from console.timeline.receipt import ReceiptError, write_capture
from console.timeline.validate import validate_receipt
from timeline_support import FIXTURES

AKA = Path(__file__).parent / "fixtures" / "aka" / "timeline"
CASES = ("final", "explore", "on_episcope_measurement")
# the decode command AKA ran for each case (inputs relative to the workspace)
ARGS = {
    "final": dict(binary="kernel.cubin", correctness="passed", correctness_evidence="evaluations.jsonl",
                  measurement="aka_measurement.json", stage="final"),
    "explore": dict(binary=None, correctness="passed", correctness_evidence=None, measurement=None,
                    stage="exploration"),
    "on_episcope_measurement": dict(binary="kernel.cubin", correctness=None, correctness_evidence="evaluations.jsonl",
                                    measurement="episcope_measurement.json", stage="final"),
}


@pytest.fixture
def workspace(tmp_path) -> Path:
    """The inputs AKA decoded, then AKA's outputs beside them as AKA laid them out."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("capture_ok.bin", "capture_ok.manifest.json", "fixture.events.json", "fixture_kernel.cu"):
        shutil.copy(FIXTURES / name, ws / name)
    shutil.copy(FIXTURES / "fixture_kernel.instrumented.cu", ws / "kernel.py")
    (ws / "kernel.cubin").write_bytes(b"\x7fELF cubin bytes")
    record = json.loads((AKA / "final" / "receipt.json").read_text())["correctness_evidence"]
    (ws / "evaluations.jsonl").write_text(json.dumps(record) + "\n")
    for name in ("aka_measurement.json", "episcope_measurement.json"):
        shutil.copy(AKA / name, ws / name)
    for case in CASES:
        shutil.copytree(AKA / case, ws / case)
    return ws


@pytest.mark.parametrize("case", CASES)
def test_episcope_validates_what_aka_wrote(workspace, case):
    assert validate_receipt(str(workspace / case / "receipt.json")) == []


def test_aka_receipts_say_what_aka_means(workspace):
    final, explore, on_ours = (json.loads((workspace / c / "receipt.json").read_text()) for c in CASES)
    assert final["evidence_class"] == on_ours["evidence_class"] == "decision_grade"
    assert explore["evidence_class"] == "exploration"
    assert explore["classification_reasons"] == ["stage_is_exploration", "overhead_not_measured"]
    assert final["correctness"] == "passed" and final["trace_integrity"] == "passed"
    receipt = read_timeline_receipt(workspace / "final" / "receipt.json").value
    assert (receipt.correctness, receipt.trace_integrity, receipt.evidence_class) == ("passed", "passed",
                                                                                      "decision_grade")
    assert receipt.overhead_percent == final["measurement"]["overhead_percent"]
    assert receipt.measurement == "../aka_measurement.json" and receipt.verdict is None


def _edit(path: Path, change) -> None:
    obj = json.loads(path.read_text())
    change(obj)
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize("edit,reason", [
    (lambda ws: _edit(ws / "final" / "receipt.json", lambda o: o.update(correctness="failed")),
     "correctness contradicts the evaluator record"),
    (lambda ws: _edit(ws / "final" / "receipt.json", lambda o: o.update(classification_reasons=[])),
     "classification reasons do not follow"),
    (lambda ws: _edit(ws / "final" / "receipt.json", lambda o: o["measurement"].update(baseline_ms=0.5)),
     "measurement baseline_ms is not reproducible"),
    (lambda ws: _edit(ws / "aka_measurement.json", lambda o: o["runs"][0].update(latency_ms=9.0)),
     "measurement hash mismatch"),
    (lambda ws: (ws / "kernel.py").write_text("changed\n"), "instrumented_source sha256 mismatch"),
])
def test_episcope_rejects_an_edited_aka_receipt(workspace, edit, reason):
    edit(workspace)
    reasons = validate_receipt(str(workspace / "final" / "receipt.json"))
    assert any(reason in r for r in reasons), reasons


def test_an_aka_summary_edited_with_its_hash_is_caught_by_redecode(workspace):
    summary = workspace / "final" / "trace.summary.json"
    _edit(summary, lambda o: o.update(canonical_events=774))  # episcope's old count: records, not events
    _edit(workspace / "final" / "receipt.json", lambda o: o.update(summary_sha256=sha256_file(summary)))
    assert "trace summary is not reproducible from the raw buffer" in validate_receipt(
        str(workspace / "final" / "receipt.json"))


@pytest.mark.parametrize("case", CASES)
def test_episcope_writes_what_aka_wrote(workspace, case):
    args = {k: (str(workspace / v) if k in ("binary", "correctness_evidence", "measurement") and v else v)
            for k, v in ARGS[case].items()}
    ours = write_capture(raw=str(workspace / "capture_ok.bin"), manifest=str(workspace / "capture_ok.manifest.json"),
                         dictionary=str(workspace / "fixture.events.json"),
                         clean_source=str(workspace / "fixture_kernel.cu"),
                         instrumented_source=str(workspace / "kernel.py"), workload_identity="shape=1024",
                         output_dir=str(workspace / f"ours_{case}"), **args)
    theirs = json.loads((workspace / case / "receipt.json").read_text())
    assert set(ours) - set(theirs) == {"episcope"}
    differ = {k for k in theirs if ours[k] != theirs[k]}
    # AKA gzips at level 9, episcope at 6: the same trace text, other bytes
    assert differ == {"trace_sha256"}
    out, aka = workspace / f"ours_{case}", workspace / case
    assert gzip.decompress((out / "trace.perfetto.json.gz").read_bytes()) == gzip.decompress(
        (aka / "trace.perfetto.json.gz").read_bytes())
    assert (out / "trace.summary.json").read_bytes() == (aka / "trace.summary.json").read_bytes()
    assert validate_receipt(str(out / "receipt.json")) == []


def test_each_tool_reads_the_others_measurement(workspace):
    """AKA's decode took episcope's measurement file (its receipt names it by hash) and derived
    the overhead episcope states; episcope verifies AKA's file and reads it for the console."""
    ours = json.loads((workspace / "episcope_measurement.json").read_text())
    entry = json.loads((workspace / "on_episcope_measurement" / "receipt.json").read_text())["measurement"]
    assert entry["sha256"] == sha256_file(workspace / "episcope_measurement.json")
    assert entry["overhead_percent"] == pytest.approx(ours["overhead_percent"], rel=1e-12)
    aka = json.loads((workspace / "aka_measurement.json").read_text())
    assert verify_measurement(aka) == [] and verify_measured_files(aka, workspace / "aka_measurement.json") == []
    read = read_timeline_measurement(workspace / "aka_measurement.json").value
    assert read.schedule == tuple(aka["schedule"]) and len(read.runs) == 8
    assert read.workload_identity == "shape=1024" and read.device_uuid == "GPU-1"


@pytest.mark.parametrize("change,reason", [
    (lambda o: o.pop("variants"), "measurement names no baseline variant"),
    (lambda o: o["variants"]["baseline"].update(source="gone.cu"), "measurement baseline source is missing"),
    (lambda o: o.update(device_identity={}), "measurement names no device_identity"),
    (lambda o: o.update(synchronized=False), "not device synchronized"),
])
def test_a_measurement_aka_would_refuse_is_refused(workspace, change, reason):
    """AKA's measurement checks beyond the runs: episcope's decode refuses the same files."""
    _edit(workspace / "aka_measurement.json", change)
    with pytest.raises(ReceiptError, match=reason):
        write_capture(raw=str(workspace / "capture_ok.bin"), manifest=str(workspace / "capture_ok.manifest.json"),
                      dictionary=str(workspace / "fixture.events.json"),
                      clean_source=str(workspace / "fixture_kernel.cu"), instrumented_source=str(workspace / "kernel.py"),
                      binary=None, workload_identity="shape=1024", measurement=str(workspace / "aka_measurement.json"),
                      output_dir=str(workspace / "refused"))
    assert not (workspace / "refused").exists()
