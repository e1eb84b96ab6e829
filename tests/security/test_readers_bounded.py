"""Readers are total and bounded (issue 17): one pathological line or document costs only
itself, and a path that is not a regular file is refused without blocking.

Every case runs the real ``episcope`` on a real workspace in a temporary directory.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.formats.timeline import read_timeline_receipt

REPO = Path(__file__).resolve().parents[2]
RUNTIME = ".atrex_long_horizon"

# A line nested 1,100 levels deep (about 2 KB), a float no double holds, and an integer of
# 5,000 digits: each must become one unreadable entry at its offset.
DEEP = "[" * 1100 + "]" * 1100
HUGE_FLOAT = "1e999999"
HUGE_INT = "9" * 5000
PAYLOADS = {"deep": DEEP, "huge_float": HUGE_FLOAT, "huge_int": HUGE_INT}

DOCUMENTS = (
    f"{RUNTIME}/state.json",
    f"{RUNTIME}/active_episode.json",
    f"{RUNTIME}/journal.json",
    f"{RUNTIME}/handoff.json",
    f"{RUNTIME}/episodes/e0001/attempt.json",
    f"{RUNTIME}/episodes/e0001/telemetry.summary.json",
    f"{RUNTIME}/sandbox/20260101T000000Z-abcdef/job.json",
    "memory/live.json",
    "memory/v1.json",
    "verification_artifacts/.atrex_long_horizon_verify/u1/result.json",
    "timeline/receipt.json",
    "timeline/overhead_measurement.json",
    "profiles/episode_1/gateway_profile.json",
)


def telemetry(mono: float) -> dict:
    return {"schema_version": "atrex_iteration_event_v1", "campaign_id": "demo", "iteration_id": "episode-0001",
            "attempt_id": "invocation-1", "event": "source_read", "timestamp": "2026-11-29T06:00:00+00:00",
            "monotonic_seconds": mono, "source": "agent_marker", "measurement": "explicit",
            "source_kind": "workspace", "reference": f"notes/{mono}.md"}


def evaluation(latency: float) -> dict:
    return {"schema_version": 2, "timestamp": "2026-11-29T06:00:00+00:00", "gateway_kind": "run", "job_id": "j1",
            "kernel_sha256": "a" * 64, "result": {"all_pass": True, "failures": [], "latency_us_geomean": latency}}


def abba_run(repeat: int) -> dict:
    return {"revision": "incumbent", "repeat": repeat, "exit_code": 0,
            "result": {"all_pass": True, "failures": [], "latency_us_geomean": 10.0}}


def measure_run(ordinal: int) -> dict:
    return {"schema": "atrex-autonomous-timeline-measure-run/v1", "event": "run", "block": 0, "ordinal": ordinal,
            "variant": "baseline", "latency_ms": 1.5}


# line file -> (event kind, a good record builder, the numeric field a bad line spoils)
LINE_FILES = {
    f"{RUNTIME}/telemetry.jsonl": ("telemetry", telemetry, "monotonic_seconds"),
    f"{RUNTIME}/evaluations.jsonl": ("evaluation", evaluation, None),
    "verification_artifacts/.atrex_long_horizon_verify/u1/runs.jsonl": ("abba_run", abba_run, "repeat"),
    "timeline/overhead.runs.jsonl": ("measure_run", measure_run, "ordinal"),
}


def bad_line(good: dict, field: str | None, payload: str) -> str:
    """``good`` with one value replaced by ``payload`` (for evaluations, inside ``result``)."""
    text = json.dumps(dict(good, **({field: "@"} if field else {"result": {"all_pass": True, "latency_us_geomean": "@"}})))
    return text.replace('"@"', payload)


def make_workspace(root: Path, payload: str) -> dict[str, list[int]]:
    """A workspace whose every document holds ``payload`` and whose every line file holds
    good, bad, good lines; returns the byte offset of each bad line, by file."""
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "v0.json").write_text(json.dumps({"version": "v0", "performance": {"latency_us_geomean": 100.0}}))
    for rel in DOCUMENTS:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'{{"episode": {payload}, "kernels": [], "runs": [], "gate": "PASS"}}')
    offsets: dict[str, list[int]] = {}
    for rel, (_, good, field) in LINE_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        # The payload once where a value of the record goes, once under a key no reader knows.
        lines = [json.dumps(good(1)), bad_line(good(2), field, payload), bad_line(good(3), "unknown_key", payload),
                 json.dumps(good(4))]
        path.write_text("".join(line + "\n" for line in lines))
        offsets[str(path)] = [len(lines[0]) + 1, len(lines[0]) + len(lines[1]) + 2]
    return offsets


def episcope(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_status_reports_each_bad_record_and_keeps_the_rest(tmp_path, payload):
    ws = tmp_path / "ws"
    bad_offsets = make_workspace(ws, payload)
    status = episcope("status", "--json", str(ws))
    assert status.returncode == 0, status.stderr
    unreadable = {(u["path"], u["offset"]) for u in json.loads(status.stdout)["unreadable"]}
    for rel in DOCUMENTS:
        path = str(ws / rel)
        if rel.startswith("profiles/"):
            path = str((ws / rel).parent / "gateway_profile.json")
        assert (path, None) in unreadable, rel
    events = episcope("events", str(ws))
    assert events.returncode == 0, events.stderr
    seen = [json.loads(line) for line in events.stdout.splitlines()]
    for rel, (kind, _, _) in LINE_FILES.items():
        path = str(ws / rel)
        at = {}
        for e in seen:
            if e["path"] == path and e["kind"] in (kind, "unreadable"):
                at.setdefault(e["offset"], []).append(e["kind"])
        known, unknown = bad_offsets[path]
        # The payload in a value the reader checks: unreadable at its offset, in status too.
        assert at.pop(known) == ["unreadable"] and (path, known) in unreadable, rel
        # Under a key no reader uses, a reader may skip the value unchecked (msgspec does):
        # the line is then a record; either way it is one event at its offset.
        assert len(at.pop(unknown)) == 1, rel
        # The good lines around them are kept.
        assert list(at.values()) == [[kind], [kind]], (rel, at)
    assert any(e["kind"] == "memory_version" for e in seen)


def test_events_follow_goes_on_after_a_pathological_line(tmp_path):
    ws = tmp_path / "ws"
    path = ws / RUNTIME / "telemetry.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(telemetry(1.0)) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "events", str(ws), "--follow"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["kind"] == "telemetry"
        time.sleep(0.5)
        size = path.stat().st_size
        bad = [bad_line(telemetry(2.0), "monotonic_seconds", p) for p in PAYLOADS.values()]
        with open(path, "a") as fh:
            fh.write("".join(line + "\n" for line in bad))
        # A FIFO and a link to /dev/zero under an artifact's name appear mid-follow.
        os.mkfifo(ws / "receipt.json")
        (ws / "timeline").mkdir()
        os.symlink("/dev/zero", ws / "timeline" / "receipt.json")
        time.sleep(0.5)
        with open(path, "a") as fh:
            fh.write(json.dumps(telemetry(3.0)) + "\n")
        seen = []
        while not any(e["kind"] == "telemetry" and e["data"]["monotonic_seconds"] == 3.0 for e in seen):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.poll() is not None else "follow stopped printing"
            seen.append(json.loads(line))
        offsets = [e["offset"] for e in seen if e["kind"] == "unreadable" and e["path"] == str(path)]
        expected = [size]
        for line in bad[:-1]:
            expected.append(expected[-1] + len(line) + 1)
        assert offsets == expected
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_receipt_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo" / "receipt.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    device = tmp_path / "device" / "receipt.json"
    device.parent.mkdir()
    os.symlink("/dev/zero", device)
    huge = tmp_path / "huge" / "receipt.json"
    huge.parent.mkdir()
    with open(huge, "wb") as fh:
        fh.truncate(65 << 20)  # sparse: larger than any document, costs no disk
    started = time.monotonic()
    for path, why in ((fifo, "FIFO"), (device, "device"), (huge, "bytes")):
        result = read_timeline_receipt(path)
        assert result.value is None and why in result.problems[0].error, result.problems
    assert time.monotonic() - started < 2.0


def test_status_returns_promptly_with_receipts_naming_dev_zero_and_a_fifo(tmp_path):
    ws = tmp_path / "ws"
    (ws / "timeline").mkdir(parents=True)
    (ws / "memory").mkdir()
    os.mkfifo(ws / "timeline" / "trace.fifo")
    receipt = {"schema": "atrex-autonomous-timeline-receipt/v1", "backend": "cuda", "trace": "/dev/zero",
               "summary": str(ws / "timeline" / "trace.fifo"), "measurement": "/dev/zero"}
    (ws / "timeline" / "receipt.json").write_text(json.dumps(receipt))
    os.mkfifo(ws / "receipt.json")
    (ws / "linked").mkdir()
    os.symlink("/dev/zero", ws / "linked" / "receipt.json")
    started = time.monotonic()
    status = episcope("status", "--json", str(ws), timeout=30)
    assert status.returncode == 0, status.stderr
    assert time.monotonic() - started < 30
    document = json.loads(status.stdout)
    assert all(u["path"] != str(ws / "timeline" / "receipt.json") for u in document["unreadable"])


def test_events_follow_survives_a_fifo_named_like_a_line_file(tmp_path):
    ws = tmp_path / "ws"
    path = ws / RUNTIME / "telemetry.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(telemetry(1.0)) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "events", str(ws), "--follow", "--kind", "telemetry"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["data"]["monotonic_seconds"] == 1.0
        time.sleep(0.5)
        os.mkfifo(ws / RUNTIME / "evaluations.jsonl")  # no writer ever opens it
        time.sleep(0.5)
        with open(path, "a") as fh:
            fh.write(json.dumps(telemetry(2.0)) + "\n")
        # Read with a deadline: a follower blocked on the FIFO would never print this.
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
        line = lines.get(timeout=20)
        assert json.loads(line)["data"]["monotonic_seconds"] == 2.0
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
