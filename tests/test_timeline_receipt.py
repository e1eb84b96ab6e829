"""capture -> receipt -> validate on a real H200 capture; every edit fails closed."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.timeline import read_timeline_receipt
from console.timeline.capture_view import capture_view
from console.timeline.files import sha256_file
from console.timeline.measure import MeasureConfig, measure
from console.timeline.receipt import ReceiptError, write_capture
from console.timeline.summary import site_statistics
from console.timeline.validate import validate_receipt
from timeline_support import FIXTURES

SCRIPT = Path(__file__).parents[1] / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
PROGRAM = [sys.executable, "-S", str(FIXTURES / "sample_program.py")]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A capture directory with real fixtures, a binary, evaluator evidence and a measurement."""
    root = tmp_path_factory.mktemp("ws")
    for name in ("capture_ok.bin", "capture_ok.manifest.json", "fixture.events.json", "fixture_kernel.cu"):
        shutil.copy(FIXTURES / name, root / name)
    shutil.copy(FIXTURES / "fixture_kernel.instrumented.cu", root / "kernel.py")
    (root / "kernel.cubin").write_bytes(b"\x7fELF cubin bytes")
    kernel_sha = sha256_file(root / "kernel.py")
    evals = root / "evaluations.jsonl"
    evals.write_text("\n".join(json.dumps(r) for r in (
        {"schema_version": 1, "kernel_sha256": kernel_sha, "result": {"all_pass": True, "failures": []}},
        {"schema_version": 2, "kernel_sha256": "0" * 64, "result": {"all_pass": True, "failures": []}},
        {"schema_version": 2, "kernel_sha256": kernel_sha, "result": {"all_pass": True, "failures": []}},
    )) + "\n")
    measure(MeasureConfig(baseline_command=PROGRAM, instrumented_command=PROGRAM,
                          baseline_source=str(root / "fixture_kernel.cu"), instrumented_source=str(root / "kernel.py"),
                          output=str(root / "measurement.json"), env={"SAMPLE_COUNTER": str(root / "n")}))
    return root


def _capture(root: Path, out: str, **kw) -> dict:
    args = dict(raw=str(root / "capture_ok.bin"), manifest=str(root / "capture_ok.manifest.json"),
                dictionary=str(root / "fixture.events.json"), clean_source=str(root / "fixture_kernel.cu"),
                instrumented_source=str(root / "kernel.py"), binary=str(root / "kernel.cubin"),
                workload_identity="shape=1024", correctness="passed",
                correctness_evidence=str(root / "evaluations.jsonl"), measurement=str(root / "measurement.json"),
                stage="final", low_overhead_target=10.0, output_dir=str(root / out),
                intervals=("compute -> carry",))
    args.update(kw)
    return write_capture(**args)


def test_decision_grade_capture_validates(workspace):
    receipt = _capture(workspace, "final")
    assert receipt["evidence_class"] == "decision_grade", receipt["classification_reasons"]
    assert receipt["classification_reasons"] == ["correctness_passed", "provenance_bound", "trace_integrity_passed",
                                                 "measurement_recomputed", "overhead_within_target"]
    assert receipt["correctness"] == "passed" and receipt["correctness_evidence"]["schema_version"] == 2
    assert receipt["trace_integrity"] == "passed"
    assert receipt["episcope"]["trace_integrity"]["committed_records"] == 774
    assert validate_receipt(str(workspace / "final" / "receipt.json")) == []
    read = read_timeline_receipt(workspace / "final" / "receipt.json").value  # what the console shows
    assert (read.correctness, read.trace_integrity, read.committed_records) == ("passed", "passed", 774)
    assert read.verdict == "within_target" and read.measurement == "../measurement.json"
    assert read.overhead_percent == receipt["measurement"]["overhead_percent"]
    intervals = receipt["episcope"]["summary"]["intervals"]
    # END of each compute to the next BEGIN of carry: 6 iterations x 18 owners (tests/test_timeline_intervals.py)
    assert intervals[0]["count"] == 18 * 6 and intervals[0]["semantics"] == "end_to_begin"
    # the per-site statistics, stated by the receipt and read into its typed ``sites``
    capture = capture_view(workspace / "final" / "receipt.json").capture
    assert receipt["episcope"]["sites"] == site_statistics(capture)
    assert read.sites_from == "receipt" and read.sites_unknown is None
    assert [(s.name, s.ranges) for s in read.sites] == [(site.name, capture.ranges["site"].count(site.site_id))
                                                         for site in capture.dictionary.sites]
    assert sum(s.records for s in read.sites) == capture.committed_records
    assert all(s.min_ns <= s.median_ns <= s.max_ns <= s.total_ns for s in read.sites if s.ranges)


def test_exploration_stage_is_exploration_even_with_everything_else(workspace):
    """AKA: a self-declared pass (or even an evaluator record) does not lift an exploration capture."""
    for evidence in (None, str(workspace / "evaluations.jsonl")):
        receipt = _capture(workspace, "explore", stage="exploration", correctness_evidence=evidence)
        assert receipt["evidence_class"] == "exploration"
        assert receipt["classification_reasons"] == ["stage_is_exploration"]
        assert validate_receipt(str(workspace / "explore" / "receipt.json")) == []


