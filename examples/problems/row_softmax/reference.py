"""Ground truth for row_softmax_f32: softmax over the last axis, computed stably.

Works on cupy and numpy arrays alike (the array module follows the input). Accumulation is
done in float64 so the reference is more accurate than any float32 kernel it judges.
"""


def _array_module(x):
    try:
        import cupy

        return cupy.get_array_module(x)
    except ImportError:
        import numpy

        return numpy


def reference(x):
    xp = _array_module(x)
    wide = x.astype(xp.float64)
    shifted = wide - wide.max(axis=-1, keepdims=True)
    e = xp.exp(shifted)
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)
