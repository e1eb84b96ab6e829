#!/usr/bin/env python3
"""Timeline probe overhead on a real kernel, swept over iteration length (GPU, cupy).

The kernel streams float4 tiles from a 256 MiB array (larger than L2) and evaluates a
degree-K polynomial on each component; every warp brackets each main-loop iteration with
one begin/end pair (lane 0 writes) and marks kernel entry and exit with one instant each.
K sets the iteration length. One timed unit is a mix of four launches, K..K+3: the
polynomial loop is unrolled by four, and a probe shifts the code around the loop's
remainder, which moves a single K's overhead by up to 3 points either way (the screen's
per-K rows show it); the mix covers every remainder once. For each target length the sweep
calibrates K, then runs
`measure` (fresh processes, ABBA/BAAB blocks, adaptive until the 95% interval is narrower
than --ci-width) and reports its interval. A screen in one process interleaves launches of
the baseline, the shipped probe, a naive reference probe (lane 0 reads %globaltimer in a
branch and writes two 8-byte stores), ablations of the shipped probe and, with
--compare-header, candidate probe headers. `measure` then runs the complete probe (shipped or
a candidate) of the screen with the lowest mean overhead at the measured lengths, or the one
--measure-probe names.
The span check compares the span of a launch's events with CUDA events on the same launch.

Every timed launch is queued behind a short device-side hold kernel, so the start event is
recorded by the GPU right before the kernel starts: the CUDA-event time is the kernel plus
the device's launch gap, not the host's time to submit the launch.

    PYTHONPATH=. python3 benchmarks/timeline_overhead_sweep.py --output sweep.json
    (sample mode, used by measure: --sample --degree K, the mix K..K+3; variant from
    ATREX_TIMELINE_VARIANT)
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
  rec.instant(atrex_sites::kernel_entry);
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
  rec.instant(atrex_sites::kernel_exit);
}
"""
DICTIONARY = {
    "schema": "atrex-autonomous-timeline-events/v1",
    "sites": [{"site_id": 1, "name": "mainloop", "kind": "range", "boundary_semantics": "issue order"},
              {"site_id": 2, "name": "kernel_entry", "kind": "instant"},
              {"site_id": 3, "name": "kernel_exit", "kind": "instant"}],
}
# The reference the goals are quoted against: lane 0 of each warp reads %globaltimer
# inside a branch and writes the record as two 8-byte stores; no claim, no bounds check.
NAIVE_PROBE = r"""
namespace atrex { namespace timeline {
class Recorder {
 public:
  __device__ __forceinline__ Recorder(void* buffer, unsigned int ordinal, bool is_writer) : writer_(is_writer) {
    const unsigned int per_owner = static_cast<const unsigned int*>(buffer)[6];
    const unsigned int owner = blockIdx.x * (blockDim.x >> 5) + ordinal;
    next_ = reinterpret_cast<unsigned long long*>(static_cast<char*>(buffer) + 64) + 2ull * owner * per_owner;
  }
  __device__ __forceinline__ void begin(unsigned int site, unsigned int payload = 0u) { emit(site, 0u, payload); }
  __device__ __forceinline__ void end(unsigned int site, unsigned int payload = 0u) { emit(site, 1u, payload); }
  __device__ __forceinline__ void instant(unsigned int site, unsigned int payload = 0u) { emit(site, 2u, payload); }
  __device__ __forceinline__ void emit(unsigned int site, unsigned int kind, unsigned int payload) {
    if (writer_) {
      unsigned long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      next_[0] = t;
      next_[1] = (static_cast<unsigned long long>(0x80000000u | (kind << 16) | site) << 32) | payload;
      next_ += 2;
    }
  }
 private:
  unsigned long long* next_;
  bool writer_;
};
}}
"""
BLOCK = 256
ITERS = 256
MIX = 4  # consecutive degrees per timed unit: one per remainder of the unroll-by-4 loop
RECORDS_PER_OWNER = 2 * ITERS + 2
N4 = 16 * 1024 * 1024  # 256 MiB of float4
HOLD_NS = 300_000  # covers the host's time to queue the start event, the kernel and the stop event
HOLD_KERNEL = r"""
extern "C" __global__ void hold(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
"""


