"""Spine benchmarks (issue goals), printed as one JSON document.

    python benchmarks/spine.py [--events 1000000] [--example PATH] [--only PART[,PART]] [--repeats 5] [--cpu N]
                               [--python PATH]

``--only`` runs some parts (cold_ingest, peak_rss, one_more_event, append_latency,
status_startup); ``--cpu N`` pins this process and its children to core N. Cold ingest
needs only orjson and msgspec beyond the standard library; the third-party packages it
imported are listed in its result.

- cold ingest + reduce of N telemetry events, against a bare ``orjson.loads`` loop over
  the same lines, interleaved in the same run (ratio of medians of ``--repeats``, default 5);
- append latency: write a line, see it on ``episcope events --follow`` (p50/p95 of 40);
- one more event on the N-event episode: refresh + snapshot (median of 50);
- ``episcope status --json`` on the example against ``python -c pass`` (median of 20);
- peak RSS of a process that holds the N-event episode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from workloads import telemetry_lines, write_telemetry_workspace  # noqa: E402


def cold_ingest(root: str, path: str, count: int, repeats: int = 5) -> dict:
    """Ingest + reduce against the bare orjson loop over the same lines, interleaved,
    medians of ``repeats``. CPU time is reported beside wall time: on a shared machine it is the
    steadier of the two."""
    before = set(sys.modules)
    import orjson

    from console.episode.session import Session

    data = Path(path).read_bytes()
    bare, ours, bare_cpu, ours_cpu = [], [], [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        for line in data.split(b"\n"):
            if line:
                orjson.loads(line)
        bare.append(time.perf_counter() - start)
        bare_cpu.append(time.process_time() - start_cpu)
        start, start_cpu = time.perf_counter(), time.process_time()
        state = Session(root).scan()
        ours.append(time.perf_counter() - start)
        ours_cpu.append(time.process_time() - start_cpu)
        assert state.telemetry_events == count, state.telemetry_events
        del state  # freeing a million spans is not part of the next run's ingest
    del data
    imported = {name.split(".")[0] for name in set(sys.modules) - before}
    seconds = statistics.median(ours)
    return {
        "events": count,
        "seconds_median": seconds,
        "events_per_second": count / seconds,
        "orjson_loop_seconds_median": statistics.median(bare),
        "ratio_to_orjson_loop": seconds / statistics.median(bare),
        "cpu_ratio_to_orjson_loop": statistics.median(ours_cpu) / statistics.median(bare_cpu),
        "ratio_of_fastest": min(ours) / min(bare),  # less moved by other load on the machine
        "third_party_imports": sorted(imported - set(sys.stdlib_module_names) - {"console"}),
    }


def one_more_event(root: str, path: str) -> dict:
    from console.episode.session import Session

    session = Session(root)
    session.scan()
    lines = telemetry_lines(100, seed=99)
    costs = []
    for _ in range(50):
        line = next(lines)
        with open(path, "ab") as fh:
            fh.write(line)
        start = time.perf_counter()
        events = session.refresh([path])
        _ = session.state  # building the snapshot is part of the cost
        costs.append(time.perf_counter() - start)
        assert len(events) == 1
    return {"refresh_and_snapshot_ms_median": statistics.median(costs) * 1000, "max_ms": max(costs) * 1000}


def append_latency(root: str, samples: int = 40) -> dict:
    path = os.path.join(root, ".atrex_long_horizon", "telemetry.jsonl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli", "events", root, "--follow", "--kind", "telemetry"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(HERE.parent),
    )
    try:
        os.set_blocking(proc.stdout.fileno(), True)
        # Let the cold scan finish: the first marker line we append is the sync point.
        lines = telemetry_lines(samples + 1, seed=5)
        latencies = []
        buffer = b""

        def wait_for(marker: bytes) -> float:
            nonlocal buffer
            while marker not in buffer:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError("events --follow exited")
                buffer += chunk
            seen = time.perf_counter()
            buffer = buffer[buffer.index(marker) + len(marker):]
            return seen

        time.sleep(1.0)
        for i in range(samples + 1):
            marker = f"bench-append/{i}".encode()
            record = json.loads(next(lines))
            record.update(event="source_read", source_kind="workspace", reference=marker.decode())
            data = (json.dumps(record, sort_keys=True) + "\n").encode()
            with open(path, "ab") as fh:
                written = time.perf_counter()
                fh.write(data)
            seen = wait_for(marker)
            if i:
                latencies.append(seen - written)
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    latencies.sort()
    return {
        "samples": len(latencies),
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))] * 1000,
    }


def status_startup(example: str, runs: int = 20, python: str | None = None) -> dict:
    """``episcope status --json`` as a user runs it (the installed script) against
    ``python -c pass``, same interpreter, interleaved, medians.

    ``python`` is the interpreter of another installation (a regular ``pip install`` of
    the wheel in its own venv): its ``episcope`` script and its ``python -c pass`` are
    timed instead of this checkout's.

    Both run with bytecode writing allowed and after one warm-up run, as an installed copy
    does: an environment that sets PYTHONDONTWRITEBYTECODE would otherwise make every run
    compile episcope from source. The warm-up also unpacks an archive into the user cache.

    A third command, interleaved too, imports only GitPython and msgspec, the two libraries
    ``status`` cannot do without (git facts, typed records): the floor under its time.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def wall(argv) -> float:
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=str(HERE.parent), env=env)
        return time.perf_counter() - start

    interpreter = python or sys.executable
    script = Path(interpreter).with_name("episcope")
    entry = [str(script)] if script.is_file() else [interpreter, "-m", "console.cli"]
    episcope = [*entry, "status", "--json", example]
    wall(episcope)
    libraries = [interpreter, "-c", "import git, msgspec"]
    ours, bare, floor = [], [], []
    for _ in range(runs):
        bare.append(wall([interpreter, "-c", "pass"]))
        ours.append(wall(episcope))
        floor.append(wall(libraries))
    return {
        "command": " ".join(episcope),
        "runs": runs,
        "status_seconds_median": statistics.median(ours),
        "python_pass_seconds_median": statistics.median(bare),
        "ratio": statistics.median(ours) / statistics.median(bare),
        "ratio_of_fastest": min(ours) / min(bare),  # less moved by other load on the machine
        "import_git_msgspec_seconds_median": statistics.median(floor),
        "import_git_msgspec_ratio": statistics.median(floor) / statistics.median(bare),
    }


