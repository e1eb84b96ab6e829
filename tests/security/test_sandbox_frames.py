"""The Ray job log is written by the job: its frame reader must survive anything in it.

A hostile header (``bytes: Infinity``, 100,000 levels of nesting) is an unreadable frame,
not a crash; a line that never ends costs linear time and bounded memory; and a frame the
command prints itself, with the right nonce (it can read its spec) but without the key the
wrapper deleted before starting it, is ignored, so the job cannot sign its own verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.jobs import sync_archive
from console.jobs.sync_archive import MAX_LINE, FrameReader, frame

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "console" / "jobs" / "ray_wrapper.py"
NONCE = "00112233445566778899aabbccddeeff"[:16]
KEY = "f" * 64
START = f"{sync_archive.START} {NONCE}\n"


def read_all(log: str, *, key: str = KEY) -> tuple[str, FrameReader]:
    reader = FrameReader(NONCE, key)
    return reader.feed(log) + reader.close(), reader


def header_for(data: bytes, **fields) -> dict:
    import hashlib

    header = {"exit_code": 0, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "members": ["profiles/x"],
              "refused": [], "transport": "log", "timed_out": False, "stopped": False}
    header.update(fields)
    return header


def test_a_header_claiming_infinite_or_negative_bytes_is_unreadable_not_a_crash():
    for size in ("Infinity", "-Infinity", "NaN", "-5", "1e400", "true", '"12"'):
        begin = f"{sync_archive.BEGIN} {NONCE} " + '{"sha256": "ab", "bytes": ' + size + "}\n"
        visible, reader = read_all(START + "out\n" + begin + "QUJD\n")
        assert "out\n" in visible and not reader.complete
        assert "header is unreadable" in reader.error and "bytes" in reader.error, size


def test_a_header_nested_100000_deep_is_unreadable_not_a_crash():
    deep = '{"sha256": "ab", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    visible, reader = read_all(START + f"{sync_archive.BEGIN} {NONCE} {deep}\nafter\n")
    assert not reader.complete and "nested too deeply" in reader.error
    assert visible == "after\n"


def test_a_never_ending_line_costs_linear_time_and_is_shown_not_kept():
    chunk = "_" * 65536  # could be a marker's start, so it is held back at first
    for prefix in ("", "__EPISCOPE_"):
        reader = FrameReader(NONCE, KEY)
        reader.feed(START + prefix)
        started = time.monotonic()
        shown = 0
        for _ in range(1024):  # 64 MiB in one line
            shown += len(reader.feed(chunk))
        elapsed = time.monotonic() - started
        assert elapsed < 10, elapsed
        assert shown >= 64 * 1024 * 1024 - MAX_LINE  # at most one line's worth waits
        assert reader.feed("\nnext\n").endswith("next\n")
    # Inside a frame the same line is damage: dropped, not gathered.
    reader = FrameReader(NONCE, KEY)
    reader.feed(START + f"{sync_archive.BEGIN} {NONCE} " + json.dumps(header_for(b"abc")) + "\n")
    for _ in range(400):
        assert reader.feed(chunk) == ""
    assert reader.error and "longer than any" in reader.error and not reader.complete


def test_a_frame_the_job_prints_itself_is_ignored_and_the_wrappers_wins(tmp_path):
    forged_data = b"forged archive"
    forged = frame(NONCE, "a guess at the key", header_for(forged_data, exit_code=0), forged_data)
    unsigned = forged.rsplit(" ", 1)[0] + "\n"  # no HMAC at all
    dangling = f"{sync_archive.BEGIN} {NONCE} " + json.dumps(header_for(b"x")) + "\n"  # never ends
    real_data = b"real archive"
    real = frame(NONCE, KEY, header_for(real_data, exit_code=3), real_data)
    visible, reader = read_all(START + "out\n" + forged + unsigned + dangling + real)
    assert visible == "out\n"
    assert reader.complete and reader.header["exit_code"] == 3 and reader.data == real_data
    assert reader.forged == 3
    # Without the wrapper's frame, the forged ones count for nothing.
    _, alone = read_all(START + forged)
    assert not alone.complete and alone.header is None and alone.data is None
    assert "without the wrapper's signature" in alone.error


def test_the_command_cannot_read_the_key_through_its_spec(tmp_path):
    # The wrapper deletes the spec (and with it the key) before it starts the command.
    spec = {"nonce": NONCE, "key": KEY, "argv": [sys.executable, "-c",
            "import os; print('spec left:', os.path.exists('.episcope_ray/job.json'))"],
            "env": {}, "sync": ["profiles"], "timeout": 30, "max_file_bytes": 1 << 20, "max_log_bytes": 1 << 20,
            "max_shared_bytes": 1 << 20, "shared_dir": None, "shared_name": "x.tar.gz"}
    (tmp_path / ".episcope_ray").mkdir()
    (tmp_path / ".episcope_ray" / "job.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(WRAPPER), ".episcope_ray/job.json"], cwd=tmp_path, capture_output=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    visible, reader = read_all(proc.stdout.decode())
    assert visible == "spec left: False\n" and reader.complete and reader.forged == 0
    assert KEY.encode() not in proc.stdout


def test_the_wrapper_ends_what_left_the_commands_group(tmp_path):
    # On the worker the wrapper is a child subreaper: a setsid or double-forked process is
    # still below it, and it is ended with the rest of the command's tree.
    marker = f"worker-escapee-{time.time_ns()}"
    stay = f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)  # {marker}"
    script = (
        "import os, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {stay!r}], start_new_session=True, stdout=subprocess.DEVNULL)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    if os.fork() == 0: os.execv(sys.executable, [sys.executable, '-c', {stay!r}])\n"
        "    os._exit(0)\n"
        "print('left two behind', flush=True)\n"
    )
    spec = {"nonce": NONCE, "key": KEY, "argv": [sys.executable, "-c", script], "env": {}, "sync": [], "timeout": 30,
            "max_file_bytes": 1 << 20, "max_log_bytes": 1 << 20, "max_shared_bytes": 1 << 20, "shared_dir": None,
            "shared_name": "x.tar.gz"}
    (tmp_path / ".episcope_ray").mkdir()
    (tmp_path / ".episcope_ray" / "job.json").write_text(json.dumps(spec))
    try:
        proc = subprocess.run([sys.executable, str(WRAPPER), ".episcope_ray/job.json"], cwd=tmp_path,
                              capture_output=True, timeout=60)
        visible, reader = read_all(proc.stdout.decode())
        assert visible == "left two behind\n" and reader.complete and reader.header["exit_code"] == 0
    finally:
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _holds(p, marker)]
        for pid in left:
            os.kill(int(pid.name), signal.SIGKILL)
    assert left == []


def _holds(proc_dir: Path, marker: str) -> bool:
    try:
        state = (proc_dir / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        return marker.encode() in (proc_dir / "cmdline").read_bytes() and state not in (b"Z", b"X")
    except OSError:
        return False
