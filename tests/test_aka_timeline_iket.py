"""IKeT receipts both ways: what AKA's timeline tool wrote for an IKeT run
(tests/fixtures/aka/timeline/iket_*, see its README) holds up under episcope's ``validate`` and
fails it when edited, and episcope, given the same run and command, writes AKA's trace and
summary byte for byte and AKA's receipt keys, its own facts only under ``episcope``."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from console.timeline.capture_view import TimelineLoadError, capture_view
from console.timeline.tool import main as timeline
from console.timeline.validate import validate_receipt

ROOT = Path(__file__).resolve().parents[1]
AKA = ROOT / "tests" / "fixtures" / "aka" / "timeline"
RUN = ROOT / "tests" / "fixtures" / "iket" / "run"
SITES = ROOT / "examples" / "iket" / "elementwise_add.events.json"
CASES = ("iket_explore", "iket_final")
KERNEL = "kernel_cutlass_add_kernel_.*"
IDENTITY = "elementwise_add:fp32:32x1024:block256"
SOURCE = "elementwise_add.py.measured"


@pytest.fixture
def workspace(tmp_path) -> Path:
    """AKA's inputs and outputs as AKA laid them out; episcope's capture-iket attempt as ``run``."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in (SOURCE, "elementwise_add.iket-events.json"):
        shutil.copy(AKA / name, ws / name)
    for case in CASES:
        shutil.copytree(AKA / case, ws / case)
    shutil.copytree(RUN, ws / "run")
    return ws


def export(ws: Path, out: str, *extra: str, dictionary: str = "elementwise_add.iket-events.json") -> dict:
    args = ["export-iket", "--run-dir", str(ws / "run"), "--kernel-regex", KERNEL,
            "--dictionary", str(ws / dictionary), "--clean-source", str(ws / SOURCE),
            "--instrumented-source", str(ws / SOURCE), "--workload-identity", IDENTITY,
            "--output-dir", str(ws / out), *extra]
    assert timeline(args) == 0
    return json.loads((ws / out / "receipt.json").read_text())


def rehash(receipt_path: Path, field: str) -> None:
    """Record the current hash of the receipt's ``field`` file, as a forger would."""
    receipt = json.loads(receipt_path.read_text())
    receipt[f"{field}_sha256"] = hashlib.sha256((receipt_path.parent / receipt[field]).read_bytes()).hexdigest()
    receipt_path.write_text(json.dumps(receipt))


def edit_trace(receipt_path: Path, change) -> None:
    path = receipt_path.parent / "trace.perfetto.json.gz"
    trace = json.loads(gzip.decompress(path.read_bytes()))
    change(trace)
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    rehash(receipt_path, "trace")


@pytest.mark.parametrize("case", CASES)
def test_episcope_validates_the_iket_receipts_aka_wrote(workspace, case):
    assert validate_receipt(str(workspace / case / "receipt.json")) == []


def test_aka_iket_receipts_say_what_aka_means(workspace):
    explore, final = (json.loads((workspace / c / "receipt.json").read_text()) for c in CASES)
    assert explore["backend"] == final["backend"] == "iket"
    assert explore["classification_reasons"] == ["stage_is_exploration", "overhead_not_measured"]
    # AKA finds a binary by the tracker's moduleId, which this IKeT's tracker does not write
    assert final["binary"] is None
    assert (final["evidence_class"], final["classification_reasons"]) == (
        "diagnostic", ["binary_identity_missing", "overhead_not_measured"])
    assert final["correctness"] == "passed" and final["correctness_evidence"]["result"]["all_pass"] is True