def probe_source(header_text: str | None) -> str:
    """The kernel with a given probe header in place of the shipped one (None: disabled)."""
    from cuda_backend.cupy_adapter import instrument_source, site_constants

    if header_text is None:
        return instrument_source(KERNEL, DICTIONARY, enabled=False, source_name="stream_poly.cu")
    return ("#define ATREX_TIMELINE_ENABLED 1\n" + header_text + "\n" + site_constants(DICTIONARY)
            + '#line 1 "stream_poly.cu"\n' + KERNEL)


class Device:
    """Input array, output buffer and the hold kernel shared by every variant of one process."""

    def __init__(self, ctas_per_sm: int = 2) -> None:
        import cupy

        self.cp = cupy
        sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
        self.grid = sms * ctas_per_sm
        cupy.random.seed(1)
        self.x = cupy.random.uniform(-0.9, 0.9, size=N4 * 4, dtype=cupy.float32)
        self.out = cupy.zeros(self.grid * BLOCK, dtype=cupy.float32)
        self.hold = cupy.RawKernel(HOLD_KERNEL, "hold")
        self.hold_expired = 0  # launches whose start event ran before the kernel was queued

    def uuid(self) -> str:
        uuid = self.cp.cuda.runtime.getDeviceProperties(0).get("uuid", b"")
        return uuid.hex() if isinstance(uuid, bytes) else str(uuid)


class Workload:
    """One compiled variant plus its timeline buffer; `launch` runs one timed launch."""

    def __init__(self, device: Device, degree: int, source: str) -> None:
        from cuda_backend.cupy_adapter import TimelineBuffer

        from console.timeline.manifest import warp_writers_manifest

        cp = device.cp
        self.device = device
        self.degree = degree
        self.fn = cp.RawModule(code=source, options=("-std=c++17",)).get_function("stream_poly")
        self.manifest = warp_writers_manifest((device.grid, 1, 1), (BLOCK, 1, 1), 1, RECORDS_PER_OWNER)
        self.buf = TimelineBuffer(self.manifest)

    def relabel(self, launch_id: int) -> None:
        from console.timeline import abi

        self.manifest["launch_id"] = launch_id
        self.buf.header = abi.new_header(self.manifest["grid"], self.manifest["block"], self.buf.header.owner_count,
                                         self.buf.header.records_per_owner, launch_id)

    def launch_mix(self) -> float:
        """Mean time of one launch at each degree of the mix (self.degree .. + MIX - 1); ms."""
        first = self.degree
        try:
            times = []
            for k in range(MIX):
                self.degree = first + k
                times.append(self.launch())
        finally:
            self.degree = first
        return float(np.mean(times))

    def launch(self) -> float:
        """Reset the buffer (untimed), queue the hold, then time one launch with CUDA events; ms."""
        d, cp = self.device, self.device.cp
        self.buf.reset()
        d.hold((1,), (1,), (np.uint64(HOLD_NS),))
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        d.hold_expired += int(start.done)
        self.fn((d.grid,), (BLOCK,), (d.x, d.out, np.int32(ITERS), np.int32(self.degree),
                                      np.uint32(N4), np.uint64(self.buf.ptr)))
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)


def shipped_header_path() -> Path:
    from cuda_backend.cupy_adapter import HEADER_PATH

    return HEADER_PATH


def shipped_header() -> str:
    return shipped_header_path().read_text()


