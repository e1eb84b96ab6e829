"""Latency of the bundled row_softmax kernels, measured by the episode evaluator (GPU only).

    PYTHONPATH=. python3 benchmarks/row_softmax_kernels.py [--out FILE] [evaluator flags...]

Builds one workspace per kernel variant (naive, fast) in a temporary directory, runs
``tools/evaluate.py`` on each, in one process tree, one after the other, and prints one JSON
object: per workload uuid the axes, each variant's median latency (µs), the reference's,
the fast/naive speedup and the fast kernel's effective DRAM bandwidth (one read and one
write of the matrix). Extra arguments go to the evaluator unchanged.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBLEM = REPO / "examples" / "problems" / "row_softmax"
PREFIX = "[test_kernel] RESULT_JSON="
VARIANTS = ("naive", "fast")


def run_variant(variant: str, scratch: Path, extra: list[str]) -> tuple[int, dict]:
    ws = scratch / variant
    ws.mkdir()
    for name in ("definition.json", "workload.jsonl", "reference.py", "input.py"):
        shutil.copy(PROBLEM / name, ws / name)
    shutil.copy(PROBLEM / f"kernel_{variant}.py", ws / "kernel.py")
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "evaluate.py"), "--workspace", str(ws), *extra],
        capture_output=True, text=True,
    )
    sys.stderr.write(proc.stdout + proc.stderr)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)), None)
    if line is None:
        raise SystemExit(f"{variant}: the evaluator printed no RESULT_JSON (exit {proc.returncode})")
    return proc.returncode, json.loads(line[len(PREFIX):])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the JSON here")
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="row_softmax_bench_") as tmp:
        results = {v: run_variant(v, Path(tmp), extra) for v in VARIANTS}
    shapes = {}
    for line in (PROBLEM / "workload.jsonl").read_text().splitlines():
        workload = json.loads(line)["workload"]
        uid, axes = workload["uuid"], workload["axes"]
        naive = results["naive"][1]["latency_us_by_shape"].get(uid)
        fast = results["fast"][1]["latency_us_by_shape"].get(uid)
        bytes_moved = 2 * 4 * axes["rows"] * axes["cols"]
        shapes[uid] = {
            "axes": axes,
            "naive_us": naive,
            "fast_us": fast,
            "reference_us": results["fast"][1]["ref_latency_us_by_shape"].get(uid),
            "fast_vs_naive": round(naive / fast, 2) if naive and fast else None,
            "fast_gbps": round(bytes_moved / fast / 1e3, 1) if fast else None,
        }
    report = {
        "benchmark": "row_softmax_kernels",
        "shapes": shapes,
        "exit_codes": {v: results[v][0] for v in VARIANTS},
        "results": {v: results[v][1] for v in VARIANTS},
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if all(results[v][0] == 0 for v in VARIANTS) else 1


if __name__ == "__main__":
    sys.exit(main())
