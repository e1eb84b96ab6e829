"""The trace summary (FORMATS §10), per-site statistics and named intervals, recomputed from
canonical events."""

from __future__ import annotations

import re

import numpy as np

from . import abi
from .decode import Capture

SUMMARY_SCHEMA = "atrex-autonomous-timeline-summary/v1"


# The two interval forms: which event of the start site opens the interval. Either way it
# closes at the next BEGIN of the end site (an instant or counter is its own begin and end).
INTERVAL_FORMS = {
    "->": "end_to_begin",  # END of A -> next BEGIN of B: the gap between two phases
    "=>": "begin_to_begin",  # BEGIN of A -> next BEGIN of B: a period, e.g. 'iter => iter'
}
_ARROWS = re.compile(r"(->|=>)")


def parse_interval_request(text: str) -> tuple[str, str, str]:
    """``"A -> B"`` or ``"A => B"`` into (start site, end site, arrow)."""
    parts = [p.strip() for p in _ARROWS.split(text)]
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise ValueError(f"interval must read 'start_site -> end_site' or 'start_site => end_site', got {text!r}")
    return parts[0], parts[2], parts[1]


def interval_stats(capture: Capture, start_name: str, end_name: str, arrow: str = "->") -> dict:
    """Per owner, each opening event of ``start_name`` paired with the next BEGIN of ``end_name``.

    ``->`` opens at each END of the start site, ``=>`` at each BEGIN (INTERVAL_FORMS). "Next"
    is the first such event strictly later in the owner's record sequence; pairs never cross
    owners, and an opening event with no later BEGIN of the end site pairs with nothing.
    """
    names = {s.name: s.site_id for s in capture.dictionary.sites}
    for name in (start_name, end_name):
        if name not in names:
            raise ValueError(f"interval names unknown site {name!r}")
    ev = capture.events
    owner, site, kind = ev["owner"], ev["site"], ev["kind"]
    ts = ev["timestamp_ns"].astype(np.int64)
    # a range site opens at its END (->) or BEGIN (=>); an instant or counter at its one event
    not_opening = abi.KIND_BEGIN if arrow == "->" else abi.KIND_END
    starts = np.flatnonzero((site == names[start_name]) & (kind != not_opening))
    ends = np.flatnonzero((site == names[end_name]) & (kind != abi.KIND_END))
    durations = np.zeros(0, np.int64)
    if starts.size and ends.size:
        # canonical order is (owner, sequence): the next end-site begin after a start's position
        pos = np.searchsorted(ends, starts, side="right")
        ok = pos < ends.size
        s, e = starts[ok], ends[pos[ok]]
        ok = owner[e] == owner[s]
        durations = ts[e[ok]] - ts[s[ok]]
    result = {"name": f"{start_name} {arrow} {end_name}", "semantics": INTERVAL_FORMS[arrow],
              "count": int(durations.size)}
    if durations.size:
        result.update(
            total_ns=int(durations.sum()),
            median_ns=float(np.median(durations)),
            min_ns=int(durations.min()),
            max_ns=int(durations.max()),
        )
    else:
        result.update(total_ns=0, median_ns=None, min_ns=None, max_ns=None)
    return result


def summarize(capture: Capture) -> dict:
    """The summary exactly as AKA's ``summarize`` states it, key for key, so AKA's ``validate``
    finds it reproducible: a canonical event is a paired range, an instant or a counter (a range
    counted once, not as its begin and end records); ``site_event_count`` counts those,
    ``site_total_duration_ns`` the sites that have ranges, ``physical_sms`` lists the SM ids."""
    ev = capture.events
    rg = capture.ranges
    kind = ev["kind"]
    names = {s.site_id: s.name for s in capture.dictionary.sites}
    points = kind >= abi.KIND_INSTANT
    site_ids, counts = np.unique(np.concatenate([rg["site"], ev["site"][points]]), return_counts=True)
    dur = (rg["end_ns"] - rg["begin_ns"]).astype(np.int64)
    totals: dict[str, int] = {}
    if dur.size:
        r_sites, inverse = np.unique(rg["site"], return_inverse=True)
        sums = np.bincount(inverse, weights=dur, minlength=r_sites.size)
        # bincount works in float64: recompute exactly where the sum could lose integers
        for i, s in enumerate(r_sites):
            total = int(sums[i])
            if total >= 2**52:
                total = int(dur[rg["site"] == s].sum())
            totals[names[int(s)]] = total
    owner = ev["owner"]  # canonical order: owner, then sequence; an owner keeps its SM
    firsts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1]))) if owner.size else owner
    return {
        "schema": SUMMARY_SCHEMA,
        "committed_records": capture.committed_records,
        "canonical_events": int(dur.size + points.sum()),
        "ranges": int(dur.size),
        "instants": int((kind == abi.KIND_INSTANT).sum()),
        "counters": int((kind == abi.KIND_COUNTER).sum()),
        "owners_observed": int(firsts.size),
        "physical_sms": sorted(set(ev["sm"][firsts].tolist())),
        "site_event_count": dict(sorted((names[int(s)], int(c)) for s, c in zip(site_ids, counts))),
        "site_total_duration_ns": dict(sorted(totals.items())),
    }


def summary_extras(capture: Capture, intervals: list[str] | tuple[str, ...] = ()) -> dict:
    """What episcope states beyond AKA's summary (it goes in the receipt, which AKA reads past
    keys it does not know): the launch, the span of the capture and the named intervals."""
    ts = capture.events["timestamp_ns"]
    return {
        "abi": f"{capture.header.abi_major}.{capture.header.abi_minor}",
        "launch_id": capture.header.launch_id,
        "first_timestamp_ns": int(ts.min()),
        "last_timestamp_ns": int(ts.max()),
        "span_ns": int(ts.max() - ts.min()),
        "intervals": [interval_stats(capture, *parse_interval_request(t)) for t in intervals],
    }


def site_statistics(capture: Capture) -> list[dict]:
    """One entry per dictionary site, in dictionary order: its records in the buffer (a
    range's begin and end count apart), its paired ranges, and their durations in ns (total,
    median, min, max; null for a site that closed no range). episcope's receipt states them
    under ``episcope.sites`` so a reader sees what the capture's sites did without decoding it;
    ``validate`` recomputes them from the raw buffer."""
    rg = capture.ranges
    durations = rg["end_ns"].astype(np.int64) - rg["begin_ns"].astype(np.int64)
    out = []
    for site in capture.dictionary.sites:
        mine = durations[rg["site"] == site.site_id]
        closed = bool(mine.size)
        out.append({
            "site_id": site.site_id,
            "name": site.name,
            "kind": site.kind,
            "records": int(np.count_nonzero(capture.events["site"] == site.site_id)),
            "ranges": int(mine.size),
            "total_ns": int(mine.sum()) if closed else None,
            "median_ns": float(np.median(mine)) if closed else None,
            "min_ns": int(mine.min()) if closed else None,
            "max_ns": int(mine.max()) if closed else None,
        })
    return out
