"""The Hodges-Lehmann shift with its exact distribution-free interval.

Standard library only, so the headless status can state an ABBA interval without importing
numpy; the samples it sees are a few dozen runs a side.
"""

import math
from collections.abc import Iterable
from statistics import median
from typing import NamedTuple

from .distributions import EXACT_LIMIT, mann_whitney_counts


class Interval(NamedTuple):
    method: str
    estimate: float
    low: float | None  # None: too few samples for the requested confidence
    high: float | None
    confidence: float  # requested
    coverage: float | None  # achieved (exact methods), else the requested one

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low


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


def hodges_lehmann(x: Iterable[float], y: Iterable[float], confidence: float = 0.95) -> Interval:
    """Shift of y relative to x: median of all y_j - x_i, with its distribution-free interval."""
    xs = [float(v) for v in x]
    ys = [float(v) for v in y]
    if not xs or not ys:
        raise ValueError("both samples need at least one value")
    diffs = sorted(b - a for a in xs for b in ys)
    estimate = float(median(diffs))
    rank = hodges_lehmann_rank(len(xs), len(ys), confidence)
    if rank is None:
        return Interval("hodges_lehmann_exact", estimate, None, None, confidence, None)
    k, coverage = rank
    method = "hodges_lehmann_exact" if len(diffs) <= EXACT_LIMIT else "hodges_lehmann_normal"
    return Interval(method, estimate, diffs[k - 1], diffs[len(diffs) - k], confidence, coverage)
