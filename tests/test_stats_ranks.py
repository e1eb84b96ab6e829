"""Rank tests against hand-checked small cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.stats.ranks import (
    mann_whitney,
    mann_whitney_counts,
    rank_average,
)


def test_mann_whitney_counts_by_hand():
    # m=n=2: orderings xxyy(U=4)... U values 0,1,2,2,3,4 over the C(4,2)=6 orderings
    assert mann_whitney_counts(2, 2) == (1, 1, 2, 1, 1)
    assert mann_whitney_counts(1, 3) == (1, 1, 1, 1)
    assert sum(mann_whitney_counts(4, 4)) == 70
    assert sum(mann_whitney_counts(5, 7)) == math.comb(12, 5)
    c = mann_whitney_counts(4, 6)
    assert c == c[::-1]


def test_mann_whitney_complete_separation_exact():
    t = mann_whitney([1, 2, 3, 4], [5, 6, 7, 8])
    assert t.method == "mann_whitney_exact"
    assert t.statistic == 16.0
    assert t.p_value == pytest.approx(2 / 70)
    assert mann_whitney([5, 6, 7, 8], [1, 2, 3, 4]).p_value == pytest.approx(2 / 70)


def test_mann_whitney_interleaved_is_not_significant():
    t = mann_whitney([1, 3, 5, 7], [2, 4, 6, 8])
    assert t.statistic == 10.0
    assert t.p_value > 0.5


def test_mann_whitney_ties_use_normal_approximation():
    t = mann_whitney([1, 1, 2, 2], [2, 3, 3, 3])
    assert t.method == "mann_whitney_normal"
    assert 0 < t.p_value < 1


def test_rank_average_ties():
    assert rank_average(np.array([10.0, 20.0, 20.0, 5.0])).tolist() == [2.0, 3.5, 3.5, 1.0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=8, unique=True),
       st.lists(st.integers(51, 100), min_size=1, max_size=8, unique=True))
def test_exact_p_matches_enumeration_bound(x, y):
    # complete separation: the exact p is 2 / C(m+n, m)
    t = mann_whitney(x, y)
    assert t.p_value == pytest.approx(min(1.0, 2 / math.comb(len(x) + len(y), len(x))))
