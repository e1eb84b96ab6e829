"""Ground truth for row_softmax_f32: softmax over the last axis, computed stably.

Works on cupy and numpy arrays alike (the array module follows the input). Accumulation is
done in float64 so the reference is more accurate than any float32 kernel it judges.

``check`` is the evaluator's extra test of a kernel's output: every row is a probability
distribution (finite, non-negative, summing to 1 within ``ROW_SUM_TOLERANCE``).
"""

ROW_SUM_TOLERANCE = 1e-4


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


def check(y, x):
    """None when every row of ``y`` is a probability distribution, else what is wrong."""
    xp = _array_module(y)
    wide = y.astype(xp.float64)
    if not bool(xp.isfinite(wide).all()):
        return "output has non-finite values"
    if bool((wide < 0).any()):
        return "output has negative values"
    sums = wide.sum(axis=-1)
    worst = int(xp.abs(sums - 1.0).argmax()) if sums.size else 0
    if sums.size and abs(float(sums[worst]) - 1.0) > ROW_SUM_TOLERANCE:
        return f"row {worst} sums to {float(sums[worst]):.7g}, not 1 (tolerance {ROW_SUM_TOLERANCE:g})"
    return None
