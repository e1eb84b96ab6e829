"""The timeline summary counts as AKA's summarize does (a range is one canonical event)."""

from __future__ import annotations

import numpy as np

from console.timeline.decode import decode
from console.timeline.summary import summarize
from timeline_support import parsed


def test_capture_ok_summary_in_akas_terms():
    buf, man, dic = parsed("capture_ok")
    capture = decode(bytes(buf), man, dic)
    summary = summarize(capture)
    # 324 ranges (648 begin/end records) + 18 instants + 108 counters: 774 records, 450 events
    assert summary["committed_records"] == 774
    assert summary["canonical_events"] == summary["ranges"] + summary["instants"] + summary["counters"] == 450
    assert summary["physical_sms"] == sorted(set(capture.events["sm"].tolist()))
    assert sum(summary["site_event_count"].values()) == summary["canonical_events"]
    range_sites = {s.name for s in dic.sites if s.site_id in set(np.unique(capture.ranges["site"]).tolist())}
    assert set(summary["site_total_duration_ns"]) == range_sites
