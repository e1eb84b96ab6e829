"""Row softmax, a good version: one thread block per row, row held in registers.

- Each block owns one row; threads read it as float4 (16-byte, fully coalesced) and keep it
  in registers, so the row crosses DRAM once on the way in and once on the way out.
- Max and sum are block reductions: warp shuffles first, then one value per warp through
  shared memory.
- The number of float4 per thread (VPT) is a template parameter, chosen per row length so a
  block has at most 256 threads when that fits in 8 registers-worth of float4 per thread.
- Rows whose length is not a multiple of 4, or longer than 8 * 4 * 1024, take a generic
  path: an online (running max, rescaled sum) pass and a write pass over global memory.
- Rows shorter than a warp take one thread each: a block per row would be mostly idle.
"""

import cupy

_SOURCE = r"""
// NVRTC has no math.h: negative infinity spelled by its bits
#define NEG_INF __int_as_float(0xff800000)

template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

struct MaxOp { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct SumOp { __device__ float operator()(float a, float b) const { return a + b; } };

template <typename Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float identity, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_reduce(v, op);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = (threadIdx.x < warps) ? scratch[threadIdx.x] : identity;
    if (warp == 0) v = warp_reduce(v, op);
    if (threadIdx.x == 0) scratch[32] = v;
    __syncthreads();
    float result = scratch[32];
    __syncthreads();  // scratch is reused by the next reduction
    return result;
}

template <int VPT>
__global__ void row_softmax_regs(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float scratch[33];
    const int nvec = cols >> 2;
    const float4* xr = reinterpret_cast<const float4*>(x + (long long)blockIdx.x * cols);
    float4* yr = reinterpret_cast<float4*>(y + (long long)blockIdx.x * cols);
    float4 v[VPT];
    float m = NEG_INF;
    #pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int idx = threadIdx.x + i * blockDim.x;
        v[i] = idx < nvec ? __ldg(xr + idx) : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    m = block_reduce(m, MaxOp(), NEG_INF, scratch);
    float s = 0.0f;
    #pragma unroll
    for (int i = 0; i < VPT; ++i) {
        v[i].x = __expf(v[i].x - m); v[i].y = __expf(v[i].y - m);
        v[i].z = __expf(v[i].z - m); v[i].w = __expf(v[i].w - m);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    s = block_reduce(s, SumOp(), 0.0f, scratch);
    const float inv = 1.0f / s;
    #pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int idx = threadIdx.x + i * blockDim.x;
        if (idx < nvec) yr[idx] = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
    }
}

__global__ void row_softmax_online(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float scratch[33];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = NEG_INF, s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c];
        if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; } else { s += __expf(v - m); }
    }
    const float row_max = block_reduce(m, MaxOp(), NEG_INF, scratch);
    s = (m == NEG_INF) ? 0.0f : s * __expf(m - row_max);
    const float inv = 1.0f / block_reduce(s, SumOp(), 0.0f, scratch);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - row_max) * inv;
}

__global__ void row_softmax_short(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float m = NEG_INF;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += __expf(xr[c] - m);
    const float inv = 1.0f / s;
    for (int c = 0; c < cols; ++c) yr[c] = __expf(xr[c] - m) * inv;
}
"""

_VPTS = (1, 2, 4, 8)
_module = cupy.RawModule(
    code=_SOURCE,
    options=("-std=c++17",),
    name_expressions=[f"row_softmax_regs<{v}>" for v in _VPTS] + ["row_softmax_online", "row_softmax_short"],
)


def _plan(cols):
    """(kernel, threads) for one row length."""
    if cols % 4 == 0:
        nvec = cols // 4
        for limit in (256, 1024):
            for vpt in _VPTS:
                threads = -(-nvec // vpt)
                if threads <= limit:
                    threads = max(32, -(-threads // 32) * 32)
                    return _module.get_function(f"row_softmax_regs<{vpt}>"), threads
    return _module.get_function("row_softmax_online"), 512


def kernel(x):
    x = cupy.ascontiguousarray(x, dtype=cupy.float32)
    rows, cols = x.shape
    y = cupy.empty_like(x)
    if cols < 32:
        short = _module.get_function("row_softmax_short")
        short((-(-rows // 256),), (256,), (x, y, cupy.int32(rows), cupy.int32(cols)))
        return y
    function, threads = _plan(cols)
    function((rows,), (threads,), (x, y, cupy.int32(cols)))
    return y
