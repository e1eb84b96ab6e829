"""One latency comparison: the ratio b/a of two samples with a distribution-free interval.

The point estimate is the ratio of the sides' centres: the geometric mean for an ABBA
verification (the promotion gate scores the geometric means, FORMATS §7) or the median for
a timeline overhead measurement (the measurement's own definition). The interval is the
Hodges-Lehmann interval of the shift in log latency, mapped back to a ratio. One ABBA
schedule gives two runs a side, too few for 95%; the widest interval those runs allow is
then given with its exact coverage, and the label says so. The result is a frozen
``msgspec.Struct``, as is the state that holds it (status prints it as an object).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

import msgspec

from .intervals import hodges_lehmann

CONFIDENCE = 0.95
INTERVAL_METHOD = "Hodges-Lehmann on log latency"


class Ratio(msgspec.Struct, frozen=True):
    center: str  # "geomean" | "median": how each side is summarised
    estimate: float | None  # centre(b) / centre(a); None without a positive sample on both sides
    low: float | None  # None: too few samples for any interval
    high: float | None
    coverage: float | None  # the interval's exact coverage (below ``confidence`` when samples are few)
    confidence: float  # the coverage asked for
    n_a: int
    n_b: int
    method: str
    lines: tuple[str, ...]  # what a person reads, in short lines: estimate; interval and counts; caveat
    label: str  # the same on one line


def centre(values: Sequence[float], center: str) -> float | None:
    """The geometric mean or the median of positive latencies (None if any is not positive)."""
    if not values or min(values) <= 0:
        return None
    if center == "median":
        return float(median(values))
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def latency_ratio(a: Sequence[float], b: Sequence[float], *, center: str = "geomean", names: str = "b/a",
                  confidence: float = CONFIDENCE) -> Ratio:
    """``b`` relative to ``a`` (latencies): the ratio of centres with its interval."""
    estimate = None
    centre_a, centre_b = centre(a, center), centre(b, center)
    if centre_a is not None and centre_b is not None:
        estimate = centre_b / centre_a
    low = high = coverage = None
    if estimate is not None:
        log_a, log_b = [math.log(v) for v in a], [math.log(v) for v in b]
        interval = hodges_lehmann(log_a, log_b, confidence)
        if interval.low is None and len(a) >= 2 and len(b) >= 2:
            widest = 1.0 - 2.0 / math.comb(len(a) + len(b), len(a))
            interval = hodges_lehmann(log_a, log_b, widest - 1e-9)  # a hair under: k = 1 despite rounding
        if interval.low is not None and interval.high is not None:
            low, high, coverage = math.exp(interval.low), math.exp(interval.high), interval.coverage
    lines = _lines(names, center, estimate, low, high, coverage, confidence, len(a), len(b))
    return Ratio(center, estimate, low, high, coverage, confidence, len(a), len(b), INTERVAL_METHOD, lines,
                 " ".join(lines))


def _lines(names: str, center: str, estimate: float | None, low: float | None, high: float | None,
           coverage: float | None, confidence: float, n_a: int, n_b: int) -> tuple[str, ...]:
    """E.g. ``geomean cand/inc 0.9005 (-9.95%)``, ``[0.8911, 0.9100] 67% CI, n=2/2``,
    ``(too few runs for 95%)``."""
    counts = f"n={n_b}/{n_a}"
    if estimate is None:
        return (f"{center} {names} N/A, {counts}",)
    head = f"{center} {names} {estimate:.4f} ({(estimate - 1.0) * 100.0:+.2f}%)"
    if low is None or high is None or coverage is None:
        return head, f"no interval, {counts}", "(too few runs for one)"
    interval = f"[{low:.4f}, {high:.4f}] {coverage * 100:.0f}% CI, {counts}"
    if coverage < confidence - 1e-9:
        return head, interval, f"(too few runs for {confidence * 100:.0f}%)"
    return head, interval
