"""Console readers for timeline artifacts: lenient, unknown is None, wrong schema refused."""

from __future__ import annotations

import json

import msgspec
import pytest

from console.formats.problems import FormatError
from console.formats.timeline import (
    NO_SITES,
    decoded_sites,
    parse_measure_run_line,
    read_timeline_measurement,
    read_timeline_receipt,
    with_decoded_sites,
)


def test_missing_and_broken_documents(tmp_path):
    assert read_timeline_receipt(tmp_path / "none.json").value is None
    assert read_timeline_receipt(tmp_path / "none.json").problems == ()
    (tmp_path / "bad.json").write_text("{")
    result = read_timeline_measurement(tmp_path / "bad.json")
    assert result.value is None and result.problems
    (tmp_path / "other.json").write_text(json.dumps({"schema": "atrex-autonomous-timeline-summary/v1"}))
    assert read_timeline_receipt(tmp_path / "other.json").problems


def test_partial_receipt_keeps_unknowns_none(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"schema": "atrex-autonomous-timeline-receipt/v1",
                                                 "evidence_class": "diagnostic",
                                                 "trace_integrity": {"status": "verified"}}))
    r = read_timeline_receipt(tmp_path / "r.json").value
    assert r.evidence_class == "diagnostic" and r.trace_integrity == "verified"
    assert r.overhead_percent is None and r.committed_records is None and r.classification_reasons is None
    assert r.to_json()["evidence_class"] == "diagnostic"
    assert r.path == str(tmp_path / "r.json") and r.to_json()["path"] == r.path


def test_measurement(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({
        "schema": "atrex-autonomous-timeline-measurement/v1", "schedule": ["ABBA"], "overhead_percent": 2.5,
        "runs": [{"ordinal": 0, "variant": "baseline", "latency_ms": 1.0}], "interval": {"high_percent": 3.0},
        "device_identity": {"uuid": "GPU-1"}}))
    m = read_timeline_measurement(tmp_path / "m.json").value
    assert m.overhead_percent == 2.5 and m.interval_high_percent == 3.0 and m.interval_low_percent is None
    assert m.blocks == 1 and m.device_uuid == "GPU-1" and len(m.runs) == 1


def test_measure_run_lines():
    run = parse_measure_run_line(b'{"schema":"atrex-autonomous-timeline-measure-run/v1","event":"run",'
                                 b'"ordinal":3,"variant":"instrumented","latency_ms":1.2,"block":0}')
    assert run.event == "run" and run.latency_ms == 1.2 and run.p_value is None
    block = parse_measure_run_line('{"event":"block","block":1,"overhead_percent":2.0,"p_value":0.03}')
    assert block.overhead_percent == 2.0 and block.variant is None
    with pytest.raises(FormatError):
        parse_measure_run_line(b"{nope")
    with pytest.raises(FormatError):
        parse_measure_run_line(b'{"event":"party"}')
    with pytest.raises(FormatError):
        parse_measure_run_line(b"[1]")


SITE = {"site_id": 1, "name": "load", "kind": "range", "records": 8, "ranges": 4, "total_ns": 1600,
        "median_ns": 400.0, "min_ns": 400, "max_ns": 400}


def test_receipt_sites_are_the_receipts_or_decoded_for_the_same_capture_or_none_with_why(tmp_path):
    receipt = {"schema": "atrex-autonomous-timeline-receipt/v1", "raw_sha256": "a" * 64}
    (tmp_path / "aka.json").write_text(json.dumps(receipt))
    (tmp_path / "ours.json").write_text(json.dumps({**receipt, "episcope": {"sites": [SITE]}}))
    (tmp_path / "bad.json").write_text(json.dumps({**receipt, "episcope": {"sites": [{**SITE, "total_ns": "1600"}]}}))
    aka, ours, bad = (read_timeline_receipt(tmp_path / f"{n}.json").value for n in ("aka", "ours", "bad"))
    assert (aka.sites, aka.sites_from, aka.sites_unknown) == (None, None, NO_SITES)
    assert ours.sites_from == "receipt" and ours.sites_unknown is None
    assert list(ours.to_json()["sites"]) == [SITE]
    assert bad.sites is None and "episcope.sites is unreadable" in bad.sites_unknown and "total_ns" in bad.sites_unknown
    decoded = decoded_sites("a" * 64, [{**SITE, "total_ns": 1700, "median_ns": 410.0, "max_ns": 500}])
    other_capture = decoded_sites("b" * 64, [SITE])
    joined = with_decoded_sites((aka, ours), {aka.path: decoded, ours.path: decoded})
    assert joined[0].sites == decoded.sites and joined[0].sites_from == "decoded" and joined[0].sites_unknown is None
    assert joined[1] == ours  # a receipt's own sites stand
    # a receipt rewritten for another capture at the same path does not take the old capture's sites
    assert with_decoded_sites((aka,), {aka.path: other_capture}) == (aka,)
    with pytest.raises(msgspec.ValidationError):
        decoded_sites(None, [{**SITE, "records": None}])