# Cost decomposition for the screen: the shipped probe with one part of the event removed
# or changed (plain text replacements in its event path).
_STORES = ("slot[0] = now;\n      slot[1] = (static_cast<unsigned long long>(tag) << 32) | payload;")
ABLATIONS = {
    "shipped_without_store": (_STORES, "(void)slot;"),
    "shipped_without_timer": ('asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));', "now = seq_;"),
    # store width alone: the record as one 16-byte store
    "shipped_v4": (_STORES, "*reinterpret_cast<uint4*>(slot) = make_uint4(static_cast<unsigned int>(now), "
                            "static_cast<unsigned int>(now >> 32), payload, tag);"),
}


def ablated_header(name: str) -> str:
    text = shipped_header()
    old, new = ABLATIONS[name]
    if old not in text:
        raise SystemExit(f"ablation {name}: the probe no longer contains {old}")
    return text.replace(old, new)


def sample_main(degree: int) -> int:
    variant = os.environ.get("ATREX_TIMELINE_VARIANT", "baseline")
    warmup = int(os.environ.get("ATREX_TIMELINE_WARMUP", "10"))
    iterations = int(os.environ.get("ATREX_TIMELINE_ITERATIONS", "100"))
    d = Device()
    header = Path(os.environ.get("ATREX_TIMELINE_PROBE_HEADER") or shipped_header_path()).read_text()
    w = Workload(d, degree, probe_source(header if variant == "instrumented" else None))
    for _ in range(warmup):
        w.launch_mix()
    times = [w.launch_mix() for _ in range(iterations)]
    sample = {"latency_ms": float(np.median(times)), "correctness": "passed", "synchronized": True,
              "workload_identity": f"stream_poly:grid={d.grid}x{BLOCK}:iters={ITERS}:degrees={degree}..{degree + MIX - 1}",
              "device_identity": {"uuid": d.uuid()}, "warmup": warmup, "iterations": iterations}
    print(SAMPLE_PREFIX + json.dumps(sample, sort_keys=True), flush=True)
    return 0


def calibrate(device: Device, targets_us: list[float]) -> dict:
    """First degree of the mix per target iteration length, from baseline launches
    (kernel ms / ITERS); the chosen mix's mean length is measured again."""
    w = Workload(device, 4, probe_source(None))

    def per_iteration_us(degree: int, mix: bool = False) -> float:
        w.degree = degree
        run = w.launch_mix if mix else w.launch
        for _ in range(3):
            run()
        return float(np.median([run() for _ in range(15)])) * 1000.0 / ITERS

    per_iter = {d: per_iteration_us(d) for d in (4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)}
    degrees = np.array(sorted(per_iter))
    lengths = np.array([per_iter[d] for d in degrees])
    chosen = {}
    for t in targets_us:
        d = max(1, int(round(np.interp(t, lengths, degrees) - (MIX - 1) / 2)))
        chosen[t] = {"degree": d, "degrees": [d, d + MIX - 1], "iteration_us": per_iteration_us(d, mix=True)}
    return {"calibration_us_per_iteration": {str(k): v for k, v in per_iter.items()}, "chosen": chosen}


def _overheads(times: dict[str, np.ndarray]) -> dict:
    """Median and quartiles over rounds of (variant / baseline of the same round) - 1, in %."""
    out = {}
    for n, t in times.items():
        if n != "baseline":
            q = np.quantile(t / times["baseline"], [0.25, 0.5, 0.75])
            out[n] = {"overhead_percent": float((q[1] - 1) * 100),
                      "quartiles_percent": [float((q[0] - 1) * 100), float((q[2] - 1) * 100)]}
    return out