def test_episcope_writes_akas_trace_summary_and_receipt_keys_for_the_same_command(workspace):
    ours = export(workspace, "ours", "--correctness", "passed")
    theirs = json.loads((workspace / "iket_explore" / "receipt.json").read_text())
    for name in ("trace.perfetto.json.gz", "trace.summary.json"):
        assert (workspace / "ours" / name).read_bytes() == (workspace / "iket_explore" / name).read_bytes()
    assert set(ours) - set(theirs) == {"episcope"} and set(theirs) <= set(ours)
    differ = {k for k in theirs if ours[k] != theirs[k]}
    # episcope identifies the CUBIN (by the tracker's cubinHash), so it names a binary identity,
    # and its manifest and native index say so and name the run's files relative to themselves
    assert differ == {"binary", "binary_sha256", "manifest_sha256", "raw_sha256"}
    manifest = json.loads((workspace / "ours" / ours["manifest"]).read_text())
    aka_manifest = json.loads((workspace / "iket_explore" / theirs["manifest"]).read_text())
    assert manifest == dict(aka_manifest, binary_identity="binary.identity.json")
    index = json.loads((workspace / "ours" / ours["raw"]).read_text())
    aka_index = json.loads((workspace / "iket_explore" / theirs["raw"]).read_text())
    assert ({k: [(e["sha256"], e["size_bytes"]) for e in v] for k, v in index.items() if k != "schema"}
            == {k: [(e["sha256"], e["size_bytes"]) for e in v] for k, v in aka_index.items() if k != "schema"})
    assert index["schema"] == aka_index["schema"] == "atrex-autonomous-iket-native-index/v1"
    assert validate_receipt(str(workspace / "ours" / "receipt.json")) == []


def test_an_atrexlt1_dictionary_gives_the_same_iket_artifacts(workspace):
    shutil.copy(SITES, workspace / "sites.json")
    ours = export(workspace, "ours", "--correctness", "passed", dictionary="sites.json")
    derived = json.loads((workspace / "ours" / ours["event_dictionary"]).read_text())
    assert derived["schema"] == "atrex-autonomous-iket-events/v1"
    assert [(e["name"], e["kind"]) for e in derived["events"]] == [("load", "range"), ("loaded", "instant"),
                                                                   ("store", "range")]
    for name in ("trace.perfetto.json.gz", "trace.summary.json"):
        assert (workspace / "ours" / name).read_bytes() == (workspace / "iket_explore" / name).read_bytes()
    assert ours["episcope"]["iket"]["files"]["event_dictionary"]["path"] == "../sites.json"
    assert validate_receipt(str(workspace / "ours" / "receipt.json")) == []


def test_final_stage_with_the_evaluator_record_classifies_as_aka_does_once_the_binary_is_known(workspace):
    record = json.loads((workspace / "iket_final" / "receipt.json").read_text())["correctness_evidence"]
    (workspace / "evaluations.jsonl").write_text(json.dumps(record) + "\n")
    ours = export(workspace, "ours", "--correctness-evidence", str(workspace / "evaluations.jsonl"),
                  "--stage", "final")
    assert ours["correctness_evidence"] == record
    assert (ours["evidence_class"], ours["classification_reasons"]) == ("diagnostic", ["overhead_not_measured"])
    assert validate_receipt(str(workspace / "ours" / "receipt.json")) == []


@pytest.mark.parametrize(("change", "reason"), [
    (lambda t: t["traceEvents"][-1]["args"].update(duration_ns=t["traceEvents"][-1]["args"]["duration_ns"] + 1),
     "inconsistent duration"),
    (lambda t: t["traceEvents"][-1].update(ts=t["traceEvents"][-1]["ts"] + 1), "display time"),
    (lambda t: t["traceEvents"][-1].update(pid=t["traceEvents"][-1]["pid"] + 1), "physical SM"),
    (lambda t: t["traceEvents"].append(dict(t["traceEvents"][-1], name="spill")), "undeclared name"),
    (lambda t: t.__setitem__("traceEvents", [e for e in t["traceEvents"] if e.get("name") != "loaded"]),
     "exactly the declared events"),
    (lambda t: t.__setitem__("traceEvents", [e for e in t["traceEvents"] if e["ph"] != "M"]), "lane metadata"),
])
@pytest.mark.parametrize("case", ("iket_explore", "ours"))
def test_an_edited_iket_trace_is_rejected(workspace, case, change, reason):
    if case == "ours":
        export(workspace, "ours", "--correctness", "passed")
    receipt = workspace / case / "receipt.json"
    edit_trace(receipt, change)
    reasons = validate_receipt(str(receipt))
    assert any(reason in r for r in reasons), reasons


