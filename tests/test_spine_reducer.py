from __future__ import annotations

import pytest

from console.episode import events as ev
from console.episode.events import Event
from console.episode.reducer import Reducer, fold
from console.formats.telemetry import record_epoch
from spine_helpers import T0, tele, telemetry_record


def events(*records, path="/w/.atrex_long_horizon/telemetry.jsonl"):
    out = []
    for offset, record in enumerate(records):
        parsed = telemetry_record(record)
        out.append(Event(ev.TELEMETRY, path, offset * 100, record_epoch(parsed.timestamp), parsed))
    return out


def test_paired_phases_are_explicit_with_wall_time():
    state = fold(
        events(
            tele("phase_started", 10.0, phase="profile"),
            tele("phase_completed", 25.0, phase="profile"),
            tele("phase_started", 30.0, phase="planning"),
            tele("phase_completed", 31.5, phase="planning"),
        )
    )
    assert state.phase_totals["profile"].wall_seconds == pytest.approx(15.0)
    assert state.phase_totals["profile"].measurement == "explicit"
    assert state.phase_totals["planning"].intervals == 1
    # 21.5 s between first and last marker, 16.5 s attributed to phases.
    assert state.orchestration_seconds == pytest.approx(5.0)
    assert state.active_phase is None
    assert not state.alerts


@pytest.mark.parametrize(
    "records, phase, reason",
    [
        (
            [tele("phase_started", 1.0, phase="profile"), tele("phase_started", 4.0, phase="research"), tele("phase_completed", 5.0, phase="research")],
            "profile",
            "overlapping_phase",
        ),
        ([tele("phase_started", 1.0, phase="profile"), tele("phase_completed", 3.0, phase="planning")], "profile", "mismatched_phase_end"),
        ([tele("phase_completed", 3.0, phase="benchmark")], "benchmark", "orphan_phase_end"),
    ],
)
def test_invalid_markers_make_partial_spans_that_are_kept(records, phase, reason):
    state = fold(events(*records))
    partial = [s for s in state.phase_spans if s.measurement == "partial"]
    assert [(s.phase, s.reason) for s in partial] == [(phase, reason)]
    assert state.phase_totals[phase].measurement == "partial"
    assert state.partial_reasons[reason] == 1
    assert any(a.code == "phase_markers_invalid" for a in state.alerts)


def test_unclosed_phase_is_the_active_phase_and_not_counted():
    state = fold(events(tele("phase_started", 1.0, phase="implementation")))
    assert state.active_phase.phase == "implementation"
    assert state.active_phase.reason == "unclosed_phase"
    assert "implementation" not in state.phase_totals


def test_attempts_pair_separately():
    state = fold(
        events(
            tele("phase_started", 1.0, phase="profile", attempt="invocation-1"),
            tele("phase_started", 2.0, phase="profile", attempt="invocation-2"),
            tele("phase_completed", 3.0, phase="profile", attempt="invocation-1"),
            tele("phase_completed", 7.0, phase="profile", attempt="invocation-2"),
        )
    )
    assert state.phase_totals["profile"].wall_seconds == pytest.approx(2.0 + 5.0)
    assert state.phase_totals["profile"].measurement == "explicit"


def test_sandbox_operations_and_source_reads():
    state = fold(
        events(
            tele("source_read", 1.0, source_kind="workspace", reference="profiles/episode_1/summary.txt"),
            tele("sandbox_operation_started", 2.0, operation_id="sandbox-1-1", category="profile"),
            tele("sandbox_operation_started", 2.5, operation_id="sandbox-1-2", category="benchmark"),
            tele("sandbox_operation_completed", 9.0, operation_id="sandbox-1-1", category="profile", duration_seconds=7.0, status="succeeded", exit_status=0),
        )
    )
    assert [r.reference for r in state.source_reads] == ["profiles/episode_1/summary.txt"]
    by_id = {op.operation_id: op for op in state.sandbox_operations}
    assert by_id["sandbox-1-1"].status == "succeeded"
    assert by_id["sandbox-1-1"].duration_seconds == 7.0
    assert by_id["sandbox-1-2"].status == "running"
    assert by_id["sandbox-1-2"].duration_seconds is None  # unknown, not 0


def test_more_than_four_running_sandbox_jobs_is_an_alert():
    records = [tele("sandbox_operation_started", float(i), operation_id=f"op-{i}", category="dev") for i in range(5)]
    state = fold(events(*records))
    assert [a.code for a in state.alerts] == ["sandbox_concurrency"]


def test_snapshot_is_immutable_while_the_reducer_goes_on():
    reducer = Reducer()
    reducer.feed(events(tele("phase_started", 1.0, phase="profile"), tele("phase_completed", 2.0, phase="profile")))
    first = reducer.snapshot()
    reducer.feed(events(tele("phase_started", 3.0, phase="profile"), tele("phase_completed", 5.0, phase="profile"), path="/w/other.jsonl"))
    second = reducer.snapshot()
    assert len(first.phase_spans) == 1
    assert len(second.phase_spans) == 2
    assert first.phase_totals["profile"].wall_seconds == pytest.approx(1.0)
    assert reducer.snapshot() is second  # unchanged reducer: same snapshot object


def test_fold_telemetry_equals_feeding_events():
    records = [
        tele("phase_started", 1.0, phase="profile"),
        tele("source_read", 1.5, source_kind="gpu_wiki", reference="wiki/smem.md"),
        tele("phase_completed", 4.0, phase="profile"),
        tele("phase_started", 5.0, phase="planning"),
    ]
    via_events = fold(events(*records))
    reducer = Reducer()
    decoded = [telemetry_record(r) for r in records]
    reducer.fold_telemetry("/w/.atrex_long_horizon/telemetry.jsonl", decoded)
    direct = reducer.snapshot()
    assert list(direct.phase_spans) == list(via_events.phase_spans)
    assert direct.phase_totals == via_events.phase_totals
    assert direct.orchestration_seconds == via_events.orchestration_seconds
    assert direct.active_phase == via_events.active_phase


