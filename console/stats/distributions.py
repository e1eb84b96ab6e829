"""Exact null distributions of the rank statistics, built with Python integers.

Standard library only: the headless status computes ABBA intervals from these and must not
pay numpy's import.
"""

from __future__ import annotations

from functools import lru_cache

EXACT_LIMIT = 2500  # largest m*n for which the exact distribution is built


@lru_cache(maxsize=64)
def mann_whitney_counts(m: int, n: int) -> tuple[int, ...]:
    """Number of orderings of m x's and n y's with U = 0..m*n (no ties).

    These are the coefficients of the Gaussian binomial [m+n choose m]_q, built as the
    product over i of (1 - q^(n+i)) / (1 - q^i); every partial product is a polynomial.
    """
    size = m * n + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        a = n + i
        for k in range(size - 1, a - 1, -1):
            c[k] -= c[k - a]
        for k in range(i, size):
            c[k] += c[k - i]
    return tuple(c)


def cdf(counts: tuple[int, ...], k: int) -> float:
    """P(S <= k) for the exact distribution given by ``counts``."""
    if k < 0:
        return 0.0
    return sum(counts[: k + 1]) / sum(counts)
