"""Elementwise add in CuTe DSL with IKeT marks and ranges.

    python3 examples/iket/elementwise_add.py            # plain run: IKeT ops are stripped at JIT time
    run-iket profile ... -- python3 examples/iket/elementwise_add.py   # IKeT ops kept and recorded

Each warp records a `load` range around its global loads, a `loaded` mark, and a `store`
range around its global store. The process prints exactly one timing sample line
(``__ATREX_TIMELINE_SAMPLE__=``) so `timeline.py measure` can compare it with and without the
profiler; ATREX_TIMELINE_WARMUP / ATREX_TIMELINE_ITERATIONS set the launch counts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.experimental import iket
from cutlass.cute.runtime import from_dlpack

M = int(os.environ.get("IKET_EXAMPLE_ROWS", "32"))
N = 1024
THREADS_PER_BLOCK = 256  # 8 warps a CTA; M * N / 256 CTAs (128 by default, one wave on an H200)
WORKLOAD_IDENTITY = f"elementwise_add:fp32:{M}x{N}:block{THREADS_PER_BLOCK}"


@cute.kernel
def add_kernel(g_a: cute.Tensor, g_b: cute.Tensor, g_c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    linear = bidx * bdim + tidx
    _, n = g_a.shape
    row = linear // n
    col = linear % n

    load = iket.range_start("load")
    a = g_a[row, col]
    b = g_b[row, col]
    iket.range_end(load)
    iket.mark("loaded")

    store = iket.range_start("store")
    g_c[row, col] = a + b
    iket.range_end(store)


@cute.jit
def add(m_a: cute.Tensor, m_b: cute.Tensor, m_c: cute.Tensor):
    m, n = m_a.shape
    add_kernel(m_a, m_b, m_c).launch(
        grid=((m * n) // THREADS_PER_BLOCK, 1, 1), block=(THREADS_PER_BLOCK, 1, 1))


def main() -> int:
    warmup = int(os.environ.get("ATREX_TIMELINE_WARMUP", "10"))
    iterations = int(os.environ.get("ATREX_TIMELINE_ITERATIONS", "100"))
    torch.manual_seed(0)
    a = torch.randn(M, N, device="cuda", dtype=torch.float32)
    b = torch.randn(M, N, device="cuda", dtype=torch.float32)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    ta, tb, tc = (from_dlpack(t, assumed_align=16) for t in (a, b, c))
    compiled = cute.compile(add, ta, tb, tc)

    for _ in range(warmup):
        compiled(ta, tb, tc)
    torch.cuda.synchronize()

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        compiled(ta, tb, tc)
    stop.record()
    torch.cuda.synchronize()
    correct = torch.equal(c, a + b)

    sample = {
        "latency_ms": start.elapsed_time(stop) / iterations,
        "correctness": "passed" if correct else "failed",
        "synchronized": True,
        "workload_identity": WORKLOAD_IDENTITY,
        "device_identity": {"uuid": str(torch.cuda.get_device_properties(0).uuid),
                            "name": torch.cuda.get_device_name(0)},
        "warmup": warmup,
        "iterations": iterations,
        "cutlass_dsl": getattr(cutlass, "__version__", None),
    }
    # run-iket runs the workload twice (a tracker pass, then the profiled pass); only the
    # profiled pass reports, so a process under run-iket prints exactly one sample.
    if Path(os.environ.get("IKET_INJECTION_CONFIG", "")).parent.name != "tracker":
        print("__ATREX_TIMELINE_SAMPLE__=" + json.dumps(sample, sort_keys=True), flush=True)
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
