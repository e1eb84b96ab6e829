"""Named intervals: 'A -> B' is END of A to the next BEGIN of B, 'A => B' is BEGIN to BEGIN."""

from __future__ import annotations

import numpy as np
import pytest

from console.timeline import abi
from console.timeline.decode import decode
from console.timeline.encode import encode
from console.timeline.manifest import parse_dictionary, parse_manifest, warp_writers_manifest
from console.timeline.summary import interval_stats, parse_interval_request, summary_extras
from timeline_support import parsed

B, E, I = abi.KIND_BEGIN, abi.KIND_END, abi.KIND_INSTANT
DICTIONARY = parse_dictionary({"schema": "atrex-autonomous-timeline-events/v1", "sites": [
    {"site_id": 1, "name": "load", "kind": "range"},
    {"site_id": 2, "name": "store", "kind": "range"},
    {"site_id": 3, "name": "tick", "kind": "instant"},
]})


def capture(events):
    """events: (owner, ts, site, kind) in each owner's order."""
    manifest = parse_manifest(warp_writers_manifest((2, 1, 1), (32, 1, 1), 1, 16))
    owner, ts, site, kind = (list(col) for col in zip(*events))
    raw = encode(manifest, owner, ts, site, kind, [0] * len(owner), [0] * len(owner))
    return decode(bytes(raw), manifest, DICTIONARY)


def test_parse_both_arrows():
    assert parse_interval_request(" load -> store ") == ("load", "store", "->")
    assert parse_interval_request("load=>load") == ("load", "load", "=>")
    for bad in ("load", "load -> ", "a -> b -> c", "a => b -> c"):
        with pytest.raises(ValueError, match="start_site -> end_site"):
            parse_interval_request(bad)


def test_end_to_begin_and_begin_to_begin_on_a_known_capture():
    cap = capture([
        (0, 100, 1, B), (0, 150, 1, E), (0, 170, 2, B), (0, 200, 2, E),
        (0, 300, 1, B), (0, 340, 1, E), (0, 400, 3, I), (0, 410, 2, B), (0, 450, 2, E),
        (1, 1000, 1, B), (1, 1100, 1, E),  # owner 1 has no store: nothing pairs across owners
    ])
    gap = interval_stats(cap, "load", "store", "->")
    assert gap["semantics"] == "end_to_begin" and gap["count"] == 2
    assert (gap["min_ns"], gap["max_ns"], gap["total_ns"]) == (20, 70, 90)  # 170-150, 410-340
    period = interval_stats(cap, "load", "store", "=>")
    assert period["semantics"] == "begin_to_begin" and (period["min_ns"], period["max_ns"]) == (70, 110)
    again = interval_stats(cap, "load", "load", "=>")
    assert again["count"] == 1 and again["total_ns"] == 200  # 100 -> 300; the last load has no successor
    assert interval_stats(cap, "load", "load", "->")["total_ns"] == 150  # end 150 -> begin 300
    tick = interval_stats(cap, "load", "tick", "->")
    assert (tick["count"], tick["total_ns"]) == (2, 250 + 60)  # both load ends pair with the one tick
    assert interval_stats(cap, "tick", "store", "->")["total_ns"] == 10  # an instant is its own end
    empty = interval_stats(cap, "store", "tick", "->")
    assert empty["count"] == 1 and empty["total_ns"] == 200  # 200 -> 400; the second store is last
    assert [i["name"] for i in summary_extras(cap, ["load -> store", "load => store"])["intervals"]] == [
        "load -> store", "load => store"]


def test_real_capture_matches_a_direct_reading_of_its_ranges():
    """On the H200 fixture, 'compute -> carry' equals: each compute range's end to the begin of
    the first carry range that starts after it, in the same owner (computed from the ranges)."""
    raw, manifest, dictionary = parsed("capture_ok")
    cap = decode(bytes(raw), manifest, dictionary)
    ids = {s.name: s.site_id for s in dictionary.sites}
    rg = {key: np.asarray(column) for key, column in cap.ranges.items()}
    expected = []
    for o in np.unique(rg["owner"]):
        mine = rg["owner"] == o
        computes = np.flatnonzero(mine & (rg["site"] == ids["compute"]))
        carries = np.flatnonzero(mine & (rg["site"] == ids["carry"]))
        for c in computes:
            later = [k for k in carries if rg["begin_event"][k] > rg["end_event"][c]]
            if later:
                first = min(later, key=lambda k: rg["begin_event"][k])
                expected.append(int(rg["begin_ns"][first]) - int(rg["end_ns"][c]))
    stats = interval_stats(cap, "compute", "carry", "->")
    assert stats["count"] == len(expected) > 0
    assert stats["total_ns"] == sum(expected) and stats["min_ns"] == min(expected) >= 0
