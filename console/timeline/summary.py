"""The trace summary (FORMATS §10) and named intervals recomputed from canonical events."""

from __future__ import annotations

import numpy as np

from . import abi
from .decode import Capture

SUMMARY_SCHEMA = "atrex-autonomous-timeline-summary/v1"


def parse_interval_request(text: str) -> tuple[str, str]:
    """``"start_site -> end_site"`` into its two site names."""
    parts = [p.strip() for p in text.split("->")]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"interval must read 'start_site -> end_site', got {text!r}")
    return parts[0], parts[1]


def interval_stats(capture: Capture, start_name: str, end_name: str) -> dict:
    """Per owner, each start_site event paired with the first later end_site event.

    Uses canonical events only (any kind), so it measures e.g. "end of load -> begin of
    store" across two different range sites. Pairs never cross owners.
    """
    names = {s.name: s.site_id for s in capture.dictionary.sites}
    for name in (start_name, end_name):
        if name not in names:
            raise ValueError(f"interval names unknown site {name!r}")
    ev = capture.events
    owner, site, ts = ev["owner"], ev["site"], ev["timestamp_ns"].astype(np.int64)
    starts = np.flatnonzero(site == names[start_name])
    ends = np.flatnonzero(site == names[end_name])
    durations = np.zeros(0, np.int64)
    if starts.size and ends.size:
        # canonical order is (owner, sequence): the next end at or after a start's position
        pos = np.searchsorted(ends, starts, side="right")
        ok = pos < ends.size
        s, e = starts[ok], ends[pos[ok]]
        ok = owner[e] == owner[s]
        durations = ts[e[ok]] - ts[s[ok]]
    result = {"name": f"{start_name} -> {end_name}", "count": int(durations.size)}
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


def summarize(capture: Capture, intervals: list[str] | tuple[str, ...] = ()) -> dict:
    ev = capture.events
    rg = capture.ranges
    kind = ev["kind"]
    names = {s.site_id: s.name for s in capture.dictionary.sites}
    site_ids, counts = np.unique(ev["site"], return_counts=True)
    dur = (rg["end_ns"] - rg["begin_ns"]).astype(np.int64)
    totals = {names[int(s)]: 0 for s in site_ids if capture.dictionary.by_id()[int(s)].kind in ("range", "any")}
    if dur.size:
        r_sites, inverse = np.unique(rg["site"], return_inverse=True)
        sums = np.bincount(inverse, weights=dur, minlength=r_sites.size)
        # bincount works in float64: recompute exactly where the sum could lose integers
        for i, s in enumerate(r_sites):
            total = int(sums[i])
            if total >= 2**52:
                total = int(dur[rg["site"] == s].sum())
            totals[names[int(s)]] = total
    ts = ev["timestamp_ns"]
    return {
        "schema": SUMMARY_SCHEMA,
        "abi": f"{capture.header.abi_major}.{capture.header.abi_minor}",
        "launch_id": capture.header.launch_id,
        "committed_records": capture.committed_records,
        "canonical_events": capture.event_count,
        "ranges": int(dur.size),
        "instants": int((kind == abi.KIND_INSTANT).sum()),
        "counters": int((kind == abi.KIND_COUNTER).sum()),
        "owners_observed": int(np.unique(ev["owner"]).size),
        "physical_sms": int(np.unique(ev["sm"]).size),
        "site_event_count": {names[int(s)]: int(c) for s, c in zip(site_ids, counts)},
        "site_total_duration_ns": totals,
        "first_timestamp_ns": int(ts.min()),
        "last_timestamp_ns": int(ts.max()),
        "span_ns": int(ts.max() - ts.min()),
        "intervals": [interval_stats(capture, *parse_interval_request(t)) for t in intervals],
    }
