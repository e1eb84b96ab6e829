"""Telemetry decoding on the two paths: the cold scan's (a chunk at a time) and the event
path's (a line at a time). Both decode into ``TelemetryRecord``: every field must come out
the same on both, and a line one rejects the other rejects."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.episode import events as ev
from console.episode.session import Session
from console.formats import telemetry
from console.formats.problems import FormatError
from console.formats.telemetry import TelemetryRecord, decode_folded_lines, parse_telemetry_line, record_epoch

ROOT = Path(__file__).resolve().parent.parent
FIELDS = TelemetryRecord.__struct_fields__


def plain_line(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


BASE = {
    "schema_version": "atrex_iteration_event_v1",
    "campaign_id": "campaign",
    "iteration_id": "episode-0003",
    "attempt_id": "invocation-1",
    "event": "phase_started",
    "phase": "profile",
    "action": "start",
    "marker_id": "0c5c7fd0a6a3a4506513270e269e0d37",
    "source": "agent_marker",
    "measurement": "explicit",
    "monotonic_seconds": 1010.0530665625782,
    "timestamp": "2026-11-01T00:16:50.053067+00:00",
}


def full(line: bytes):
    """The event path's record, or None where it reports the line as unreadable."""
    try:
        return parse_telemetry_line(line)
    except FormatError:
        return None


def check_agrees(lines: list[bytes]) -> list[TelemetryRecord] | None:
    """The cold scan's decode of ``lines``; it fails exactly when the event path rejects
    one of them, and otherwise reads every field as the event path does."""
    folded = decode_folded_lines(lines)
    records = [full(line) for line in lines if line]
    assert (folded is None) == (None in records), (lines, folded, records)
    if folded is not None:
        assert len(folded) == len(records)
        for slim, record in zip(folded, records):
            assert all(getattr(slim, name) == getattr(record, name) for name in FIELDS), (slim, record)
    return folded


