"""A job's output cannot exhaust its sandbox: logs are cut, output trees are bounded.

A log flood keeps the head and the tail of each stream with a marker line between them (the
verdict is still read from the whole stream); an output tree deeper than any real profile
directory, or larger than the output limits, is refused piece by piece without crashing
the sandbox or leaving its staged copy behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.job_record import list_job_records
from console.jobs.staging import MAX_OUTPUT_FILES, MAX_TREE_DEPTH

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "sandbox.py"
PY = sys.executable
MB = 1024 * 1024

# Stdout: a head line, a 40 MB flood, a verdict and a tail line; stderr a 3 MB flood.
FLOOD = r'''
import json, sys
out = sys.stdout.buffer
out.write(b"HEAD-OF-STDOUT\n")
block = b"x" * 1023 + b"\n"
for _ in range(40 * 1024):
    out.write(block)
result = {"all_pass": True, "failures": [], "latency_us_geomean": 1.0, "latency_us_by_shape": {"s0": 1.0}}
out.write(b"[test_kernel] RESULT_JSON=" + json.dumps(result).encode() + b"\n")
out.write(b"TAIL-OF-STDOUT\n")
out.flush()
sys.stderr.buffer.write(b"e" * (3 * 1024 * 1024) + b"\nTAIL-OF-STDERR\n")
'''

DEEP = r'''
import os, sys
depth, width = int(sys.argv[1]), int(sys.argv[2])
os.makedirs("profiles", exist_ok=True)
os.chdir("profiles")
with open("summary.txt", "w") as fh:
    fh.write("kept\n")
fd = os.open(".", os.O_RDONLY)
for level in range(depth):  # one level at a time: the whole path would pass PATH_MAX
    os.mkdir("d", dir_fd=fd)
    below = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = below
os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
os.makedirs("wide", exist_ok=True)
for index in range(width):
    with open(f"wide/{index:05d}.txt", "w") as fh:
        fh.write("w")
print("tree made", flush=True)
'''


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "EPISCOPE_", "PROFILE_")) and k != "PYTHONPATH"}
    env.update(extra)
    return env


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".atrex_long_horizon").mkdir(parents=True)
    (root / "kernel.py").write_text("KERNEL = 1\n")
    (root / "test_kernel.py").write_text(FLOOD)
    (root / "deep.py").write_text(DEEP)
    return root


def test_a_log_flood_keeps_head_tail_and_verdict_within_the_limit(ws):
    proc = subprocess.run([PY, str(TOOL), "--max-log-mb", "1", "--", PY, "test_kernel.py"], cwd=ws, env=clean_env(),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]  # the verdict, found past the limit
    (record,) = list_job_records(ws)[0]
    assert record.state == "succeeded"
    job = ws / ".atrex_long_horizon" / "sandbox" / record.job_id
    stdout_log, stderr_log = (job / "stdout.log").read_bytes(), (job / "stderr.log").read_bytes()
    for log, tail in ((stdout_log, b"TAIL-OF-STDOUT\n"), (stderr_log, b"TAIL-OF-STDERR\n")):
        assert MB - 1024 < len(log) <= MB + 200
        assert log.endswith(tail) and log.count(b"bytes left out here (log limit)") == 1
    assert stdout_log.startswith(b"HEAD-OF-STDOUT\n")
    # What the sandbox echoes is what it keeps: the caller's pipe gets no flood either.
    assert len(proc.stdout) <= MB + 200 and proc.stdout.endswith(b"TAIL-OF-STDOUT\n")
    evaluations = (ws / ".atrex_long_horizon" / "evaluations.jsonl").read_text().splitlines()
    assert json.loads(evaluations[0])["job_id"] == record.job_id


def test_a_1100_deep_and_wide_output_tree_is_refused_without_a_crash(ws):
    width = MAX_OUTPUT_FILES + 5
    proc = subprocess.run([PY, str(TOOL), "--", PY, "deep.py", "1100", str(width)], cwd=ws, env=clean_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "tree made" in proc.stdout
    (record,) = list_job_records(ws)[0]
    assert record.state == "succeeded" and not Path(record.raw["stage"]).exists()
    reasons = [r["reason"] for r in record.refused]
    assert any(f"deeper than {MAX_TREE_DEPTH} directories" in r for r in reasons)
    assert any("over the output limit" in r for r in reasons)
    assert len(record.synced) == MAX_OUTPUT_FILES
    assert (ws / "profiles" / "summary.txt").read_text() == "kept\n"
    deepest = max(len(Path(p).relative_to(ws).parts) for p, _, _ in os.walk(ws / "profiles"))
    assert deepest <= MAX_TREE_DEPTH
