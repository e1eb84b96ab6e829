"""The trace summary (FORMATS §10), per-site statistics and named intervals, recomputed from
canonical events."""

from __future__ import annotations

import re
import statistics
from bisect import bisect_right
from collections import Counter

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
    owner, site, kind, ts = ev["owner"], ev["site"], ev["kind"], ev["timestamp_ns"]
    start_site, end_site = names[start_name], names[end_name]
    # a range site opens at its END (->) or BEGIN (=>); an instant or counter at its one event
    not_opening = abi.KIND_BEGIN if arrow == "->" else abi.KIND_END
    starts = [i for i, (s, k) in enumerate(zip(site, kind)) if s == start_site and k != not_opening]
    ends = [i for i, (s, k) in enumerate(zip(site, kind)) if s == end_site and k != abi.KIND_END]
    durations = []
    for s in starts:
        # canonical order is (owner, sequence): the next end-site begin after a start's position
        pos = bisect_right(ends, s)
        if pos < len(ends) and owner[ends[pos]] == owner[s]:
            durations.append(ts[ends[pos]] - ts[s])
    result = {"name": f"{start_name} {arrow} {end_name}", "semantics": INTERVAL_FORMS[arrow],
              "count": len(durations)}
    if durations:
        result.update(
            total_ns=sum(durations),
            median_ns=float(statistics.median(durations)),
            min_ns=min(durations),
            max_ns=max(durations),
        )
    else:
        result.update(total_ns=0, median_ns=None, min_ns=None, max_ns=None)
    return result


def _range_durations(capture: Capture) -> dict[int, list[int]]:
    """Durations in ns of the closed ranges, per site id."""
    rg = capture.ranges
    out: dict[int, list[int]] = {}
    for site, begin, end in zip(rg["site"], rg["begin_ns"], rg["end_ns"]):
        out.setdefault(site, []).append(end - begin)
    return out


def summarize(capture: Capture) -> dict:
    """The summary exactly as AKA's ``summarize`` states it, key for key, so AKA's ``validate``
    finds it reproducible: a canonical event is a paired range, an instant or a counter (a range
    counted once, not as its begin and end records); ``site_event_count`` counts those,
    ``site_total_duration_ns`` the sites that have ranges, ``physical_sms`` lists the SM ids."""
    ev = capture.events
    rg = capture.ranges
    kind = ev["kind"]
    names = {s.site_id: s.name for s in capture.dictionary.sites}
    instants, counters = kind.count(abi.KIND_INSTANT), kind.count(abi.KIND_COUNTER)
    per_site = Counter(rg["site"])
    if instants or counters:
        per_site.update(s for s, k in zip(ev["site"], kind) if k >= abi.KIND_INSTANT)
    ranges = len(rg["site"])
    return {
        "schema": SUMMARY_SCHEMA,
        "committed_records": capture.committed_records,
        "canonical_events": ranges + instants + counters,
        "ranges": ranges,
        "instants": instants,
        "counters": counters,
        "owners_observed": len(set(ev["owner"])),
        # an owner keeps its SM (decode checks it), so every record's SM is its owner's
        "physical_sms": sorted(set(ev["sm"])),
        "site_event_count": dict(sorted((names[s], c) for s, c in per_site.items())),
        "site_total_duration_ns": dict(sorted((names[s], sum(d)) for s, d in _range_durations(capture).items())),
    }


def summary_extras(capture: Capture, intervals: list[str] | tuple[str, ...] = ()) -> dict:
    """What episcope states beyond AKA's summary (it goes in the receipt, which AKA reads past
    keys it does not know): the launch, the span of the capture and the named intervals."""
    ts = capture.events["timestamp_ns"]
    first, last = min(ts), max(ts)
    return {
        "abi": f"{capture.header.abi_major}.{capture.header.abi_minor}",
        "launch_id": capture.header.launch_id,
        "first_timestamp_ns": first,
        "last_timestamp_ns": last,
        "span_ns": last - first,
        "intervals": [interval_stats(capture, *parse_interval_request(t)) for t in intervals],
    }


def site_statistics(capture: Capture) -> list[dict]:
    """One entry per dictionary site, in dictionary order: its records in the buffer (a
    range's begin and end count apart), its paired ranges, and their durations in ns (total,
    median, min, max; null for a site that closed no range). episcope's receipt states them
    under ``episcope.sites`` so a reader sees what the capture's sites did without decoding it;
    ``validate`` recomputes them from the raw buffer."""
    durations = _range_durations(capture)
    records = Counter(capture.events["site"])
    out = []
    for site in capture.dictionary.sites:
        mine = durations.get(site.site_id, [])
        closed = bool(mine)
        out.append({
            "site_id": site.site_id,
            "name": site.name,
            "kind": site.kind,
            "records": records[site.site_id],
            "ranges": len(mine),
            "total_ns": sum(mine) if closed else None,
            "median_ns": float(statistics.median(mine)) if closed else None,
            "min_ns": min(mine) if closed else None,
            "max_ns": max(mine) if closed else None,
        })
    return out