def test_the_benchmark_workload_and_the_example_episode_decode_on_both_paths():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workloads import telemetry_lines

    lines = [line.rstrip(b"\n") for line in telemetry_lines(5000, seed=3)]
    assert len(check_agrees(lines)) == 5000

    with tarfile.open(ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz") as archive:
        members = [m for m in archive.getmembers() if m.name.endswith("telemetry.jsonl")]
        assert members
        for member in members:
            data = archive.extractfile(member).read().rstrip(b"\n")
            decoded = check_agrees(data.split(b"\n"))
            assert decoded is not None, member.name
            assert len(decoded) == data.count(b"\n") + 1


def test_records_written_by_iteration_trace_are_folded_as_written():
    env = {"ATREX_TELEMETRY_CAMPAIGN_ID": "c", "ATREX_TELEMETRY_ITERATION_ID": "episode-0001",
           "ATREX_TELEMETRY_ATTEMPT_ID": "invocation-2"}
    records = [
        telemetry.phase_record("start", "research", env=env),
        telemetry.source_read_record("public_web", "https://example.org/a?b", env=env),
        telemetry.sandbox_started_record("sandbox-1-2", "benchmark", env=env),
        telemetry.sandbox_completed_record("sandbox-1-2", "benchmark", 1.25, exit_status=3, env=env),
        telemetry.phase_record("end", "research", env=env),
    ]
    folded = check_agrees([plain_line(r) for r in records])
    assert [r.event for r in folded] == [r["event"] for r in records]
    assert (folded[0].iteration_id, folded[0].attempt_id, folded[0].phase) == ("episode-0001", "invocation-2", "research")
    assert (folded[3].duration_seconds, folded[3].status, folded[3].exit_status) == (1.25, "failed", 3)
    assert all(isinstance(record_epoch(r.timestamp), float) for r in folded)


@pytest.mark.parametrize(
    "line",
    [
        b'{"event":"phase_started"}',  # a phase marker without its phase
        b'{"event":"phase_started","phase":null}',
        b'{"event":"launch","phase":"x"}',
        b'{"event":"source_read","iteration_id":null}',
        b'{"event":"source_read","event":"source_read"}',
        b'{"event":"source_read","monotonic_seconds":1e999}',
        b'{"event":"source_read","monotonic_seconds":01}',
        b'{"event":"source_read","exit_status":1.0}',
        b'{"event":"source_read","reference":"a\\nb"}',
        b'{"event":"source_read","source":{"tool":"agent"}}',  # a field the fold never reads, of the wrong type
        b'{"event":"phase_started","phase":"profile","campaign_id":5}',
        b'{"event":"source_read","timestamp":"2026-13-01T00:00:00Z"}',
        b'{"event":"source_read","timestamp":"2026-02-29T00:00:00Z"}',
        b'{"event":"source_read"} {"event":"source_read"}',
        b'{"event":"source_read"',
        b'["event"]',
        b"   ",
        b"{}",
        b'{"event":"source_read","x":' + b"[" * 5000 + b"]" * 5000 + b"}",  # nested too deep
    ],
)
def test_edge_lines_are_read_alike_on_both_paths(line):
    check_agrees([line])


def test_defaults_and_nulls_match_the_record_type():
    folded = check_agrees([b'{"event":"source_read"}', b"", b'{"event":"source_read","reference":null,"timestamp":null}'])
    for record in folded:
        assert (record.iteration_id, record.attempt_id) == ("unknown", "attempt")
        assert all(getattr(record, name) is None for name in FIELDS if name not in ("event", "iteration_id", "attempt_id"))
        assert record_epoch(record.timestamp) is None


def test_a_bad_line_fails_the_chunk_and_an_odd_one_is_read():
    good = plain_line(BASE)
    assert check_agrees([good, b"not json", good]) is None  # ingest then reports it by offset
    odd = b'{"event":"source_read","reference":"caf\xc3\xa9"}'  # valid, but not ASCII
    assert [r.reference for r in check_agrees([good, odd, good])] == [None, "café", None]


FIELD_VALUES = st.one_of(
    st.sampled_from(["phase_started", "phase_completed", "source_read", "sandbox_operation_started",
                     "sandbox_operation_completed", "profile", "episode-0001", "2026-11-01T00:00:00+00:00",
                     "2026-02-29T00:00:00Z", "2024-02-29T23:59:59.5", "x\\u00e9", 'a"b', "é", ""]),
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
)


@st.composite
def records(draw):
    record = {}
    for name in draw(st.lists(st.sampled_from(FIELDS), unique=True)):
        record[name] = draw(FIELD_VALUES)
    if draw(st.booleans()):
        record["event"] = draw(st.sampled_from(["phase_started", "phase_completed", "source_read",
                                                "sandbox_operation_completed"]))
    if draw(st.booleans()):
        record["phase"] = draw(st.sampled_from(["profile", "benchmark"]))
    for _ in range(draw(st.integers(0, 2))):
        record[draw(st.text(max_size=8)) + "_extra"] = draw(FIELD_VALUES)
    return record


@given(st.lists(records(), min_size=1, max_size=4), st.booleans())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_records_are_read_alike_on_both_paths(batch, ascii_only):
    check_agrees([json.dumps(r, ensure_ascii=ascii_only).encode() for r in batch])


def test_the_status_scan_and_the_event_scan_fold_the_same_state(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workloads import write_telemetry_workspace

    path = Path(write_telemetry_workspace(str(tmp_path), 20_000))
    bad_offset = path.stat().st_size
    with path.open("ab") as fh:  # one bad line and one with an escape, a non-UTC time, mid-file
        fh.write(b'{"event":"phase_started"\n')
        fh.write(b'{"event":"source_read","reference":"caf\\u00e9","timestamp":"2026-11-02T00:00:00+02:00"}\n')
        fh.write(b"".join(
            (json.dumps(dict(BASE, iteration_id="episode-9999", monotonic_seconds=float(i)), sort_keys=True) + "\n").encode()
            for i in range(300)
        ))
    status = Session(str(tmp_path)).scan()
    session = Session(str(tmp_path))
    assert sum(e.kind == ev.TELEMETRY for e in session.scan_events()) == 20_000 + 1 + 300
    events = session.state
    assert status.telemetry_events == events.telemetry_events == 20_000 + 1 + 300
    for name in ("phase_spans", "source_reads", "sandbox_operations", "open_spans"):
        assert list(getattr(status, name)) == list(getattr(events, name)), name
    assert dict(status.phase_totals) == dict(events.phase_totals)
    assert (status.orchestration_seconds, status.last_event_at) == (events.orchestration_seconds, events.last_event_at)
    assert [(u.offset, u.error) for u in status.unreadable] == [(u.offset, u.error) for u in events.unreadable]
    assert [u.offset for u in status.unreadable] == [bad_offset]
