"""Small CuPy kernels, each built to show one Nsight Compute diagnosis pattern.

Run one case per process (`python3 cases.py --case copy`, or NCU_PATTERN_CASE=copy) under
tools/profile_nvidia.sh; `--regex CASE` prints the kernel-name regex that selects the
kernel the case is about (set-up kernels such as fills also run and must be filtered out).
Every case warms up once, then launches its kernel LAUNCHES times, so `--launch-skip 1
--launch-count 1` profiles one warm launch.

Sizes are small on purpose: ncu replays each profiled launch dozens of times.
"""

from __future__ import annotations

import argparse
import os
import sys

LAUNCHES = 2

SOURCE = r"""
extern "C" __global__ void copy_f32(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = x[i];
    }
}

// Neighbouring threads read words `stride` floats apart: every load request touches
// 32 different sectors instead of 4.
extern "C" __global__ void strided_load(const float* __restrict__ x, float* __restrict__ y,
                                        long long n, long long stride) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[(i * stride) % n];
    }
}

// A 32x32 tile without padding read along a column: the 32 lanes of a warp all hit
// one shared-memory bank.
extern "C" __global__ void smem_column_read(const float* __restrict__ x, float* __restrict__ y, int reps) {
    __shared__ float tile[32][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    long long base = (long long)blockIdx.x * 1024;
    tile[ty][tx] = x[base + ty * 32 + tx];
    __syncthreads();
    float acc = 0.0f;
    for (int r = 0; r < reps; ++r) {
        acc += tile[tx][(ty + r) & 31];
    }
    y[base + ty * 32 + tx] = acc;
}

// A per-thread array indexed with run-time values cannot live in registers: it goes to
// local memory (the same traffic a register spill makes).
extern "C" __global__ void local_array(const float* __restrict__ x, float* __restrict__ y, long long n) {
    float buf[128];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int k = 0; k < 128; ++k) {
        buf[k] = v * (float)k;
    }
    float acc = 0.0f;
    int j = (int)(i & 127);
    for (int k = 0; k < 512; ++k) {
        j = (j * 13 + 7) & 127;
        acc += buf[j];
    }
    y[i] = acc;
}

__device__ __forceinline__ float fma_chain(float seed, int iters) {
    float a0 = seed, a1 = seed + 1.0f, a2 = seed + 2.0f, a3 = seed + 3.0f;
    float a4 = seed + 4.0f, a5 = seed + 5.0f, a6 = seed + 6.0f, a7 = seed + 7.0f;
    for (int k = 0; k < iters; ++k) {
        a0 = fmaf(a0, 0.9999f, 0.5f); a1 = fmaf(a1, 0.9999f, 0.5f);
        a2 = fmaf(a2, 0.9999f, 0.5f); a3 = fmaf(a3, 0.9999f, 0.5f);
        a4 = fmaf(a4, 0.9999f, 0.5f); a5 = fmaf(a5, 0.9999f, 0.5f);
        a6 = fmaf(a6, 0.9999f, 0.5f); a7 = fmaf(a7, 0.9999f, 0.5f);
    }
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

extern "C" __global__ void __launch_bounds__(256, 8) fma_heavy(float* __restrict__ y, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = fma_chain((float)(i & 1023), iters);
}

extern "C" __global__ void __launch_bounds__(256, 8) fma_small_grid(float* __restrict__ y, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = fma_chain((float)(i & 1023), iters);
}

extern "C" __global__ void __launch_bounds__(256, 8) fma_tail(float* __restrict__ y, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = fma_chain((float)(i & 1023), iters);
}

// Lane 0 of every warp runs the whole FMA chain, the other 31 lanes a thirty-second of it:
// the SM stays busy issuing instructions for one active thread.
extern "C" __global__ void __launch_bounds__(256, 8) divergent_lanes(float* __restrict__ y, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int mine = (threadIdx.x & 31) == 0 ? iters : iters / 32;
    y[i] = fma_chain((float)(i & 1023), mine);
}

// The FMA chain in double precision: the fp64 pipe is the limit (a float kernel that slipped
// a double literal into its inner loop looks the same).
extern "C" __global__ void __launch_bounds__(256, 8) fp64_heavy(double* __restrict__ y, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double a0 = (double)(i & 1023), a1 = a0 + 1.0, a2 = a0 + 2.0, a3 = a0 + 3.0;
    for (int k = 0; k < iters; ++k) {
        a0 = fma(a0, 0.9999, 0.5); a1 = fma(a1, 0.9999, 0.5);
        a2 = fma(a2, 0.9999, 0.5); a3 = fma(a3, 0.9999, 0.5);
    }
    y[i] = a0 + a1 + a2 + a3;
}

// A 16-bin histogram with one global atomicAdd per element: every warp fights over the
// same few addresses.
extern "C" __global__ void histogram_atomics(const unsigned int* __restrict__ x, unsigned int* __restrict__ bins,
                                             long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&bins[x[i] & 15u], 1u);
    }
}
"""

