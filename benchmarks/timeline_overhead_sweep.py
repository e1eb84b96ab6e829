#!/usr/bin/env python3
"""Timeline probe overhead on a real kernel, swept over iteration length (GPU, cupy).

The kernel streams float4 tiles from a 256 MiB array (larger than L2) and evaluates a
degree-K polynomial on each component; every warp brackets each main-loop iteration with
one begin/end pair (lane 0 writes). K sets the iteration length. For each target length
the sweep calibrates K, then runs `measure` (fresh processes, ABBA/BAAB blocks, adaptive
until the 95% interval is narrower than --ci-width) and reports its interval. It also
checks the capture span against CUDA events on the same launch.

    PYTHONPATH=. python3 benchmarks/timeline_overhead_sweep.py --output sweep.json
    (sample mode, used by measure: --sample --degree K; variant from ATREX_TIMELINE_VARIANT)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "skills" / "autonomous-gpu-kernel-timeline" / "backends"))

from console.timeline.measure import SAMPLE_PREFIX  # noqa: E402

KERNEL = r"""
extern "C" __global__ void __launch_bounds__(256)
stream_poly(const float4* __restrict__ x, float* __restrict__ out, int iters, int degree,
            unsigned int n4, void* timeline) {
  atrex::timeline::Recorder rec(timeline, threadIdx.x >> 5, (threadIdx.x & 31u) == 0u);
  const unsigned int stride = gridDim.x * blockDim.x;
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int it = 0; it < iters; ++it) {
    rec.begin(atrex_sites::mainloop, it);
    const float4 v = x[i];
    float4 p = v;
#pragma unroll 4
    for (int k = 0; k < degree; ++k) {
      p.x = fmaf(p.x, v.x, 0.5f); p.y = fmaf(p.y, v.y, 0.5f);
      p.z = fmaf(p.z, v.z, 0.5f); p.w = fmaf(p.w, v.w, 0.5f);
    }
    acc.x += p.x; acc.y += p.y; acc.z += p.z; acc.w += p.w;
    i += stride;
    if (i >= n4) i -= n4;
    rec.end(atrex_sites::mainloop, it);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc.x + acc.y + acc.z + acc.w;
}
"""
DICTIONARY = {
    "schema": "atrex-autonomous-timeline-events/v1",
    "sites": [{"site_id": 1, "name": "mainloop", "kind": "range", "boundary_semantics": "issue order"}],
}
BLOCK = 256
ITERS = 256
N4 = 16 * 1024 * 1024  # 256 MiB of float4


class Workload:
    """One compiled variant plus its buffers; `launch` runs one timed launch."""

    def __init__(self, degree: int, enabled: bool, ctas_per_sm: int = 2) -> None:
        import cupy
        from cuda_backend.cupy_adapter import TimelineBuffer, compile_module
        from console.timeline.manifest import warp_writers_manifest

        self.cp = cupy
        self.degree = degree
        self.enabled = enabled
        sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
        self.grid = sms * ctas_per_sm
        mod = compile_module(KERNEL, DICTIONARY, enabled=enabled, source_name="stream_poly.cu",
                             options=("-std=c++17",))
        self.fn = mod.get_function("stream_poly")
        cupy.random.seed(1)
        self.x = cupy.random.uniform(-0.9, 0.9, size=N4 * 4, dtype=cupy.float32)
        self.out = cupy.zeros(self.grid * BLOCK, dtype=cupy.float32)
        self.manifest = warp_writers_manifest((self.grid, 1, 1), (BLOCK, 1, 1), 1, 2 * ITERS)
        self.buf = TimelineBuffer(self.manifest)

    def launch(self, launch_id: int | None = None) -> float:
        """Reset the buffer (untimed), launch once between CUDA events; return ms."""
        cp = self.cp
        if launch_id is not None:
            self.manifest["launch_id"] = launch_id
            from console.timeline import abi
            self.buf.header = abi.new_header(self.manifest["grid"], self.manifest["block"],
                                             self.buf.header.owner_count, self.buf.header.records_per_owner,
                                             launch_id)
        self.buf.reset()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        self.fn((self.grid,), (BLOCK,), (self.x, self.out, np.int32(ITERS), np.int32(self.degree),
                                          np.uint32(N4), np.uint64(self.buf.ptr)))
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)

    def device_uuid(self) -> str:
        uuid = self.cp.cuda.runtime.getDeviceProperties(0).get("uuid", b"")
        return uuid.hex() if isinstance(uuid, bytes) else str(uuid)


def sample_main(degree: int) -> int:
    variant = os.environ.get("ATREX_TIMELINE_VARIANT", "baseline")
    warmup = int(os.environ.get("ATREX_TIMELINE_WARMUP", "10"))
    iterations = int(os.environ.get("ATREX_TIMELINE_ITERATIONS", "100"))
    w = Workload(degree, enabled=(variant == "instrumented"))
    for _ in range(warmup):
        w.launch()
    times = [w.launch() for _ in range(iterations)]
    sample = {"latency_ms": float(np.median(times)), "correctness": "passed", "synchronized": True,
              "workload_identity": f"stream_poly:grid={w.grid}x{BLOCK}:iters={ITERS}:degree={degree}",
              "device_identity": {"uuid": w.device_uuid()}, "warmup": warmup, "iterations": iterations}
    print(SAMPLE_PREFIX + json.dumps(sample, sort_keys=True), flush=True)
    return 0


def calibrate(targets_us: list[float]) -> dict[float, dict]:
    """Degree per target iteration length, from baseline launches (kernel ms / ITERS)."""
    w = Workload(4, enabled=False)

    def per_iteration_us(degree: int) -> float:
        w.degree = degree
        for _ in range(3):
            w.launch()
        return float(np.median([w.launch() for _ in range(15)])) * 1000.0 / ITERS

    per_iter = {d: per_iteration_us(d) for d in (4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)}
    degrees = np.array(sorted(per_iter))
    lengths = np.array([per_iter[d] for d in degrees])
    chosen = {}
    for t in targets_us:
        d = int(round(np.interp(t, lengths, degrees)))
        chosen[t] = {"degree": d, "iteration_us": per_iteration_us(d)}
    return {"calibration_us_per_iteration": {str(k): v for k, v in per_iter.items()}, "chosen": chosen}


def span_check(degree: int, launches: int = 10) -> dict:
    """Capture span vs CUDA-event duration on the same launch."""
    from console.timeline.decode import decode
    from console.timeline.manifest import parse_dictionary, parse_manifest

    w = Workload(degree, enabled=True)
    for _ in range(3):
        w.launch()
    rows = []
    for n in range(launches):
        ms = w.launch(launch_id=1000 + n)
        cap = decode(w.buf.raw(), parse_manifest(w.manifest), parse_dictionary(DICTIONARY))
        ts = cap.events["timestamp_ns"]
        span_ns = int(ts.max() - ts.min())
        event_ns = ms * 1e6
        rows.append({"launch_id": 1000 + n, "event_ns": event_ns, "span_ns": span_ns,
                     "diff_ns": event_ns - span_ns, "diff_percent": (event_ns - span_ns) / event_ns * 100,
                     "records": cap.committed_records})
    ok = all(abs(r["diff_ns"]) <= max(0.05 * r["event_ns"], 2000.0) for r in rows)
    return {"degree": degree, "launches": rows, "within_5pct_or_2us": ok,
            "max_abs_diff_percent": max(abs(r["diff_percent"]) for r in rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", action="store_true", help="one measure sample (used by measure)")
    parser.add_argument("--degree", type=int, default=64)
    parser.add_argument("--targets-us", default="0.65,1.3,3.7")
    parser.add_argument("--ci-width", type=float, default=1.0)
    parser.add_argument("--min-blocks", type=int, default=3)
    parser.add_argument("--max-blocks", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--output", default="-")
    parser.add_argument("--work-dir")
    args = parser.parse_args()
    if args.sample:
        return sample_main(args.degree)
    from console.timeline.measure import MeasureConfig, measure

    t0 = time.monotonic()
    targets = [float(t) for t in args.targets_us.split(",")]
    cal = calibrate(targets)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="timeline-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "stream_poly.cu"
    src.write_text(KERNEL)
    inst = work / "stream_poly.instrumented.cu"
    from cuda_backend.cupy_adapter import instrument_source
    inst.write_text(instrument_source(KERNEL, DICTIONARY, source_name="stream_poly.cu"))
    results = []
    for t in targets:
        degree = cal["chosen"][t]["degree"]
        cmd = [sys.executable, str(Path(__file__).resolve()), "--sample", "--degree", str(degree)]
        config = MeasureConfig(baseline_command=cmd, instrumented_command=cmd, baseline_source=str(src),
                               instrumented_source=str(inst), output=str(work / f"measure-{t:g}us.json"),
                               warmup=10, iterations=args.iterations, min_blocks=args.min_blocks,
                               max_blocks=args.max_blocks, ci_width=args.ci_width, target_percent=10.0,
                               env={"PYTHONPATH": str(ROOT)})
        m = measure(config)
        results.append({"target_us": t, "degree": degree, "iteration_us": cal["chosen"][t]["iteration_us"],
                        "baseline_ms": m["baseline_ms"], "instrumented_ms": m["instrumented_ms"],
                        "overhead_percent": m["overhead_percent"], "interval": m["interval"],
                        "bootstrap_interval": m["bootstrap_interval"], "rank_test": m["rank_test"],
                        "blocks": m["blocks"], "stop_reason": m["stop_reason"],
                        "measurement": m})
    span = span_check(cal["chosen"][targets[len(targets) // 2]]["degree"])
    report = {"kernel": "stream_poly", "block": BLOCK, "iterations_per_launch": ITERS,
              "sites": ["mainloop (range)"], "density": "one begin/end pair per warp per main-loop iteration",
              "calibration": cal, "sweep": results, "span_check": span,
              "wall_seconds": time.monotonic() - t0}
    text = json.dumps(report, indent=2, sort_keys=True, default=str)
    if args.output == "-":
        print(text)
    else:
        Path(args.output).write_text(text + "\n")
        print(json.dumps([{k: r[k] for k in ("target_us", "degree", "iteration_us", "overhead_percent", "interval",
                                             "blocks")} for r in results] + [{"span_max_abs_diff_percent":
                                                                              span["max_abs_diff_percent"]}],
                         default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