def peak_rss(root: str) -> dict:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss from parent to child across fork and
    # exec, so a child of this (large) benchmark process would report the parent's peak.
    code = (
        "from console.episode.session import Session\n"
        f"state = Session({root!r}).scan()\n"
        "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        "print(state.telemetry_events, hwm.split()[1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=str(HERE.parent))
    events, kib = out.stdout.split()
    return {"events": int(events), "peak_rss_mb": int(kib) / 1024}


PARTS = ("cold_ingest", "peak_rss", "one_more_event", "append_latency", "status_startup")
GOALS = {  # part -> (goal, test of its result)
    "cold_ingest": [("cold_ingest_ratio<=1.5", lambda r: r["ratio_to_orjson_loop"] <= 1.5)],
    "append_latency": [("append_latency_p95_ms<=50", lambda r: r["p95_ms"] <= 50)],
    "one_more_event": [("one_more_event_ms<=1", lambda r: r["refresh_and_snapshot_ms_median"] <= 1)],
    "status_startup": [("status_ratio<=6", lambda r: r["ratio"] <= 6)],
    "peak_rss": [("peak_rss_mb<=300", lambda r: r["peak_rss_mb"] <= 300)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--example", help="workspace for the status startup check (default: the bundled example)")
    parser.add_argument("--only", help=f"comma-separated parts to run (default: all of {', '.join(PARTS)})")
    parser.add_argument("--repeats", type=int, default=5, help="cold_ingest: interleaved runs of each side")
    parser.add_argument("--cpu", type=int, help="pin the benchmark (and the processes it starts) to this core")
    parser.add_argument("--python", help="status_startup: time the episcope installed beside this interpreter "
                                         "(e.g. a venv with a regular install of the wheel)")
    args = parser.parse_args()
    parts = PARTS if args.only is None else tuple(p.strip() for p in args.only.split(",") if p.strip())
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="episcope-bench-") as tmp:
        if {"cold_ingest", "peak_rss", "one_more_event"} & set(parts):
            root = os.path.join(tmp, "big")
            path = write_telemetry_workspace(root, args.events)
            if "cold_ingest" in parts:
                results["cold_ingest"] = cold_ingest(root, path, args.events, args.repeats)
            if "peak_rss" in parts:
                results["peak_rss"] = peak_rss(root)
            if "one_more_event" in parts:
                results["one_more_event"] = one_more_event(root, path)
        if "append_latency" in parts:
            small = os.path.join(tmp, "small")
            write_telemetry_workspace(small, 200)
            results["append_latency"] = append_latency(small)
        if "status_startup" in parts:
            example = args.example or default_example(tmp)
            results["status_startup"] = status_startup(example, python=args.python)
            results["status_startup"]["workspace"] = example
    results["goals"] = {goal: test(results[part]) for part in PARTS if part in results for goal, test in GOALS[part]}
    results["cpu_count"] = os.cpu_count()
    results["cpu_affinity"] = sorted(os.sched_getaffinity(0))
    results["python"] = sys.version.split()[0]
    print(json.dumps(results, indent=2))


def default_example(tmp: str) -> str:
    bundled = HERE.parent / "examples" / "episodes"
    if bundled.is_dir():
        for candidate in sorted(bundled.iterdir()):
            if candidate.name.endswith((".tar.gz", ".tgz")) or (candidate / ".git").exists() \
                    or (candidate / ".atrex_long_horizon").is_dir():
                return str(candidate)
    made = os.path.join(tmp, "example")
    out = subprocess.run([sys.executable, str(HERE.parent / "examples" / "make_example_campaign.py"), made], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]  # the generator prints the campaign root last


if __name__ == "__main__":
    main()
