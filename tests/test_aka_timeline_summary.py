"""The timeline summary counts as AKA's summarize does (a range is one canonical event)."""

from __future__ import annotations

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
    assert summary["physical_sms"] == sorted(set(capture.events["sm"]))
    assert sum(summary["site_event_count"].values()) == summary["canonical_events"]
    range_sites = {s.name for s in dic.sites if s.site_id in set(capture.ranges["site"])}
    assert set(summary["site_total_duration_ns"]) == range_sites


def test_trace_args_and_other_data_use_akas_names():
    import gzip
    import json

    from console.timeline.export import chrome_trace_bytes

    buf, man, dic = parsed("capture_ok")
    capture = decode(bytes(buf), man, dic)
    doc = json.loads(gzip.decompress(chrome_trace_bytes(capture)))
    origin = doc["otherData"]["globaltimer_origin_ns"]
    assert origin == min(capture.events["timestamp_ns"]) and doc["otherData"]["clock"] == "%globaltimer"
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    identity = {"site_id", "cta", "cta_linear", "writer", "writer_ordinal", "warp", "physical_sm", "timestamp_ns"}
    by_phase = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M":
            continue
        by_phase.setdefault(e["ph"], e)
        args = e["args"]
        assert identity <= set(args), e
        assert args["physical_sm"] == e["pid"] - 1 and args["cta_linear"] * len(man.writers) + args["writer_ordinal"] == e["tid"] - 1
        cta = ",".join(str(v) for v in args["cta"])
        assert threads[(e["pid"], e["tid"])] == f"cta({cta})/{args['writer']}"
        assert round(e["ts"] * 1000) == args["timestamp_ns"] - origin
    assert {"end_timestamp_ns", "duration_ns", "begin_payload", "end_payload"} <= set(by_phase["X"]["args"])
    assert {"payload", "sequence"} <= set(by_phase["i"]["args"])
    assert {"value", "sequence"} <= set(by_phase["C"]["args"])
