"""Generated workloads for the benchmarks: big, realistic telemetry files.

The mix follows a real episode: every attempt walks the seven phases with a start and an
end marker each, reads a few sources and runs sandbox jobs (a start and a completion).
"""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime, timedelta

PHASES = ("profile", "research", "planning", "implementation", "correctness", "benchmark", "recording")


def telemetry_lines(count: int, *, seed: int = 7, campaign: str = "bench"):
    """Yield ``count`` telemetry lines (bytes, newline-terminated), sorted keys."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    mono = 1000.0
    produced = 0
    iteration = 0
    while produced < count:
        iteration += 1
        common = {
            "schema_version": "atrex_iteration_event_v1",
            "campaign_id": campaign,
            "iteration_id": f"episode-{iteration:04d}",
            "attempt_id": "invocation-1",
        }
        for phase in PHASES:
            for action in ("start", "end"):
                mono += rng.uniform(0.5, 30.0)
                record = dict(common, event="phase_started" if action == "start" else "phase_completed",
                              phase=phase, action=action, marker_id=f"{rng.getrandbits(128):032x}",
                              source="agent_marker", measurement="explicit")
                yield _line(record, start, mono)
                produced += 1
                if produced >= count:
                    return
                if action == "start" and phase in ("research", "profile"):
                    for _ in range(rng.randint(1, 3)):
                        mono += rng.uniform(0.1, 2.0)
                        record = dict(common, event="source_read", source_kind="workspace",
                                      reference=f"profiles/episode_{iteration}/summary.txt",
                                      source="agent_marker", measurement="explicit")
                        yield _line(record, start, mono)
                        produced += 1
                        if produced >= count:
                            return
                if action == "start" and phase in ("profile", "correctness", "benchmark"):
                    op = f"sandbox-{rng.randint(1000, 99999)}-{int(mono * 1e9)}"
                    category = {"profile": "profile", "correctness": "correctness", "benchmark": "benchmark"}[phase]
                    for event in ("sandbox_operation_started", "sandbox_operation_completed"):
                        mono += rng.uniform(0.1, 5.0)
                        record = dict(common, event=event, operation_id=op, category=category, source="sandbox", measurement="exact")
                        if event.endswith("completed"):
                            record.update(duration_seconds=round(rng.uniform(0.1, 5.0), 6), status="succeeded", exit_status=0)
                        yield _line(record, start, mono)
                        produced += 1
                        if produced >= count:
                            return


def _line(record: dict, start: datetime, mono: float) -> bytes:
    record["monotonic_seconds"] = mono
    record["timestamp"] = (start + timedelta(seconds=mono)).isoformat()
    return (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()


def write_telemetry_workspace(root: str, count: int) -> str:
    """A minimal episode directory with ``count`` telemetry events; returns the jsonl path."""
    runtime = os.path.join(root, ".atrex_long_horizon")
    os.makedirs(runtime, exist_ok=True)
    path = os.path.join(runtime, "telemetry.jsonl")
    with open(path, "wb") as fh:
        buffer = []
        for line in telemetry_lines(count):
            buffer.append(line)
            if len(buffer) >= 10000:
                fh.write(b"".join(buffer))
                buffer = []
        fh.write(b"".join(buffer))
    return path
