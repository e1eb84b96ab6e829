"""IKeT route: capture-iket, export-iket and profile-iket on a run recorded on an H200.

The fixture under tests/fixtures/iket/run is a real capture-iket attempt of
examples/iket/elementwise_add.py (128 CTAs x 8 warps; `load` and `store` ranges, a `loaded`
mark per warp) with its measurement. Rejection tests edit a copy of the decoded trace and
re-record its hash in capture.json, so only the check under test can fire.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

from console.formats.timeline import read_timeline_receipt
from console.timeline.capture_view import capture_view
from console.timeline.tool import main as timeline
from console.timeline.validate import validate_receipt

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "iket"
DICTIONARY = ROOT / "examples" / "iket" / "elementwise_add.events.json"
EXAMPLE = ROOT / "examples" / "iket" / "elementwise_add.py"
TRACE = "iket_output/iket_pid_0x63a.trace.json"
KERNEL = "kernel_cutlass_add_kernel_.*"
IDENTITY = "elementwise_add:fp32:32x1024:block256"


def export_args(run_dir, out, *, regex=KERNEL, dictionary=DICTIONARY, extra=()):
    return ["export-iket", "--run-dir", str(run_dir), "--kernel-regex", regex, "--dictionary", str(dictionary),
            "--clean-source", str(EXAMPLE), "--instrumented-source", str(EXAMPLE),
            "--workload-identity", IDENTITY, "--correctness", "passed", "--output-dir", str(out), *extra]


@pytest.fixture
def run_copy(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", run)
    return run


def edit_trace(run: Path, change) -> None:
    """Apply ``change`` to the decoded trace and record the new hash as capture-iket would."""
    path = run / TRACE
    trace = json.loads(path.read_text())
    change(trace)
    path.write_text(json.dumps(trace))
    record = json.loads((run / "capture.json").read_text())
    for item in record["outputs"]["trace_json"]:
        item["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (run / "capture.json").write_text(json.dumps(record))


def rejection(capsys) -> str:
    return capsys.readouterr().err


def test_export_of_the_h200_run_validates_and_opens_like_a_cuda_receipt(run_copy, tmp_path, capsys):
    out = tmp_path / "out"
    measurement = tmp_path / "measurement.json"
    shutil.copy(FIXTURE / "measurement.json", measurement)
    shutil.copy(FIXTURE / "measurement.runs.jsonl", tmp_path / "measurement.runs.jsonl")
    # the source the H200 measurement ran (the example before a later style edit), where the
    # measurement file names it: relative to the file, as AKA reads it
    measured = tmp_path / "examples" / "iket" / EXAMPLE.name
    measured.parent.mkdir(parents=True)
    shutil.copy(FIXTURE / "elementwise_add.py.measured", measured)
    args = export_args(run_copy, out, extra=["--measurement", str(measurement), "--interval", "load -> store"])
    for flag in ("--clean-source", "--instrumented-source"):
        args[args.index(flag) + 1] = str(measured)
    assert timeline(args) == 0
    receipt = json.loads((out / "receipt.json").read_text())
    assert receipt["backend"] == "iket"
    assert receipt["episcope"]["iket"]["kernel_name"].startswith("kernel_cutlass_add_kernel_")
    cubin = run_copy / "iket_output/tracker/pid_0x61f/cubin_335ebee7ee6c5b7e.cubin"
    identity = json.loads((out / receipt["binary"]).read_text())  # AKA's binary identity file
    assert identity["schema"] == "atrex-autonomous-binary-identity/v1"
    assert [b["sha256"] for b in identity["binaries"]] == [hashlib.sha256(cubin.read_bytes()).hexdigest()]
    assert receipt["episcope"]["measurement"]["verdict"] == "above_target"
    assert receipt["evidence_class"] == "exploration"  # exploration stage, correctness only self-declared
    summary = json.loads((out / "trace.summary.json").read_text())
    # AKA's IKeT counting: a range is one canonical event (2048 ranges + 1024 instants)
    assert summary["backend"] == "iket" and summary["canonical_events"] == 3072
    assert summary["event_count"] == {"load": 1024, "loaded": 1024, "store": 1024}
    assert summary["ranges"] == 2048 and summary["instants"] == 1024 and len(summary["physical_sms"]) == 128
    assert summary["matched_launches"] == 1 and summary["launches"][0]["launch_key"] == "iket_pid_0x63a.trace.json:0"
    assert validate_receipt(str(out / "receipt.json")) == []
    capture = capture_view(out / "receipt.json").capture  # what the console's timeline screen decodes
    assert capture.event_count == 5120
    assert len(set(capture.events["owner"])) == 1024  # one owner per warp observed
    assert read_timeline_receipt(out / "receipt.json").value.backend == "iket"


def test_validate_notices_an_edited_iket_trace(run_copy, tmp_path, capsys):
    out = tmp_path / "out"
    assert timeline(export_args(run_copy, out)) == 0
    with open(run_copy / TRACE, "a") as fh:
        fh.write(" ")
    reasons = validate_receipt(str(out / "receipt.json"))
    assert any("trace_json sha256 mismatch" in r for r in reasons)


def test_kernel_regex_must_fully_match_a_launch(run_copy, tmp_path, capsys):
    assert timeline(export_args(run_copy, tmp_path / "a", regex="add_kernel")) == 2
    assert "matches no launch" in rejection(capsys)
    assert timeline(export_args(run_copy, tmp_path / "b", regex="gemm_.*")) == 2
    assert "kernel_cutlass_add_kernel_" in rejection(capsys)  # the kernels seen are listed


def test_launch_picks_one_of_several_and_the_summary_lists_every_match(run_copy, tmp_path, capsys):
    # a second launch of the same kernel, told apart by its grid id
    edit_trace(run_copy, lambda t: t["launches"].append(dict(t["launches"][0], gridId=t["launches"][0]["gridId"] + 100)))
    assert timeline(export_args(run_copy, tmp_path / "a")) == 2
    assert "matches 2 launches; pass --launch" in rejection(capsys)
    out = tmp_path / "b"
    assert timeline(export_args(run_copy, out, extra=["--launch", "1"])) == 0
    summary = json.loads((out / "trace.summary.json").read_text())
    # AKA's meaning: every launch the regex matched, whichever one's events were exported
    assert summary["matched_launches"] == 2
    keys = ["iket_pid_0x63a.trace.json:0", "iket_pid_0x63a.trace.json:1"]
    assert [launch["launch_key"] for launch in summary["launches"]] == keys
    assert summary["launches"][1]["grid_id"] == summary["launches"][0]["grid_id"] + 100
    assert json.loads((out / "iket.manifest.json").read_text())["launches"] == summary["launches"]
    receipt = json.loads((out / "receipt.json").read_text())
    assert receipt["episcope"]["iket"]["launch"] == 1 and receipt["episcope"]["iket"]["launch_key"] == keys[1]
    assert json.loads((out / "iket.atrexlt1.manifest.json").read_text())["launch_id"] == summary["launches"][1]["grid_id"]
    assert validate_receipt(str(out / "receipt.json")) == []


def test_sm_id_of_1024_is_rejected(run_copy, tmp_path, capsys):
    edit_trace(run_copy, lambda t: t["locationTable"][5].update(smId=1024))
    assert timeline(export_args(run_copy, tmp_path / "out")) == 2
    assert "SM id 1024 not below 1024" in rejection(capsys)
    assert not (tmp_path / "out" / "receipt.json").exists()


def test_range_ending_before_it_starts_is_rejected(run_copy, tmp_path, capsys):
    def swap(trace):
        rng = trace["launches"][0]["ranges"][3]
        rng["startTs"], rng["endTs"] = rng["endTs"] + 64, rng["startTs"]
    edit_trace(run_copy, swap)
    assert timeline(export_args(run_copy, tmp_path / "out")) == 2
    assert "before it starts" in rejection(capsys)


def test_range_spanning_two_warps_and_cta_outside_grid_are_both_reported(run_copy, tmp_path, capsys):
    def change(trace):
        rng = trace["launches"][0]["ranges"][0]
        rng["warpLocIdxs"] = [rng["warpLocIdxs"][0], (rng["warpLocIdxs"][0] + 1) % 1024]
        trace["locationTable"][9]["ctaId"] = [128, 0, 0]
    edit_trace(run_copy, change)
    assert timeline(export_args(run_copy, tmp_path / "out")) == 2
    err = rejection(capsys)
    assert "spans several CTA/warp/SM locations" in err and "outside grid [128, 1, 1]" in err


def test_undeclared_and_missing_declared_events_are_rejected(run_copy, tmp_path, capsys):
    sites = json.loads(DICTIONARY.read_text())
    undeclared = dict(sites, sites=[s for s in sites["sites"] if s["name"] != "loaded"])
    path = tmp_path / "undeclared.json"
    path.write_text(json.dumps(undeclared))
    assert timeline(export_args(run_copy, tmp_path / "a", dictionary=path)) == 2
    assert "'loaded' (instant) is not in the event dictionary" in rejection(capsys)
    missing = dict(sites, sites=sites["sites"] + [{"site_id": 9, "name": "epilogue", "kind": "range"}])
    path.write_text(json.dumps(missing))
    assert timeline(export_args(run_copy, tmp_path / "b", dictionary=path)) == 2
    assert "declared event 'epilogue' (range) was never observed" in rejection(capsys)
    wrong = dict(sites, sites=[dict(s, kind="instant") if s["name"] == "load" else s for s in sites["sites"]])
    path.write_text(json.dumps(wrong))
    assert timeline(export_args(run_copy, tmp_path / "c", dictionary=path)) == 2
    assert "'load' is instant but was observed as range" in rejection(capsys)


def test_trace_edited_after_capture_is_rejected(run_copy, tmp_path, capsys):
    with open(run_copy / TRACE, "a") as fh:
        fh.write("\n")
    assert timeline(export_args(run_copy, tmp_path / "out")) == 2
    assert "sha256 differs from the capture record" in rejection(capsys)


def stand_in_profiler(tmp_path: Path, body: str) -> Path:
    """An executable taking run-iket's argv; ``body`` runs with $out = its --output-dir."""
    script = tmp_path / "run-iket"
    script.write_text(f"#!/bin/sh\nout=$2\nmkdir -p \"$out\"\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_capture_iket_keeps_logs_and_requires_nonempty_outputs(tmp_path, capsys):
    profiler = stand_in_profiler(tmp_path, 'echo profiled; : > "$out/x.pftrace"; echo "{}" > "$out/x.trace.json"')
    args = ["capture-iket", "--output-dir", str(tmp_path / "cap"), "--run-iket", str(profiler), "--",
            sys.executable, "-c", "pass"]
    assert timeline(args) == 2
    assert "no non-empty *.pftrace" in rejection(capsys)
    record = json.loads((tmp_path / "cap" / "attempt-001" / "capture.json").read_text())
    assert record["exit_code"] == 0 and record["accepted"] is False
    assert record["profiler"]["sha256"] == hashlib.sha256(profiler.read_bytes()).hexdigest()
    assert record["profiler_argv"][3:7] == ["profile", "--keep", "--postprocess", "all"]
    assert (tmp_path / "cap" / "attempt-001" / "profiler.stdout.log").read_text() == "profiled\n"
    failing = stand_in_profiler(tmp_path, "exit 3")
    assert timeline(args[:3] + ["--run-iket", str(failing)] + args[5:]) == 2
    assert "run-iket exited 3" in rejection(capsys)
    assert (tmp_path / "cap" / "attempt-002" / "capture.json").is_file()  # a fresh attempt each time


def test_profile_iket_captures_and_exports_in_one_go(tmp_path, capsys):
    profiler = stand_in_profiler(tmp_path, f'cp -r "{FIXTURE}/run/iket_output/." "$out/"')
    args = ["profile-iket", "--capture-dir", str(tmp_path / "cap"), "--run-iket", str(profiler),
            "--kernel-regex", KERNEL, "--dictionary", str(DICTIONARY), "--clean-source", str(EXAMPLE),
            "--instrumented-source", str(EXAMPLE), "--workload-identity", IDENTITY,
            "--output-dir", str(tmp_path / "out"), "--", sys.executable, str(EXAMPLE)]
    assert timeline(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["run_dir"].endswith("attempt-001")
    assert validate_receipt(str(tmp_path / "out" / "receipt.json")) == []