def test_removed_line_file_drops_what_it_said():
    path = "/w/.atrex_long_horizon/telemetry.jsonl"
    reducer = Reducer().feed(events(tele("phase_started", 1.0, phase="profile"), tele("phase_completed", 2.0, phase="profile"), path=path))
    reducer.feed([Event(ev.REMOVED, path, None, None, ev.TELEMETRY)])
    assert reducer.snapshot().phase_totals == {}


def _mixed_records(seed: int, count: int = 300) -> list[dict]:
    """Telemetry of three interleaved attempts: valid and invalid markers, reads, sandbox
    jobs, monotonic clocks that step back and records without one."""
    import random

    rng = random.Random(seed)
    attempts = [("episode-0001", "invocation-1"), ("episode-0001", "invocation-2"), ("episode-0002", "invocation-1")]
    phases = ["profile", "research", "planning", "benchmark"]
    records = []
    for i in range(count):
        iteration, attempt = attempts[0] if rng.random() < 0.7 else rng.choice(attempts)
        mono = 10.0 + i + rng.uniform(-3.0, 3.0)
        kind = rng.choice(["phase_started", "phase_completed", "phase_completed", "source_read",
                           "sandbox_operation_started", "sandbox_operation_completed"])
        extra = {}
        if kind.startswith("phase"):
            extra["phase"] = rng.choice(phases)
        elif kind == "source_read":
            extra.update(source_kind="workspace", reference=f"notes/{i}.md")
        else:
            extra.update(operation_id=rng.choice([f"op-{rng.randint(0, 5)}", None]), category="dev")
            if kind.endswith("completed"):
                extra.update(duration_seconds=rng.choice([1.5, None]), status=rng.choice(["succeeded", "failed", "odd"]))
        record = tele(kind, mono, iteration=iteration, attempt=attempt, **extra)
        if rng.random() < 0.1:
            del record["monotonic_seconds"]
        if rng.random() < 0.05:
            del record["timestamp"]
        records.append({k: v for k, v in record.items() if v is not None})
    return records


@pytest.mark.parametrize("seed", range(6))
def test_batched_fold_equals_one_event_at_a_time(seed):
    """The fold keeps an attempt's clock and open phase in locals across a run of records;
    whatever the batch boundaries, the state must be what one event at a time gives."""
    import random

    stream = events(*_mixed_records(seed))
    one_by_one = Reducer()
    for event in stream:
        one_by_one.feed([event])
    batched = Reducer()
    rng = random.Random(seed)
    position = 0
    while position < len(stream):
        step = rng.randint(1, 60)
        batched.feed(stream[position : position + step])
        position += step
    reducer = Reducer()
    decoded = [e.data for e in stream]
    reducer.fold_telemetry("/w/.atrex_long_horizon/telemetry.jsonl", decoded)
    for state in (batched.snapshot(), reducer.snapshot()):
        expected = one_by_one.snapshot()
        assert list(state.phase_spans) == list(expected.phase_spans)
        assert state.phase_totals == expected.phase_totals
        assert state.partial_reasons == expected.partial_reasons
        assert state.open_spans == expected.open_spans
        assert state.active_phase == expected.active_phase
        assert list(state.source_reads) == list(expected.source_reads)
        assert list(state.sandbox_operations) == list(expected.sandbox_operations)
        assert state.orchestration_seconds == pytest.approx(expected.orchestration_seconds)
        assert state.telemetry_span_seconds == pytest.approx(expected.telemetry_span_seconds)
        assert state.last_event_at == expected.last_event_at
        assert state.telemetry_events == expected.telemetry_events == len(stream)
    assert any(s.measurement == "partial" for s in expected.phase_spans)  # the stream exercises every path
    assert any(s.measurement == "explicit" for s in expected.phase_spans)
    # The clocks, from the records directly: each attempt's span is its latest minus its
    # earliest monotonic time, and orchestration is that span minus its closed phases.
    monos: dict = {}
    for event in stream:
        if event.data.monotonic_seconds is not None:
            monos.setdefault((event.data.iteration_id, event.data.attempt_id), []).append(event.data.monotonic_seconds)
    attributed: dict = {}
    for span in expected.phase_spans:
        if span.wall_seconds is not None:
            key = (span.iteration_id, span.attempt_id)
            attributed[key] = attributed.get(key, 0.0) + span.wall_seconds
    spans = {key: max(values) - min(values) for key, values in monos.items()}
    assert expected.telemetry_span_seconds == pytest.approx(sum(spans.values()))
    assert expected.orchestration_seconds == pytest.approx(
        sum(max(0.0, span - attributed.get(key, 0.0)) for key, span in spans.items())
    )


def test_a_timestamp_without_offset_is_utc_whatever_the_local_zone(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        with_offset = [tele("phase_started", 1.0, phase="profile"), tele("phase_completed", 4.0, phase="profile")]
        naive = [dict(r, timestamp=r["timestamp"].removesuffix("+00:00")) for r in with_offset]
        assert naive[0]["timestamp"] != with_offset[0]["timestamp"]
        expected, got = fold(events(*with_offset)).phase_spans[0], fold(events(*naive)).phase_spans[0]
        assert (got.start_at, got.end_at) == (expected.start_at, expected.end_at)
        assert got.start_at == pytest.approx(T0.timestamp() + 1.0)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
