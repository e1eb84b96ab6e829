"""The Mann-Whitney U test (exact when small and tie-free)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .distributions import EXACT_LIMIT, cdf, mann_whitney_counts


@dataclass(frozen=True, slots=True)
class RankTest:
    method: str  # "mann_whitney_exact" | "mann_whitney_normal"
    statistic: float
    p_value: float

    def to_json(self) -> dict:
        return {"method": self.method, "statistic": self.statistic, "p_value": self.p_value}


def rank_average(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given the average of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size, dtype=np.float64)
    sorted_vals = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_vals[1:] != sorted_vals[:-1]])
    ends = np.r_[starts[1:], values.size]
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def _tie_term(values: np.ndarray) -> float:
    _, counts = np.unique(values, return_counts=True)
    return float(((counts ** 3) - counts).sum())


def _normal_two_sided(z: float) -> float:
    return min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))


def mann_whitney(x, y) -> RankTest:
    """Two-sided Mann-Whitney test of x vs y; statistic U = #(y_j > x_i) + ties/2."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    m, n = x.size, y.size
    if m == 0 or n == 0:
        raise ValueError("both samples need at least one value")
    both = np.concatenate([x, y])
    ranks = rank_average(both)
    u = float(ranks[m:].sum() - n * (n + 1) / 2.0)
    ties = _tie_term(both)
    if ties == 0 and m * n <= EXACT_LIMIT:
        counts = mann_whitney_counts(min(m, n), max(m, n))
        k = int(round(u))
        p = 2.0 * min(cdf(counts, k), 1.0 - cdf(counts, k - 1))
        return RankTest("mann_whitney_exact", u, min(1.0, p))
    mean = m * n / 2.0
    var = m * n / 12.0 * ((m + n + 1) - ties / ((m + n) * (m + n - 1)))
    if var <= 0:
        return RankTest("mann_whitney_normal", u, 1.0)
    z = (abs(u - mean) - 0.5) / math.sqrt(var)  # continuity correction
    return RankTest("mann_whitney_normal", u, _normal_two_sided(max(z, 0.0)))