@pytest.mark.parametrize("change,reason", [
    ({"binary": None}, "binary_identity_missing"),
    ({"measurement": None}, "overhead_not_measured"),
    ({"low_overhead_target": 1.0}, "overhead_above_target"),
    ({"correctness_evidence": None}, "correctness_not_verified"),
    ({"correctness_evidence": None, "correctness": None}, "correctness_not_passed"),
])
def test_each_missing_requirement_lowers_the_class(workspace, change, reason):
    receipt = _capture(workspace, "lower", **change)
    assert receipt["evidence_class"] == "diagnostic"
    assert receipt["classification_reasons"] == [reason]
    assert validate_receipt(str(workspace / "lower" / "receipt.json")) == []


@pytest.mark.parametrize("change,reason", [
    ({"workload_identity": "shape=4096"}, "measurement workload identity does not match"),
    ({"clean_source": "kernel.py"}, "measurement baseline source does not match the clean source"),
    ({"correctness_evidence": "no-such.jsonl"}, "correctness evidence .*no-such.jsonl"),
])
def test_evidence_that_does_not_fit_the_capture_is_refused(workspace, change, reason):
    """As AKA: a measurement of another workload or source is no lower class, it is refused."""
    change = {k: (str(workspace / v) if k != "workload_identity" else v) for k, v in change.items()}
    with pytest.raises(ReceiptError, match=reason):
        _capture(workspace, "refused", **change)
    assert not (workspace / "refused" / "receipt.json").exists()


def test_failing_evaluator_record_makes_failed_correctness(workspace, tmp_path):
    evals = tmp_path / "evals.jsonl"
    evals.write_text(json.dumps({"schema_version": 2, "kernel_sha256": sha256_file(workspace / "kernel.py"),
                                 "result": {"all_pass": False, "failures": ["sid=3: correctness mismatch"]}}) + "\n")
    receipt = _capture(workspace, "failing", correctness_evidence=str(evals), correctness=None)
    assert receipt["evidence_class"] == "diagnostic"
    assert receipt["correctness"] == "failed" and receipt["classification_reasons"] == ["correctness_not_passed"]
    assert validate_receipt(str(workspace / "failing" / "receipt.json")) == []
    with pytest.raises(ReceiptError, match="reported correctness passed contradicts the evaluator record"):
        _capture(workspace, "failing", correctness_evidence=str(evals), correctness="passed")


