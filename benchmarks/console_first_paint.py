"""First paint of the console on the bundled example, against a minimal Textual app.

Each program is started as an operator starts it: a fresh process on a pseudo-terminal of
80x24. The clock runs from spawning the process until the pty shows

- for the minimal app (one ``Static`` widget): its text, i.e. Textual's own start-up;
- for the console (``episcope watch --no-record`` on examples/episodes/row_softmax-h200.tar.gz,
  already unpacked once, as on every open after the first): its first frame (the mode label
  in the header) and the first data of the episode (the incumbent's latency in the header,
  drawn once the files are scanned; the git facts follow).

Each moment is taken on two clocks: wall time (what the operator waits) and the CPU time the
process had used by then (the work done, which other load on the machine does not inflate).
Runs alternate between the programs so that both see the same machine; the medians and
their ratios within this one run are printed as one JSON object, beside the median of the
paired ratios (each console start against the minimal start just before it), which a machine
whose speed drifts during the run moves less. Every process is asked to
quit (and killed if it does not) before the next starts.

Both programs start from compiled bytecode, as an installed program does (pip compiles
Textual and episcope on install): the bytecode cache is a temporary directory of its own
(``PYTHONPYCACHEPREFIX``, so nothing is written into the source tree, and a
``PYTHONDONTWRITEBYTECODE`` in the caller's environment would otherwise have the console's
own modules compiled from source on every start while Textual's come precompiled), and each
program is started once, unmeasured, to fill it.

    python benchmarks/console_first_paint.py [--runs 11]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHIVE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"
MINIMAL = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Minimal(App):\n"
    "    def compose(self):\n"
    "        yield Static('minimal-app-painted')\n"
    "Minimal().run()\n"
)
ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]")
TIMEOUT_S = 60.0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) the process has used so far."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_start(argv: list[str], markers: list[bytes], quit_key: bytes,
                env: dict[str, str]) -> list[tuple[float, float]]:
    """(wall seconds from spawning ``argv`` on an 80x24 pty, CPU seconds the process had
    used) when each marker first shows. The CPU time is the work done, whatever else the
    machine runs; the wall time is what the operator waits."""
    leader, follower = pty.openpty()
    os.set_blocking(leader, False)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env, cwd=ROOT,
                               start_new_session=True)
    os.close(follower)
    seen: dict[bytes, tuple[float, float]] = {}
    screen = b""
    try:
        while len(seen) < len(markers):
            if time.perf_counter() - start > TIMEOUT_S:
                raise RuntimeError(f"{argv[-1]}: no {[m for m in markers if m not in seen]} within {TIMEOUT_S}s")
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 1 << 16)
            except BlockingIOError:
                continue
            now = time.perf_counter()
            screen += chunk
            text = ESCAPES.sub(b"", screen)
            for marker in markers:
                if marker not in seen and marker in text:
                    seen[marker] = (now - start, cpu_seconds(process.pid))
        os.write(leader, quit_key)
        _drain_until_exit(leader, process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        os.close(leader)
    return [seen[marker] for marker in markers]


def _drain_until_exit(leader: int, process: subprocess.Popen, wait_s: float = 10.0) -> None:
    """Keep reading the pty (a full pty would block the app's last writes) until it exits."""
    deadline = time.monotonic() + wait_s
    while process.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                os.read(leader, 1 << 16)
            except (BlockingIOError, OSError):
                pass


# The example's incumbent latency, drawn in the header once the scanned files are on screen.
FIRST_DATA = b"17.617"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as bytecode:
        env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONPYCACHEPREFIX": bytecode, "TERM": "xterm-256color",
               "COLUMNS": "80", "LINES": "24"}
        env.pop("TEXTUAL_DRIVER", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        console = [sys.executable, "-m", "console.cli", "watch", "--no-record", str(ARCHIVE)]
        minimal = [sys.executable, "-c", MINIMAL]
        # One unmeasured start of each fills the bytecode cache; the console's also unpacks
        # the archive into the cache, where the measured opens find it.
        timed_start(minimal, [b"minimal-app-painted"], b"\x11", env)
        timed_start(console, [b"READ-ONLY", FIRST_DATA], b"q", env)
        minimal_runs, paint_runs, data_runs = [], [], []
        for _ in range(args.runs):
            minimal_runs += timed_start(minimal, [b"minimal-app-painted"], b"\x11", env)
            paint, data = timed_start(console, [b"READ-ONLY", FIRST_DATA], b"q", env)
            paint_runs.append(paint)
            data_runs.append(data)
    result = {"benchmark": "console_first_paint", "terminal": "80x24 pty", "runs": args.runs}
    for clock, index in (("wall", 0), ("cpu", 1)):
        base = statistics.median(run[index] for run in minimal_runs)
        paint = statistics.median(run[index] for run in paint_runs)
        data = statistics.median(run[index] for run in data_runs)
        result[clock] = {
            "minimal_textual_first_paint_ms_median": round(base * 1000, 1),
            "console_first_paint_ms_median": round(paint * 1000, 1),
            "console_first_data_ms_median": round(data * 1000, 1),
            "first_paint_ratio": round(paint / base, 3),
            "first_data_ratio": round(data / base, 3),
            "paired_first_paint_ratio_median": round(statistics.median(
                p[index] / m[index] for p, m in zip(paint_runs, minimal_runs, strict=True)), 3),
            "paired_first_data_ratio_median": round(statistics.median(
                d[index] / m[index] for d, m in zip(data_runs, minimal_runs, strict=True)), 3),
            "samples_ms": {name: [round(run[index] * 1000, 1) for run in runs] for name, runs in
                           (("minimal", minimal_runs), ("first_paint", paint_runs), ("first_data", data_runs))},
        }
    result["targets"] = {"first_paint_ratio": 1.5, "first_data_ratio": 2.0}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
