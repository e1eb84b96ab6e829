"""RMSNorm, the starting point: one thread per row, two passes over global memory.

Deliberately slow: neighbouring threads of a warp read addresses a whole row apart (no
coalescing), every element is read twice, and a shape with few rows leaves most of the GPU idle.
"""

import cupy

_SOURCE = r"""
extern "C" __global__ void rms_norm_naive(const float* x, const float* w, float* y, int rows, int cols, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += xr[c] * xr[c];
    const float inv = rsqrtf(s / cols + eps);
    for (int c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
}
"""

_kernel = cupy.RawKernel(_SOURCE, "rms_norm_naive")
_THREADS = 256
EPS = 1e-6


def kernel(x, w):
    x = cupy.ascontiguousarray(x, dtype=cupy.float32)
    w = cupy.ascontiguousarray(w, dtype=cupy.float32)
    rows, cols = x.shape
    y = cupy.empty_like(x)
    blocks = (rows + _THREADS - 1) // _THREADS
    _kernel((blocks,), (_THREADS,), (x, w, y, cupy.int32(rows), cupy.int32(cols), cupy.float32(EPS)))
    return y