def _tamper_cases():
    def rewrite_json(name, edit):
        def go(d: Path):
            obj = json.loads((d / name).read_text())
            edit(obj)
            (d / name).write_text(json.dumps(obj))
        return go

    def regzip_trace(d: Path):
        doc = json.loads(gzip.decompress((d / "trace.perfetto.json.gz").read_bytes()))
        doc["traceEvents"][-1]["ts"] += 1
        (d / "trace.perfetto.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))

    def append(name):
        return lambda d: open(d / name, "ab").write(b"\n// edit")

    cases = [
        ("trace", regzip_trace, "trace sha256 mismatch"),
        ("summary", rewrite_json("trace.summary.json", lambda o: o.update(ranges=o["ranges"] + 1)),
         "summary sha256 mismatch"),
        ("receipt_class", rewrite_json("receipt.json", lambda o: o.update(evidence_class="exploration",
                                                                          classification_reasons=[])),
         "does not follow"),
        ("receipt_reasons", rewrite_json("receipt.json", lambda o: o.update(classification_reasons=[])),
         "classification reasons do not follow"),
        ("receipt_integrity", rewrite_json("receipt.json", lambda o: o.update(trace_integrity="failed")),
         "trace integrity is not passed"),
        ("receipt_integrity_facts",
         rewrite_json("receipt.json", lambda o: o["episcope"]["trace_integrity"].update(committed_records=1)),
         "episcope trace_integrity differs"),
        ("receipt_intervals", rewrite_json("receipt.json", lambda o: o["episcope"]["summary"]["intervals"].clear()),
         "episcope summary differs"),
        ("receipt_sites", rewrite_json("receipt.json", lambda o: o["episcope"]["sites"][0].update(median_ns=1.0)),
         "episcope sites differ"),
        ("receipt_correctness", rewrite_json("receipt.json", lambda o: o.update(correctness="failed")),
         "correctness contradicts the evaluator record"),
        ("receipt_stage", rewrite_json("receipt.json", lambda o: o.update(stage="invented")), "stage is invalid"),
        ("receipt_summary_hash", rewrite_json("receipt.json", lambda o: o.update(summary_sha256="0" * 64)),
         "summary sha256 mismatch"),
        ("receipt_schema", rewrite_json("receipt.json", lambda o: o.update(schema="other/v1")), "schema"),
        ("receipt_measurement",
         rewrite_json("receipt.json", lambda o: o["measurement"].update(overhead_percent=0.0)),
         "measurement overhead_percent is not reproducible"),
        ("receipt_measurement_statistics",
         rewrite_json("receipt.json", lambda o: o["episcope"]["measurement"].update(verdict="within_target?")),
         "episcope measurement differs"),
        ("receipt_record", rewrite_json("receipt.json", lambda o: o["correctness_evidence"].update(
            kernel_sha256="1" * 64)), "correctness evidence does not match the instrumented source"),
        ("receipt_missing_raw", rewrite_json("receipt.json", lambda o: o.update(raw="nowhere.bin")), "raw missing"),
    ]
    for name in ("capture_ok.bin", "capture_ok.manifest.json", "fixture.events.json", "fixture_kernel.cu",
                 "kernel.py", "kernel.cubin"):
        cases.append((f"edit_{name}", append(name), "sha256 mismatch"))
    cases.append(("edit_measurement.json", append("measurement.json"), "measurement hash mismatch"))
    return cases


@pytest.mark.parametrize("name,tamper,reason", _tamper_cases(), ids=[c[0] for c in _tamper_cases()])
def test_tampering_fails_validation(workspace, tmp_path, name, tamper, reason):
    root = tmp_path / "copy"
    shutil.copytree(workspace, root, ignore=shutil.ignore_patterns("final", "lower", "failing", "copy"))
    _capture(root, "cap")
    assert validate_receipt(str(root / "cap" / "receipt.json")) == []
    target = root / "cap" if name in ("trace", "summary") or name.startswith("receipt") else root
    tamper(target)
    reasons = validate_receipt(str(root / "cap" / "receipt.json"))
    assert any(reason in r for r in reasons), reasons


def test_a_raw_buffer_over_the_size_limit_is_refused_without_being_read_whole(workspace, tmp_path, monkeypatch):
    from console.timeline import abi

    root = tmp_path / "big"
    shutil.copytree(workspace, root, ignore=shutil.ignore_patterns("final", "lower", "failing"))
    _capture(root, "cap")
    monkeypatch.setattr(abi, "MAX_RAW_BYTES", (root / "capture_ok.bin").stat().st_size - 1)
    reasons = validate_receipt(str(root / "cap" / "receipt.json"))
    assert any(r.startswith("capture cannot be decoded: file is") and f"more than the {abi.MAX_RAW_BYTES} allowed" in r
               for r in reasons), reasons


def test_consistent_forgery_of_raw_is_caught_by_redecode(workspace, tmp_path):
    root = tmp_path / "forge"
    shutil.copytree(workspace, root, ignore=shutil.ignore_patterns("final", "lower", "failing"))
    _capture(root, "cap")
    raw = bytearray((root / "capture_ok.bin").read_bytes())
    raw[64 + 16 * 3 + 8] ^= 1  # payload bit: still a valid capture, but another trace
    (root / "capture_ok.bin").write_bytes(raw)
    receipt = json.loads((root / "cap" / "receipt.json").read_text())
    receipt["raw_sha256"] = sha256_file(root / "capture_ok.bin")
    (root / "cap" / "receipt.json").write_text(json.dumps(receipt))
    reasons = validate_receipt(str(root / "cap" / "receipt.json"))
    assert "canonical trace is not reproducible from the raw buffer" in reasons


def test_cli_capture_rejects_with_one_line_and_no_receipt(workspace, tmp_path):
    raw = bytearray((workspace / "capture_ok.bin").read_bytes())
    raw[28] = 1  # overflow bit
    (tmp_path / "bad.bin").write_bytes(raw)
    args = [sys.executable, str(SCRIPT), "capture", "--raw", str(tmp_path / "bad.bin"),
            "--manifest", str(workspace / "capture_ok.manifest.json"),
            "--dictionary", str(workspace / "fixture.events.json"),
            "--clean-source", str(workspace / "fixture_kernel.cu"),
            "--instrumented-source", str(workspace / "kernel.py"), "--workload-identity", "w",
            "--output-dir", str(tmp_path / "out")]
    bad = subprocess.run(args, capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.startswith("timeline: status_overflow") and bad.stderr.count("\n") == 1
    assert not (tmp_path / "out" / "receipt.json").exists()
    args[args.index("--raw") + 1] = str(workspace / "capture_ok.bin")
    args[2] = "decode"  # the alias of capture
    ok = subprocess.run(args, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["evidence_class"] == "exploration"
    val = subprocess.run([sys.executable, str(SCRIPT), "validate", str(tmp_path / "out" / "receipt.json")],
                         capture_output=True, text=True)
    assert val.returncode == 0 and json.loads(val.stdout)["valid"] is True
    exp = subprocess.run([sys.executable, str(SCRIPT), "export", "--receipt", str(tmp_path / "out" / "receipt.json"),
                          "--output-dir", str(tmp_path / "exp")], capture_output=True, text=True)
    assert exp.returncode == 0 and (tmp_path / "exp" / "trace.perfetto.pb").stat().st_size > 0
