"""A timeline receipt (or a capture's evidence) naming ``/dev/zero`` or a FIFO freezes
nothing (issue 17): ``timeline.py validate``, ``timeline.py capture``, ``episcope status``
and the timeline screen's loader each answer at once, with a one-line reason where they
refuse.

Every case runs on a real capture (the H200 fixtures) in a temporary workspace, through
the real command lines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.timeline.capture_view import TimelineLoadError, capture_view
from console.timeline.receipt import write_capture

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "timeline"
SCRIPT = REPO / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
PROMPT = 5.0  # seconds: a reader stuck on a FIFO or /dev/zero never answers at all


def run(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    # The timeout only keeps a frozen reader from hanging the suite; PROMPT is the check.
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with one real capture whose receipt names /dev/zero and a FIFO."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("capture_ok.bin", "capture_ok.manifest.json", "fixture.events.json", "fixture_kernel.cu"):
        shutil.copy(FIXTURES / name, ws / name)
    shutil.copy(FIXTURES / "fixture_kernel.instrumented.cu", ws / "kernel.py")
    write_capture(raw=str(ws / "capture_ok.bin"), manifest=str(ws / "capture_ok.manifest.json"),
                  dictionary=str(ws / "fixture.events.json"), clean_source=str(ws / "fixture_kernel.cu"),
                  instrumented_source=str(ws / "kernel.py"), binary=None, workload_identity="shape=1024",
                  output_dir=str(ws / "timeline"))
    os.mkfifo(ws / "events.fifo")  # no writer ever opens it
    receipt_path = ws / "timeline" / "receipt.json"
    receipt = json.loads(receipt_path.read_text())
    receipt.update(raw="/dev/zero", manifest="/dev/zero", event_dictionary="../events.fifo",
                   summary="../events.fifo")
    receipt_path.write_text(json.dumps(receipt))
    return ws


def test_validate_refuses_at_once_in_one_line(workspace):
    done, took = run(str(SCRIPT), "validate", str(workspace / "timeline" / "receipt.json"))
    assert took < PROMPT
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("timeline: ") and done.stderr.count("\n") == 1, done.stderr
    assert "raw" in done.stderr and "/dev/zero" in done.stderr and "event_dictionary" in done.stderr


def test_status_answers_at_once_and_keeps_the_receipt(workspace):
    done, took = run("-m", "console.cli", "status", "--json", str(workspace))
    assert took < PROMPT
    assert done.returncode == 0, done.stderr
    timeline = json.loads(done.stdout)["timeline"]
    assert [t["path"] for t in timeline] == [str(workspace / "timeline" / "receipt.json")]


def test_the_timeline_loader_refuses_at_once_in_one_line(workspace):
    receipt = workspace / "timeline" / "receipt.json"
    started = time.monotonic()
    with pytest.raises(TimelineLoadError) as refused:
        capture_view(receipt)
    assert time.monotonic() - started < PROMPT
    assert "\n" not in str(refused.value) and "device" in str(refused.value)
    receipt.write_text(json.dumps({**json.loads(receipt.read_text()), "raw": "../capture_ok.bin"}))
    with pytest.raises(TimelineLoadError) as refused:
        capture_view(receipt)  # the raw buffer is fine now; the manifest still is /dev/zero
    assert "\n" not in str(refused.value) and "device" in str(refused.value)


@pytest.mark.parametrize("evidence", ["/dev/zero", "events.fifo"])
def test_capture_refuses_evidence_that_is_not_a_file_at_once(workspace, evidence):
    named = evidence if evidence.startswith("/") else str(workspace / evidence)
    done, took = run(str(SCRIPT), "capture", "--raw", str(workspace / "capture_ok.bin"),
                     "--manifest", str(workspace / "capture_ok.manifest.json"),
                     "--dictionary", str(workspace / "fixture.events.json"),
                     "--clean-source", str(workspace / "fixture_kernel.cu"),
                     "--instrumented-source", str(workspace / "kernel.py"), "--workload-identity", "w",
                     "--correctness-evidence", named, "--output-dir", str(workspace / "again"))
    assert took < PROMPT
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"timeline: correctness evidence {named}: not a regular file")
    assert done.stderr.count("\n") == 1
    assert not (workspace / "again" / "receipt.json").exists()
