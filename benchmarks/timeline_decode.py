#!/usr/bin/env python3
"""Timeline decode and export speed, episcope beside AKA's timeline tool, in one run.

Sections (medians of repeats; "cpu" is the process's own CPU time, steadier than wall time on a
shared machine):

- ``command``: ``timeline.py decode`` as a whole command on the real H200 capture ``capture_ok``
  (774 records), episcope's and AKA's alternating. Goal: episcope no slower than AKA. Both are
  standard-library programs (episcope's decode path imports no numpy). episcope's package is
  byte-compiled first, as an installed package is; AKA's tool is one script, which Python
  compiles on every run. ``reference`` times a bare interpreter and ``import numpy``.
- ``decode``: the decode alone, in this process, exactly as the command runs it (manifest and
  dictionary parsed, then ``decode``), on ``capture_ok`` and on a synthetic capture shaped like
  the overhead sweep's (every warp of 2 CTAs per SM writes one begin/end pair per main-loop
  iteration; 17 MB by default). For AKA: header, manifest, dictionary and ``decode_records``
  (which pairs ranges too). Goal: episcope at least 10x faster.
- ``chrome_export``: the gzipped Chrome JSON trace of the synthetic capture; AKA's is
  ``make_perfetto`` then ``write_gzip_json`` into a temporary directory.
- ``struct_loop``: episcope's decode against a bare per-record ``struct.unpack`` loop that only
  splits tags (no checks): what touching every record once in Python costs, which the
  whole-column decode (every check included) stays near or below.

numpy builds the synthetic capture here (``encode``); the decode it times does not use it.

AKA's side needs a copy of AKA's ``skills/autonomous-gpu-kernel-timeline/scripts/timeline.py``
passed by path (``--aka``); it is loaded from there, never from this repository. Without it
the AKA columns are null and ``aka_skipped`` says why. Prints JSON.

    PYTHONPATH=. python3 benchmarks/timeline_decode.py --aka /path/to/aka/timeline.py
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.timeline import abi  # noqa: E402
from console.timeline.decode import decode  # noqa: E402
from console.timeline.encode import encode  # noqa: E402
from console.timeline.export import chrome_trace_bytes  # noqa: E402
from console.timeline.manifest import (  # noqa: E402
    EVENTS_SCHEMA,
    load_json,
    parse_dictionary,
    parse_manifest,
    warp_writers_manifest,
)

SCRIPT = ROOT / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
FIXTURES = ROOT / "tests" / "fixtures" / "timeline"


def synthetic(ctas: int, rpo: int) -> tuple[bytes, dict, dict]:
    """(raw, manifest object, dictionary object) of the sweep-shaped capture."""
    manifest_obj = warp_writers_manifest((ctas, 1, 1), (256, 1, 1), 1, rpo)
    dictionary_obj = {"schema": EVENTS_SCHEMA, "sites": [{"site_id": 1, "name": "mainloop", "kind": "range"}]}
    manifest = parse_manifest(manifest_obj)
    owners = manifest.owner_count
    owner = np.repeat(np.arange(owners), rpo)
    seq = np.tile(np.arange(rpo), owners)
    rng = np.random.default_rng(0)
    start = 1_700_000_000_000_000_000 + rng.integers(0, 5_000, owners)
    ts = start[owner] + seq * 650 + rng.integers(0, 32, owner.size)
    ts = np.maximum.accumulate(ts.reshape(owners, rpo), axis=1).reshape(-1)
    raw = bytes(encode(manifest, owner, ts, np.ones_like(owner), seq % 2, seq // 2, (owner // 8) % 132))
    return raw, manifest_obj, dictionary_obj


def load_aka(path: str | None):
    if path is None:
        return None, "no --aka given: pass a copy of AKA's timeline.py to time AKA's side"
    if not Path(path).is_file():
        return None, f"--aka {path} is not a file"
    spec = importlib.util.spec_from_file_location("aka_timeline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, None


def timed(fn, repeats: int, inner: int = 1) -> dict:
    """Median wall and CPU seconds of one call of ``fn``."""
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        cpu.append((time.process_time() - c) / inner)
        wall.append((time.perf_counter() - w) / inner)
    return {"wall_seconds": statistics.median(wall), "cpu_seconds": statistics.median(cpu), "repeats": repeats}


def side_by_side(ours: dict, theirs: dict | None) -> dict:
    out = {"episcope": ours, "aka": theirs}
    if theirs is not None:
        out["aka_over_episcope_cpu"] = theirs["cpu_seconds"] / ours["cpu_seconds"]
        out["aka_over_episcope_wall"] = theirs["wall_seconds"] / ours["wall_seconds"]
    return out


def command_runs(aka_path: str | None, repeats: int) -> dict:
    """Whole ``decode`` commands on capture_ok, the two tools alternating; CPU from rusage."""
    inputs = ["--raw", FIXTURES / "capture_ok.bin", "--manifest", FIXTURES / "capture_ok.manifest.json",
              "--dictionary", FIXTURES / "fixture.events.json", "--clean-source", FIXTURES / "fixture_kernel.cu",
              "--instrumented-source", FIXTURES / "fixture_kernel.instrumented.cu", "--workload-identity", "w"]
    tools = {"episcope": str(SCRIPT)}
    if aka_path:
        tools["aka"] = aka_path
    samples: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in tools}
    # as installed: without this, PYTHONDONTWRITEBYTECODE=1 would recompile every module each run
    compileall.compile_dir(ROOT / "console", quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for name, script in tools.items():
                before = os.times()
                start = time.perf_counter()
                done = subprocess.run([sys.executable, script, "decode", *map(str, inputs),
                                       "--output-dir", f"{tmp}/{name}{i}"], capture_output=True, text=True)
                samples[name]["wall"].append(time.perf_counter() - start)
                after = os.times()
                samples[name]["cpu"].append(after.children_user + after.children_system
                                            - before.children_user - before.children_system)
                if done.returncode != 0:
                    raise SystemExit(f"{name} decode failed: {done.stderr.strip()}")
    medians = {name: {"wall_seconds": statistics.median(s["wall"]), "cpu_seconds": statistics.median(s["cpu"]),
                      "repeats": repeats} for name, s in samples.items()}
    result = side_by_side(medians["episcope"], medians.get("aka"))
    result["goal"] = "episcope no slower than AKA"
    # what any command on numpy pays before its first line of work, for scale
    result["reference"] = {name: interpreter_cpu(code, repeats)
                           for name, code in (("interpreter_start", "pass"), ("numpy_import", "import numpy"))}
    return result


def interpreter_cpu(code: str, repeats: int) -> dict:
    """Median wall and CPU seconds of ``python -c code`` in a fresh process."""
    wall, cpu = [], []
    for _ in range(repeats):
        before = os.times()
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        wall.append(time.perf_counter() - start)
        after = os.times()
        cpu.append(after.children_user + after.children_system - before.children_user - before.children_system)
    return {"wall_seconds": statistics.median(wall), "cpu_seconds": statistics.median(cpu), "repeats": repeats}


def aka_decode(aka, raw: bytes, manifest_obj: dict, dictionary_obj: dict):
    header = aka.parse_header(raw)
    return aka.decode_records(raw, header, aka.validate_manifest(manifest_obj, header), aka.load_sites(dictionary_obj))


def ours_decode(raw: bytes, manifest_obj: dict, dictionary_obj: dict):
    return decode(raw, parse_manifest(manifest_obj), parse_dictionary(dictionary_obj))


def struct_loop(raw: bytes, capacity: int) -> int:
    unpack = abi.RECORD_STRUCT.unpack_from
    committed = 0
    for slot in range(capacity):
        ts, payload, tag = unpack(raw, abi.HEADER_BYTES + slot * abi.RECORD_BYTES)
        if tag >> 31:
            # Decode the fields as a reader would; the baseline only counts them.
            _site, _kind, _sm = tag & 0xFFFF, (tag >> 16) & 3, (tag >> 18) & 0x3FF
            committed += 1
    return committed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--aka", help="path of a copy of AKA's timeline.py (its side is skipped without it)")
    parser.add_argument("--ctas", type=int, default=264)
    parser.add_argument("--records-per-owner", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--command-repeats", type=int, default=15)
    parser.add_argument("--aka-big-repeats", type=int, default=1, help="AKA on the synthetic capture is slow")
    parser.add_argument("--output", default="-")
    args = parser.parse_args()
    aka, skipped = load_aka(args.aka)

    small = ((FIXTURES / "capture_ok.bin").read_bytes(), load_json(FIXTURES / "capture_ok.manifest.json"),
             load_json(FIXTURES / "fixture.events.json"))
    big = synthetic(args.ctas, args.records_per_owner)
    capture = ours_decode(*big)
    records = capture.committed_records
    ours_decode(*small)

    decode_small = side_by_side(timed(lambda: ours_decode(*small), args.repeats * 3, inner=50),
                                timed(lambda: aka_decode(aka, *small), args.repeats * 3, inner=5) if aka else None)
    decode_big = side_by_side(timed(lambda: ours_decode(*big), args.repeats),
                              timed(lambda: aka_decode(aka, *big), args.aka_big_repeats) if aka else None)
    export_ours = timed(lambda: chrome_trace_bytes(capture), max(1, args.repeats // 2))
    export_aka = None
    if aka:
        _, canonical = aka_decode(aka, *big)
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "trace.perfetto.json.gz"
            export_aka = timed(lambda: aka.write_gzip_json(target, aka.make_perfetto(canonical)),
                               args.aka_big_repeats)
        del canonical
    loop = timed(lambda: struct_loop(big[0], records), args.repeats)
    ours_big = decode_big["episcope"]
    result = {
        "benchmark": "timeline_decode",
        # which AKA tool was timed, by content (its path is the caller's machine's)
        "aka_sha256": hashlib.sha256(Path(args.aka).read_bytes()).hexdigest() if aka else None,
        "aka_skipped": skipped,
        "command": command_runs(args.aka if aka else None, args.command_repeats),
        "decode": {
            "goal": "episcope at least 10x faster than AKA",
            "capture_ok": {"records": 774, "buffer_bytes": len(small[0]), **decode_small},
            "synthetic": {"records": records, "buffer_bytes": len(big[0]), **decode_big},
        },
        "chrome_export": {"synthetic": {"events": len(capture.ranges["owner"]), **side_by_side(export_ours,
                                                                                                     export_aka)}},
        "struct_loop": {"synthetic": {"loop": loop, "episcope_decode": ours_big,
                                      "loop_over_decode_cpu": loop["cpu_seconds"] / ours_big["cpu_seconds"]}},
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.output != "-":
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
