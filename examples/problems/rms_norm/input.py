"""Inputs of rms_norm_f32: a float32 matrix and a float32 weight vector per workload and seed.

Each row of ``x`` is N(0, 1) times a row scale drawn log-uniformly from [1e-3, 1e3]; row 0's
scale is 1e-3, where ``eps`` (1e-6) is as large as the row's mean square, so leaving it out
fails on every shape. ``w`` is N(1, 0.5^2): a kernel that ignores the weight fails too.
"""

FIRST_ROW_SCALE = 1e-3


def make_rows_and_weight(xp, rows, cols, seed):
    """(x, w) for one workload and seed, built with array module ``xp`` (cupy or numpy)."""
    rng = xp.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=xp.float32)
    scales = (10.0 ** rng.uniform(-3.0, 3.0, size=(rows, 1))).astype(xp.float32)
    scales[0, 0] = FIRST_ROW_SCALE
    x *= scales
    w = (1.0 + 0.5 * rng.standard_normal(cols, dtype=xp.float32)).astype(xp.float32)
    return x, w


def make_inputs(axes, seed):
    import cupy

    return make_rows_and_weight(cupy, int(axes["rows"]), int(axes["cols"]), seed)