def screen(device: Device, degrees: dict[float, int], headers: dict[str, str | None], rounds: int) -> dict:
    """In-process comparison: each round launches every variant once at each degree of the
    mix (rotating order). Reported per target: the mix (mean over its degrees, as `measure`
    times it) and each degree on its own."""
    out = {}
    names = list(headers)
    for target, first in degrees.items():
        works = {n: Workload(device, first, probe_source(headers[n])) for n in names}
        for w in works.values():
            for _ in range(3):
                w.launch_mix()
        times = {n: np.zeros((rounds, MIX)) for n in names}
        for r in range(rounds):
            for k in range(MIX):
                for n in names[r % len(names):] + names[: r % len(names)]:
                    works[n].degree = first + k
                    times[n][r, k] = works[n].launch()
        mix = {n: t.mean(axis=1) for n, t in times.items()}
        row = {"degrees": [first, first + MIX - 1], "rounds": rounds,
               "median_ms": {n: float(np.median(mix[n])) for n in names}, **_overheads(mix),
               "by_degree": {str(first + k): _overheads({n: t[:, k] for n, t in times.items()}) for k in range(MIX)}}
        out[f"{target:g}"] = row
        del works
    return out


def span_check(device: Device, degree: int, header: str, launches: int = 10) -> dict:
    """Capture span vs CUDA-event duration on the same launch.

    span_ns: first to last event of the launch (kernel_entry .. kernel_exit instants);
    mainloop_span_ns: first mainloop begin to last mainloop end."""
    from console.timeline.decode import decode
    from console.timeline.manifest import parse_dictionary, parse_manifest

    w = Workload(device, degree, probe_source(header))
    for _ in range(3):
        w.launch()
    expired_before = device.hold_expired
    rows = []
    for n in range(launches):
        w.relabel(1000 + n)
        ms = w.launch()
        cap = decode(w.buf.raw(), parse_manifest(w.manifest), parse_dictionary(DICTIONARY))
        ev = {key: np.asarray(column) for key, column in cap.events.items()}  # the columns are lists
        ts = ev["timestamp_ns"]
        loop = ts[ev["site"] == 1]
        span_ns = int(ts.max() - ts.min())
        event_ns = ms * 1e6
        rows.append({"launch_id": 1000 + n, "event_ns": event_ns, "span_ns": span_ns,
                     "mainloop_span_ns": int(loop.max() - loop.min()),
                     "diff_ns": event_ns - span_ns, "diff_percent": (event_ns - span_ns) / event_ns * 100,
                     "records": cap.committed_records})
    ok = all(abs(r["diff_ns"]) <= max(0.05 * r["event_ns"], 2000.0) for r in rows)
    return {"degree": degree, "launches": rows, "within_5pct_or_2us": ok,
            "max_abs_diff_percent": max(abs(r["diff_percent"]) for r in rows),
            "max_abs_diff_ns": max(abs(r["diff_ns"]) for r in rows),
            "hold_expired": device.hold_expired - expired_before}


def portable(value, work: Path):
    """The report without this machine's paths: the interpreter, the checkout and the work
    directory named generically (the measurement artifacts keep the real ones)."""
    if isinstance(value, dict):
        return {k: portable(v, work) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, work) for v in value]
    if isinstance(value, str):
        if value == sys.executable:
            return "python3"
        return value.replace(str(work), "<work-dir>").replace(str(ROOT) + os.sep, "")
    return value


