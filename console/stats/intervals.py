"""Confidence intervals: Hodges-Lehmann shift with its exact interval, block bootstrap."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .ranks import EXACT_LIMIT, mann_whitney_counts


@dataclass(frozen=True, slots=True)
class Interval:
    method: str
    estimate: float
    low: float | None  # None: too few samples for the requested confidence
    high: float | None
    confidence: float  # requested
    coverage: float | None  # achieved (exact methods), else the requested one

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low

    def to_json(self) -> dict:
        return {"method": self.method, "estimate": self.estimate, "low": self.low,
                "high": self.high, "confidence": self.confidence, "coverage": self.coverage,
                "width": self.width}


def hodges_lehmann_rank(m: int, n: int, confidence: float) -> tuple[int, float] | None:
    """The order statistic k (1-based) of the m*n pairwise differences bounding the interval.

    The interval is [d_(k), d_(mn+1-k)] with k the largest integer for which
    P(U <= k-1) <= (1-confidence)/2 under the null; its coverage is 1 - 2 P(U <= k-1).
    None when even k = 1 would exceed the allowed tail (too few samples).
    """
    alpha2 = (1.0 - confidence) / 2.0
    mn = m * n
    if mn <= EXACT_LIMIT:
        counts = mann_whitney_counts(min(m, n), max(m, n))
        total = sum(counts)
        cum = 0
        k = 0
        for u, c in enumerate(counts):
            if (cum + c) / total > alpha2:
                break
            cum += c
            k = u + 1
        if k == 0:
            return None
        return k, 1.0 - 2.0 * cum / total
    z = _normal_quantile(1.0 - alpha2)
    k = int(math.floor(mn / 2.0 - z * math.sqrt(mn * (m + n + 1) / 12.0)))
    if k < 1:
        return None
    return k, confidence


def _normal_quantile(p: float) -> float:
    """Inverse standard normal CDF by bisection on erfc (plenty for interval bounds)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def hodges_lehmann(x, y, confidence: float = 0.95) -> Interval:
    """Shift of y relative to x: median of all y_j - x_i, with its distribution-free interval."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples need at least one value")
    diffs = np.sort((y[None, :] - x[:, None]).ravel())
    estimate = float(np.median(diffs))
    rank = hodges_lehmann_rank(x.size, y.size, confidence)
    if rank is None:
        return Interval("hodges_lehmann_exact", estimate, None, None, confidence, None)
    k, coverage = rank
    method = "hodges_lehmann_exact" if x.size * y.size <= EXACT_LIMIT else "hodges_lehmann_normal"
    return Interval(method, estimate, float(diffs[k - 1]), float(diffs[diffs.size - k]), confidence, coverage)


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