def test_a_dropped_event_in_trace_and_summary_together_is_caught_only_by_episcopes_record(workspace):
    """Dropping one range from the trace and recomputing the summary keeps AKA's checks
    satisfied; episcope's receipt normalizes the launch again and notices."""
    export(workspace, "ours", "--correctness", "passed")
    receipt = workspace / "ours" / "receipt.json"

    dropped = []

    def drop_one_store(trace):
        events = trace["traceEvents"]
        dropped.append(next(e for e in events if e.get("name") == "store"))
        events.remove(dropped[0])
    edit_trace(receipt, drop_one_store)
    summary_path = workspace / "ours" / "trace.summary.json"
    summary = json.loads(summary_path.read_text())
    summary["canonical_events"] -= 1
    summary["ranges"] -= 1
    summary["event_count"]["store"] -= 1
    summary["event_total_duration_ns"]["store"] -= dropped[0]["args"]["duration_ns"]
    summary_path.write_text(json.dumps(summary))
    rehash(receipt, "summary")
    assert validate_receipt(str(receipt)) == ["IKeT trace differs from the re-normalized launch",
                                              "IKeT summary differs from the re-normalized launch"]


def test_receipt_manifest_and_dictionary_must_be_iket_ones(workspace):
    receipt = workspace / "iket_explore" / "receipt.json"
    manifest_path = workspace / "iket_explore" / "iket.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps(dict(manifest, backend="cuda")))
    rehash(receipt, "manifest")
    assert "receipt and manifest backend differ" in validate_receipt(str(receipt))
    manifest_path.write_text(json.dumps(dict(manifest, launches=[])))
    rehash(receipt, "manifest")
    assert "IKeT manifest has no launches" in validate_receipt(str(receipt))
    manifest_path.write_text(json.dumps(manifest))
    rehash(receipt, "manifest")
    dictionary = workspace / "elementwise_add.iket-events.json"
    events = json.loads(dictionary.read_text())
    dictionary.write_text(json.dumps(dict(events, events=events["events"] + [{"name": "spill", "kind": "range"}])))
    rehash(receipt, "event_dictionary")
    assert validate_receipt(str(receipt)) == ["IKeT trace does not contain exactly the declared events"]


def test_episcope_receipt_without_its_iket_record_is_refused(workspace):
    export(workspace, "ours", "--correctness", "passed")
    receipt_path = workspace / "ours" / "receipt.json"
    receipt = json.loads(receipt_path.read_text())
    del receipt["episcope"]["iket"]
    receipt_path.write_text(json.dumps(receipt))
    assert validate_receipt(str(receipt_path)) == ["episcope key has no iket record"]


def test_console_opens_episcopes_iket_receipt_and_says_why_not_akas(workspace):
    export(workspace, "ours", "--correctness", "passed")
    assert capture_view(workspace / "ours" / "receipt.json").capture.event_count == 5120
    with pytest.raises(TimelineLoadError, match="without episcope's ATREXLT1 buffer"):
        capture_view(workspace / "iket_explore" / "receipt.json")


def test_export_of_an_iket_receipt_uses_episcopes_buffer_and_refuses_akas_with_the_reason(workspace, capsys):
    export(workspace, "ours", "--correctness", "passed")
    capsys.readouterr()
    assert timeline(["export", "--receipt", str(workspace / "ours" / "receipt.json"),
                     "--output-dir", str(workspace / "traces")]) == 0
    assert (workspace / "traces" / "trace.perfetto.pb").stat().st_size > 0
    assert timeline(["export", "--receipt", str(workspace / "iket_explore" / "receipt.json"),
                     "--output-dir", str(workspace / "traces2")]) == 2
    assert "without episcope's ATREXLT1 buffer" in capsys.readouterr().err