def write_report(output: str, report: dict, *, complete: bool, started: float) -> None:
    """Rewritten after each stage (temp + rename), so a run cut short keeps what it measured."""
    report = dict(report, complete=complete, wall_seconds=time.monotonic() - started)
    text = json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"
    if output == "-":
        if complete:
            print(text, end="")
        return
    target = Path(output)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", action="store_true", help="one measure sample (used by measure)")
    parser.add_argument("--degree", type=int, default=64)
    parser.add_argument("--targets-us", default="1.3,3.7", help="iteration lengths measured with `measure`")
    parser.add_argument("--screen-targets-us", default="0.65,1.3,3.7", help="iteration lengths of the screen")
    parser.add_argument("--screen-rounds", type=int, default=40)
    parser.add_argument("--compare-header", action="append", default=[], metavar="NAME=PATH",
                        help="another probe header to include in the screen (repeatable)")
    parser.add_argument("--measure-probe", default="best",
                        help="probe `measure` and the span check run: shipped, a candidate's name, or best")
    parser.add_argument("--ci-width", type=float, default=1.0)
    parser.add_argument("--min-blocks", type=int, default=4)
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
    screen_targets = [float(t) for t in args.screen_targets_us.split(",")]
    device = Device()
    cal = calibrate(device, sorted(set(targets) | set(screen_targets)))
    headers: dict[str, str | None] = {"baseline": None, "shipped": shipped_header(), "naive": NAIVE_PROBE}
    headers.update({name: ablated_header(name) for name in ABLATIONS})
    header_paths = {"shipped": shipped_header_path()}
    for spec in args.compare_header:
        name, _, path = spec.partition("=")
        headers[name] = Path(path).read_text()
        header_paths[name] = Path(path).resolve()
    screened = screen(device, {t: cal["chosen"][t]["degree"] for t in screen_targets}, headers, args.screen_rounds)
    probe = args.measure_probe
    if probe == "best":  # lowest mean screen overhead at the lengths `measure` runs, among complete probes
        at = [f"{t:g}" for t in targets if t in screen_targets] or list(screened)
        probe = min(header_paths, key=lambda n: float(np.mean([screened[k][n]["overhead_percent"] for k in at])))
    if probe not in header_paths:
        raise SystemExit(f"--measure-probe {probe}: not shipped or one of {sorted(header_paths)}")
    span = span_check(device, cal["chosen"][targets[0]]["degree"], headers[probe])
    del device
    report = {"kernel": "stream_poly", "block": BLOCK, "iterations_per_launch": ITERS,
              "sites": ["mainloop (range)", "kernel_entry (instant)", "kernel_exit (instant)"],
              "density": "one begin/end pair per warp per main-loop iteration, plus one entry and one exit "
                         "instant per warp per launch",
              "timing": f"CUDA events around one launch queued behind a {HOLD_NS // 1000} us device-side hold; "
                        f"a timed unit is the mean of {MIX} launches at consecutive degrees",
              "measured_probe": probe, "calibration": cal, "screen": screened, "span_check": span, "sweep": []}
    write_report(args.output, report, complete=False, started=t0)
    print(json.dumps({"measured_probe": probe, "screen": screened, "span": {k: v for k, v in span.items() if k != "launches"}}), flush=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="timeline-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "stream_poly.cu"
    src.write_text(KERNEL)
    inst = work / "stream_poly.instrumented.cu"
    inst.write_text(probe_source(headers[probe]))
    for t in targets:
        degree = cal["chosen"][t]["degree"]
        cmd = [sys.executable, str(Path(__file__).resolve()), "--sample", "--degree", str(degree)]
        config = MeasureConfig(baseline_command=cmd, instrumented_command=cmd, baseline_source=str(src),
                               instrumented_source=str(inst), output=str(work / f"measure-{t:g}us.json"),
                               warmup=10, iterations=args.iterations, min_blocks=args.min_blocks,
                               max_blocks=args.max_blocks, ci_width=args.ci_width, target_percent=10.0,
                               env={"PYTHONPATH": str(ROOT), "ATREX_TIMELINE_PROBE_HEADER": str(header_paths[probe])})
        m = measure(config)
        report["sweep"].append({"target_us": t, "degrees": cal["chosen"][t]["degrees"],
                                "iteration_us": cal["chosen"][t]["iteration_us"],
                                "baseline_ms": m["baseline_ms"], "instrumented_ms": m["instrumented_ms"],
                                "overhead_percent": m["overhead_percent"], "interval": m["interval"],
                                "bootstrap_interval": m["bootstrap_interval"], "rank_test": m["rank_test"],
                                "blocks": m["blocks"], "stop_reason": m["stop_reason"], "measurement": portable(m, work)})
        write_report(args.output, report, complete=False, started=t0)
    write_report(args.output, report, complete=True, started=t0)
    if args.output != "-":
        print(json.dumps({"sweep": [{k: r[k] for k in ("target_us", "degrees", "iteration_us", "overhead_percent",
                                                       "interval", "blocks")} for r in report["sweep"]]},
                         default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