# case -> (kernel-name regex for ncu, what it shows)
CASES = {
    "copy": ("^copy_f32$", "memory-bound streaming copy (_mem)"),
    "strided": ("^strided_load$", "uncoalesced strided loads (C)"),
    "bank_conflict": ("^smem_column_read$", "32-way shared-memory bank conflicts (H)"),
    "local_array": ("^local_array$", "local-memory traffic like a register spill (K)"),
    "small_grid": ("^fma_small_grid$", "16 blocks on a 132-SM GPU (A)"),
    "tail": ("^fma_tail$", "1.1 waves: the second wave leaves most SMs idle (B)"),
    "fma": ("^fma_heavy$", "fp32 FMA-bound without tensor cores (F)"),
    "divergent": ("^divergent_lanes$", "one active lane per warp does the work (N)"),
    "fp64": ("^fp64_heavy$", "double-precision FMA chain: the fp64 pipe is the limit (L)"),
    "histogram": ("^histogram_atomics$", "16-bin histogram of global atomics (G)"),
    # cuBLAS fp16 GEMM on tensor cores: the kernel that should show no pattern.
    "good": ("gemm|xmma|cutlass|sm90", "fp16 tensor-core GEMM (no pattern expected)"),
}


def _module():
    import cupy as cp

    return cp.RawModule(code=SOURCE, options=("-lineinfo", "-std=c++17"))


def run_case(case: str) -> None:
    import cupy as cp

    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    if case == "good":
        a = cp.ones((4096, 4096), dtype=cp.float16)
        b = cp.ones((4096, 4096), dtype=cp.float16)
        for _ in range(1 + LAUNCHES):
            c = a @ b
        cp.cuda.Device().synchronize()
        assert float(c[0, 0]) == 4096.0
        return
    mod = _module()
    launches = []
    if case == "copy":
        n = 32 * 1024 * 1024
        x, y = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
        launches.append((mod.get_function("copy_f32"), (sms * 16,), (256,), (x, y, cp.int64(n))))
    elif case == "strided":
        n = 8 * 1024 * 1024
        x, y = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
        launches.append((mod.get_function("strided_load"), (n // 256,), (256,), (x, y, cp.int64(n), cp.int64(33))))
    elif case == "bank_conflict":
        blocks = sms * 16
        x = cp.ones(blocks * 1024, dtype=cp.float32)
        y = cp.empty_like(x)
        launches.append((mod.get_function("smem_column_read"), (blocks,), (32, 32), (x, y, cp.int32(256))))
    elif case == "local_array":
        n = sms * 2048 * 4
        x, y = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
        launches.append((mod.get_function("local_array"), (n // 256,), (256,), (x, y, cp.int64(n))))
    elif case in ("small_grid", "tail", "fma"):
        name = {"small_grid": "fma_small_grid", "tail": "fma_tail", "fma": "fma_heavy"}[case]
        wave = sms * 8  # __launch_bounds__(256, 8): eight resident blocks per SM
        blocks = {"small_grid": 16, "tail": wave + wave // 10, "fma": wave * 8}[case]
        y = cp.empty(blocks * 256, dtype=cp.float32)
        launches.append((mod.get_function(name), (blocks,), (256,), (y, cp.int32(2048))))
    elif case == "divergent":
        blocks = sms * 8 * 4
        y = cp.empty(blocks * 256, dtype=cp.float32)
        launches.append((mod.get_function("divergent_lanes"), (blocks,), (256,), (y, cp.int32(2048))))
    elif case == "fp64":
        blocks = sms * 8 * 2
        y = cp.empty(blocks * 256, dtype=cp.float64)
        launches.append((mod.get_function("fp64_heavy"), (blocks,), (256,), (y, cp.int32(1024))))
    elif case == "histogram":
        n = 16 * 1024 * 1024
        x = cp.arange(n, dtype=cp.uint32)
        bins = cp.zeros(16, dtype=cp.uint32)
        launches.append((mod.get_function("histogram_atomics"), (sms * 8,), (256,), (x, bins, cp.int64(n))))
    else:
        raise SystemExit(f"cases.py: unknown case {case!r} (one of {', '.join(CASES)})")
    for _ in range(1 + LAUNCHES):
        for fn, grid, block, args in launches:
            fn(grid, block, args)
    cp.cuda.Device().synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default=os.environ.get("NCU_PATTERN_CASE"), choices=sorted(CASES))
    parser.add_argument("--regex", metavar="CASE", choices=sorted(CASES), help="print the case's kernel regex")
    parser.add_argument("--list", action="store_true", help="print the cases")
    args = parser.parse_args(argv)
    if args.regex:
        print(CASES[args.regex][0])
        return 0
    if args.list or not args.case:
        for name, (regex, what) in CASES.items():
            print(f"{name}\t{regex}\t{what}")
        return 0 if args.list else 2
    run_case(args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
