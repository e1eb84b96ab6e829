"""The block bootstrap: resample whole blocks of an A/B schedule."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .intervals import Interval


def bootstrap_blocks(
    blocks_a: np.ndarray,
    blocks_b: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap resampling whole blocks (rows) with replacement.

    ``blocks_a``/``blocks_b`` are (blocks, samples per block) arrays; ``statistic`` maps
    (resamples, values) arrays of a and b to one value per resample. Resampling blocks, not
    samples, keeps the drift that a block shares in every resample. The seed is fixed so
    the interval can be recomputed bit for bit.
    """
    a = np.asarray(blocks_a, dtype=np.float64)
    b = np.asarray(blocks_b, dtype=np.float64)
    nblocks = a.shape[0]
    estimate = float(statistic(a.reshape(1, -1), b.reshape(1, -1))[0])
    if nblocks < 2:
        return Interval("bootstrap_blocks", estimate, None, None, confidence, None)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, nblocks, size=(resamples, nblocks))
    values = statistic(a[pick].reshape(resamples, -1), b[pick].reshape(resamples, -1))
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return Interval("bootstrap_blocks", estimate, float(low), float(high), confidence, confidence)
