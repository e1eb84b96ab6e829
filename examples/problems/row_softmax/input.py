"""Inputs of row_softmax_f32: one float32 matrix of logits per workload and seed.

Every element matters: each row is ``offset + N(0, 1)``, so within a row the logits span about
ten units and every probability lies within a factor of e^10 of the row's largest. With the
problem's tolerance (relative to each value, see ``definition.json``) a wrong value anywhere in
a row fails, however small it is.

The per-row offsets are uniform in [-120, 120] and row 0's is +100: ``exp()`` of such logits
overflows (or underflows) in float32, so a softmax without the max shift yields inf/NaN on every
shape, including one-row shapes.
"""

OFFSET_RANGE = 120.0
FIRST_ROW_OFFSET = 100.0


def make_logits(xp, rows, cols, seed):
    """The logits for one workload and seed, built with array module ``xp`` (cupy or numpy)."""
    rng = xp.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=xp.float32)
    offsets = rng.uniform(-OFFSET_RANGE, OFFSET_RANGE, size=(rows, 1)).astype(xp.float32)
    offsets[0, 0] = FIRST_ROW_OFFSET
    x += offsets
    return x


def make_inputs(axes, seed):
    import cupy

    return (make_logits(cupy, int(axes["rows"]), int(axes["cols"]), seed),)
