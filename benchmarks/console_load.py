"""Console under load: 100 telemetry events/s arriving while an operator presses keys.

Drives the real console headless (``App.run_test``) on a real episode workspace that a
separate writer process appends to at the requested rate, and prints one JSON object:
CPU seconds the console process used per wall second while events arrive (its own
threads only: the writer is another process), and again while keys are pressed 4 times a second, key-to-screen latency (a pane switch: from the key event until the
focus moved and the screen was painted), how many states were drawn per second (coalescing), and how many events
the console ingested.

    python benchmarks/console_load.py [--seconds 10] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

WRITER = r"""
import json, sys, time
from datetime import datetime, timezone
path, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
n = 0
with open(path, "ab", buffering=0) as fh:
    while time.monotonic() - start < seconds:
        due = start + n / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        mono = 1000.0 + n * 0.01
        phase = ("research", "planning", "implementation", "benchmark")[(n // 2) % 4]
        event = "phase_started" if n % 2 == 0 else "phase_completed"
        record = {"schema_version": "atrex_iteration_event_v1", "campaign_id": "demo",
                  "iteration_id": f"episode-{n // 400:04d}", "attempt_id": "invocation-1", "event": event,
                  "timestamp": datetime.now(timezone.utc).isoformat(), "monotonic_seconds": mono,
                  "source": "agent_marker", "measurement": "explicit", "phase": phase,
                  "action": "start" if event == "phase_started" else "end", "marker_id": f"{n:032x}"}
        fh.write((json.dumps(record, sort_keys=True) + "\n").encode())
        n += 1
print(n)
"""


async def drive(campaign: Path, telemetry: Path, seconds: float, rate: float) -> dict:
    from textual import events

    from console.app import EpiscopeApp
    from console.episode.session import Session

    app = EpiscopeApp(session=Session(campaign), sample_gpu=False)
    latencies: list[float] = []
    async with app.run_test(size=(150, 46)) as pilot:
        while app.episode_state.event_count == 0:
            await pilot.pause(0.05)
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(telemetry), str(rate), str(seconds)],
                                  stdout=subprocess.PIPE, text=True)
        events_before = app.episode_state.event_count
        draws_before = app.draws
        # First half: events only (what watching costs); second half: keys as well.
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds / 2)
        cpu_mid, wall_mid = time.process_time(), time.monotonic()
        keys = (("6", "versions-table"), ("7", "alerts-table"), ("4", "jobs-table"), ("8", "unreadable-table"))
        index = 0
        while writer.poll() is None:
            await asyncio.sleep(0.25)
            key, target = keys[index % len(keys)]
            index += 1
            t0 = time.perf_counter()
            # The key goes in as a terminal driver would post it (Pilot.press would also
            # wait for the whole process to go idle, which is not what an operator waits for).
            app.post_message(events.Key(key, key))
            while app.focused is None or app.focused.id != target:
                await asyncio.sleep(0.001)
            await pilot.pause(0)  # the compositor paints the change
            latencies.append(time.perf_counter() - t0)
        cpu1, wall1 = time.process_time(), time.monotonic()
        written = int(writer.stdout.read().strip() or 0)
        await pilot.pause(0.5)
        ingested = app.episode_state.event_count - events_before
        draws = app.draws - draws_before
    wall = wall1 - wall0
    latencies.sort()
    return {
        "benchmark": "console_load",
        "rate_events_per_s": rate,
        "seconds": round(wall, 3),
        "events_written": written,
        "events_ingested": ingested,
        "cpu_seconds_per_wall_second": round((cpu_mid - cpu0) / (wall_mid - wall0), 4),
        "cpu_seconds_per_wall_second_with_keys": round((cpu1 - cpu_mid) / (wall1 - wall_mid), 4),
        "key_to_screen_ms_median": round(statistics.median(latencies) * 1000, 2),
        "key_to_screen_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 2),
        "key_presses": len(latencies),
        "draws_per_second": round(draws / wall, 2),
        "targets": {"cpu_seconds_per_wall_second": 0.25, "key_to_screen_ms": 100},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=100.0)
    args = parser.parse_args()
    from console_fixture import build_episode

    with tempfile.TemporaryDirectory() as tmp:
        campaign, worktree = build_episode(Path(tmp))
        telemetry = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
        result = asyncio.run(drive(campaign, telemetry, args.seconds, args.rate))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
