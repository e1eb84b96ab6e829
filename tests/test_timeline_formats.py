"""Console readers for timeline artifacts: lenient, unknown is None, wrong schema refused."""

from __future__ import annotations

import json

import pytest

from console.formats.problems import FormatError
from console.formats.timeline import parse_measure_run_line, read_timeline_measurement, read_timeline_receipt


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
