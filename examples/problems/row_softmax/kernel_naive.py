"""Row softmax, the starting point: one thread per row, three passes over global memory.

Deliberately slow: neighbouring threads of a warp read addresses a whole row apart (no
coalescing), every element is read three times, and a shape with few rows leaves most of
the GPU idle.
"""

import cupy

_SOURCE = r"""
// NVRTC has no math.h: negative infinity spelled by its bits
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void row_softmax_naive(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float m = NEG_INF;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) / s;
}
"""

_kernel = cupy.RawKernel(_SOURCE, "row_softmax_naive")
_THREADS = 256


def kernel(x):
    x = cupy.ascontiguousarray(x, dtype=cupy.float32)
    rows, cols = x.shape
    y = cupy.empty_like(x)
    blocks = (rows + _THREADS - 1) // _THREADS
    _kernel((blocks,), (_THREADS,), (x, y, cupy.int32(rows), cupy.int32(cols)))
    return y
