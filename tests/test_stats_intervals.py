"""Hodges-Lehmann exact interval and the block bootstrap, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from console.stats.bootstrap import bootstrap_blocks
from console.stats.intervals import hodges_lehmann, hodges_lehmann_rank


def test_rank_for_four_by_four():
    # P(U <= 0) = 1/70 <= 0.025 < P(U <= 1) = 2/70: k = 1, coverage 1 - 2/70
    k, coverage = hodges_lehmann_rank(4, 4, 0.95)
    assert k == 1 and coverage == pytest.approx(1 - 2 / 70)
    assert hodges_lehmann_rank(2, 2, 0.95) is None  # 1/6 > 0.025: no finite interval


def test_hodges_lehmann_by_hand():
    x = [1.0, 2.0, 3.0, 4.0]
    y = [3.0, 4.0, 5.0, 6.0]
    iv = hodges_lehmann(x, y)
    # differences y_j - x_i run from -1 to 5; median of the 16 is 2
    assert iv.estimate == 2.0
    assert (iv.low, iv.high) == (-1.0, 5.0)
    assert iv.width == 6.0
    small = hodges_lehmann([1.0, 2.0], [3.0, 4.0])
    assert small.low is None and small.estimate == 2.0


def test_interval_narrows_with_samples():
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, 40)
    y = rng.normal(0.5, 1, 40)
    iv = hodges_lehmann(x, y)
    assert iv.low < iv.estimate < iv.high
    assert iv.width < hodges_lehmann(x[:8], y[:8]).width
    assert iv.method == "hodges_lehmann_exact"
    big = hodges_lehmann(rng.normal(0, 1, 80), rng.normal(0, 1, 80))
    assert big.method == "hodges_lehmann_normal" and big.low < big.high


def _ratio(a, b):
    return (np.median(b, axis=1) / np.median(a, axis=1) - 1) * 100


def test_block_bootstrap_is_deterministic_and_brackets():
    a = np.array([[1.00, 1.01], [1.02, 0.99], [1.00, 1.00], [0.98, 1.01]])
    b = a * 1.05
    one = bootstrap_blocks(a, b, _ratio)
    two = bootstrap_blocks(a, b, _ratio)
    assert one == two
    assert one.estimate == pytest.approx(5.0)
    assert one.low == pytest.approx(5.0) and one.high == pytest.approx(5.0)
    noisy = bootstrap_blocks(a, a * np.array([[1.04, 1.06], [1.05, 1.02], [1.07, 1.05], [1.03, 1.06]]), _ratio)
    assert noisy.low <= noisy.estimate <= noisy.high
    assert bootstrap_blocks(a[:1], b[:1], _ratio).low is None
