"""tools/iteration_trace.py, run as the agent runs it: a separate process, without orjson."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.telemetry import parse_telemetry_line

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "iteration_trace.py"
# Runs the tool as a script with orjson made unimportable (the GPU machine has none).
NO_ORJSON = "import runpy, sys; sys.modules['orjson'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
COMMON = {
    "schema_version",
    "campaign_id",
    "iteration_id",
    "attempt_id",
    "event",
    "timestamp",
    "monotonic_seconds",
    "source",
    "measurement",
}


def trace(tmp_path: Path, *args: str, traced: bool = True, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATREX_TELEMETRY_") and k != "PYTHONPATH"}
    if traced:
        env["ATREX_TELEMETRY_TRACE"] = str(tmp_path / "telemetry.jsonl")
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-c", NO_ORJSON, str(TOOL), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )


def lines(tmp_path: Path) -> list[dict]:
    path = tmp_path / "telemetry.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_phase_markers_field_for_field_with_receipt(tmp_path):
    ids = {"ATREX_TELEMETRY_CAMPAIGN_ID": "camp", "ATREX_TELEMETRY_ITERATION_ID": "episode-0003", "ATREX_TELEMETRY_ATTEMPT_ID": "invocation-2"}
    start = trace(tmp_path, "phase-start", "profile", **ids)
    end = trace(tmp_path, "phase-end", "profile", **ids)
    assert start.returncode == 0 and end.returncode == 0, start.stderr + end.stderr
    records = lines(tmp_path)
    assert [r["event"] for r in records] == ["phase_started", "phase_completed"]
    for record, action, proc in zip(records, ("start", "end"), (start, end)):
        assert set(record) == COMMON | {"phase", "action", "marker_id"}
        assert record["schema_version"] == "atrex_iteration_event_v1"
        assert (record["campaign_id"], record["iteration_id"], record["attempt_id"]) == ("camp", "episode-0003", "invocation-2")
        assert (record["source"], record["measurement"], record["phase"], record["action"]) == ("agent_marker", "explicit", "profile", action)
        assert len(record["marker_id"]) == 32 and int(record["marker_id"], 16) >= 0
        assert record["timestamp"].endswith("+00:00")
        assert isinstance(record["monotonic_seconds"], float)
        receipt = {"action": action, "kind": "phase_marker", "marker_id": record["marker_id"], "phase": "profile", "schema": "atrex.iteration_trace.v1"}
        # AKA's writer prints json.dumps(..., ensure_ascii=False, sort_keys=True): its separators too.
        expected = "ATREX_TRACE_EVENT=" + json.dumps(receipt, ensure_ascii=False, sort_keys=True)
        assert proc.stdout.splitlines() == [expected]
    assert records[0]["monotonic_seconds"] < records[1]["monotonic_seconds"]
    raw = (tmp_path / "telemetry.jsonl").read_bytes().splitlines()
    for line in raw:
        assert line == json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True).encode()
        assert parse_telemetry_line(line).phase == "profile"


def test_source_read_defaults_and_url_cleaning(tmp_path):
    assert trace(tmp_path, "source-read", "workspace", "profiles/episode_1/summary.txt").returncode == 0
    web = trace(tmp_path, "source-read", "public_web", "HTTPS://docs.example.com:8443/cuda/guide.html?token=abc#sec")
    assert web.returncode == 0 and web.stdout == ""
    first, second = lines(tmp_path)
    assert set(first) == COMMON | {"source_kind", "reference"}
    assert (first["campaign_id"], first["iteration_id"], first["attempt_id"]) == ("campaign", "unknown", "attempt")
    assert (first["event"], first["source_kind"], first["reference"]) == ("source_read", "workspace", "profiles/episode_1/summary.txt")
    assert second["reference"] == "https://docs.example.com:8443/cuda/guide.html"


def test_untraced_writes_nothing(tmp_path):
    proc = trace(tmp_path, "phase-start", "research", traced=False)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr == "iteration_trace: ATREX_TELEMETRY_TRACE is not set; nothing recorded\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ("source-read", "workspace", "/etc/passwd"),
        ("source-read", "workspace", "../other/kernel.py"),
        ("source-read", "gpu_wiki", "notes/../../secret"),
        ("source-read", "public_web", "https://user:pw@example.com/page"),
        ("source-read", "public_web", "ftp://example.com/file"),
        ("source-read", "public_web", "file:///etc/passwd"),
        ("source-read", "public_web", "docs/readme.md"),
        ("source-read", "workspace", "a" * 501),
        ("source-read", "workspace", "line\nbreak"),
        ("source-read", "twitter", "x"),
        ("phase-start", "lunch"),
        ("phase-start",),
    ],
)
def test_unsafe_or_bad_input_is_refused(tmp_path, args):
    proc = trace(tmp_path, *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("iteration_trace: ")
    assert proc.stdout == "" and lines(tmp_path) == []


def test_direct_script_run_from_a_workspace(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ATREX_TELEMETRY_TRACE"] = "telemetry.jsonl"
    proc = subprocess.run([sys.executable, str(TOOL), "phase-start", "planning"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout.startswith("ATREX_TRACE_EVENT=")
    assert lines(tmp_path)[0]["phase"] == "planning"


WRITER = """
import sys
sys.modules["orjson"] = None
sys.path.insert(0, sys.argv[1])
import iteration_trace
for i in range(200):
    # Long references (lines of about 800 bytes) make a torn or interleaved write show.
    assert iteration_trace.main(["source-read", "workspace", f"w{sys.argv[2]}/{i:03d}/" + "x" * 480]) == 0
"""


def test_concurrent_writers_never_tear_a_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ATREX_TELEMETRY_TRACE"] = str(tmp_path / "telemetry.jsonl")
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(TOOL.parent), str(n)], env=env, cwd=tmp_path)
        for n in range(8)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0] * 8
    data = (tmp_path / "telemetry.jsonl").read_bytes()
    assert data.endswith(b"\n")
    seen = set()
    for line in data.splitlines():
        record = parse_telemetry_line(line)
        seen.add(record.reference[:6])
    assert len(data.splitlines()) == 1600
    assert seen == {f"w{n}/{i:03d}" for n in range(8) for i in range(200)}
