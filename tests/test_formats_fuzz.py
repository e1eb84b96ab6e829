"""Fuzzing every reader: bad input gives FormatError (parsers) or a reported problem
(document readers), never any other exception, and never a value made up from nothing."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.formats import (
    abba,
    evaluations,
    handoff,
    journal,
    live_memory,
    memory,
    supervisor,
    telemetry,
    telemetry_summary,
)
from console.formats.problems import FormatError, ReadResult
from console.jobs.results import ResultScanner

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SHA = "a" * 40
RESULT = {"all_pass": True, "failures": [], "latency_us_geomean": 41.2, "latency_us_arith_mean": 44.0,
          "latency_us_by_shape": {"0": 38.5, "1": 44.2}, "speedup_vs_ref_geomean": 1.6, "max_abs_err": 0.004,
          "max_rel_err": 0.01, "evaluator": "test_kernel.py", "eval_id": "e1", "performance_score": 1.7}
RUN = {"revision": "incumbent", "repeat": 0, "exit_code": 0, "result": RESULT, "stdout_tail": "", "stderr_tail": ""}
ATTEMPT = {"episode": 3, "version": "v5", "mode": "full", "status": "candidate_ready", "accepted": True,
           "candidate_commit": SHA, "changed_paths": ["kernel.py"], "tokens": 10, "next_directions": ["x"],
           "verification": {"gate": "PASS", "candidate_latency_us": 1.0, "runs": [RUN]},
           "telemetry": {"summary": "s.json", "measurement": "exact", "reason_codes": []}}
USAGE = {"input_tokens": 8, "output_tokens": 2, "total_tokens": 10, "measurement": "exact"}

# reader, expected class, a real-shaped document of each generation
DOCUMENTS = [
    (supervisor.read_state, supervisor.SupervisorState,
     [{"episodes": 3, "accepted": 1, "tokens": 10, "attempts": [ATTEMPT], "usage_receipts": {"i": 10}},
      {"episodes": 1, "tokens": 0, "attempts": [{"episode": 1, "version": 2, "status": "blocked"}]}]),
    (supervisor.read_active_episode, supervisor.ActiveEpisode,
     [{"episode": 9, "memory_version": 10, "mode": "goal", "phase": "verifying", "worktree": "/w", "restart_count": 1},
      {"episode": 9, "memory_version": "v10", "mode": "full", "phase": "exploring"}]),
    (supervisor.read_attempt, supervisor.Attempt, [ATTEMPT, {"episode": 1, "version": 2, "accepted": False}]),
    (telemetry_summary.read_telemetry_summary, telemetry_summary.TelemetrySummary,
     [{"schema_version": telemetry_summary.SCHEMA_VERSION, "episode": 3, "version": "v5", "control_tokens": 10,
       "phase_tokens": {"terminal_usage": USAGE, "phases": {"profile": {"usage": USAGE, "interval_count": 1}},
                        "orchestration": USAGE, "reason_codes": []}},
      {"episode": 1, "version": "v2", "measurement": "unavailable", "phase_tokens": {"terminal_usage": {"total_tokens": None}}}]),
    (journal.read_journal, journal.Journal,
     [{"schema_version": 1, "episode": 3, "memory_version": 5, "state": "in_progress",
       "experiments": [{"name": "n", "evidence": {"k": [1]}}], "outcome": {"summary": "s", "next_directions": ["d"]}},
      {"episode": 3, "memory_version": 5, "experiments": [{"name": "n"}]}]),
    (handoff.read_handoff, handoff.Handoff,
     [{"status": "candidate_ready", "candidate_commit": SHA, "last_trial_commit": SHA}, {"status": "interrupted"}]),
    (live_memory.read_live_memory, live_memory.LiveMemory,
     [{"schema_version": live_memory.SCHEMA_VERSION, "canonical": False, "version": "v10", "episode": 9,
       "experiment_count": 1, "latest_experiment": {"name": "n"}, "outcome": {"summary": "s"}},
      {"episode": 1, "version": "v2", "phase": "recorded"}]),
    (memory.read_memory_version, memory.MemoryVersion,
     [{"version": "v7", "performance": {"latency_us_geomean": 38.5, "latency_us_by_shape": {"a": 38.5},
                                        "measurement_status": "complete", "performance_score": 1.4,
                                        "dram_peak_utilization_pct": 80.0},
       "correctness": {"status": "PASS"}, "quality_gate": {"result": "PASS"}, "open_directions": ["x"],
       "experience": {"experiment_count": 2}, "long_horizon": {"status": "promoted", "mode": "full"}},
      {"performance": {"latency_us": 50.0}, "correctness": {"status": "FAIL"}}]),
    (abba.read_abba_request, abba.AbbaRequest,
     [{"schema_version": 1, "schedule": [{"revision": "incumbent", "repeat": 0}], "command": ["python3"],
       "manifests": {}, "run_timeout_seconds": 120}]),
    (abba.read_abba_verdict, abba.AbbaVerdict,
     [{"gate": "FAIL", "candidate_latency_us": 2.0, "error": None},
      {"schema_version": 1, "runs": [RUN, dict(RUN, revision="candidate")], "error": None}]),
]

# The parser that must read a record's to_json() back (replay re-parses recordings).
PARSERS = {
    supervisor.read_state: supervisor.parse_state,
    supervisor.read_active_episode: supervisor.parse_active_episode,
    supervisor.read_attempt: supervisor.parse_attempt,
    telemetry_summary.read_telemetry_summary: telemetry_summary.parse_telemetry_summary,
    journal.read_journal: journal.parse_journal,
    handoff.read_handoff: handoff.parse_handoff,
    live_memory.read_live_memory: live_memory.parse_live_memory,
    memory.read_memory_version: memory.parse_memory_version,
    abba.read_abba_request: abba.parse_abba_request,
    abba.read_abba_verdict: abba.parse_verdict,
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@st.composite
def mutated(draw, document):
    """A copy of ``document`` with one value somewhere inside replaced by random JSON."""
    doc = copy.deepcopy(document)
    node = doc
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return doc
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        node[key] = draw(json_values)
        return doc


@st.composite
def damaged_bytes(draw, document):
    """The document's bytes truncated, with garbage (often not UTF-8) spliced in."""
    data = json.dumps(document).encode()
    cut = draw(st.integers(0, len(data)))
    junk = draw(st.binary(max_size=16))
    where = draw(st.integers(0, cut))
    return data[:where] + junk + data[where:cut]


def check_read(reader, cls, path, data: bytes):
    path.write_bytes(data)
    result = reader(path)  # must not raise
    assert isinstance(result, ReadResult)
    assert result.value is None or isinstance(result.value, cls)
    if result.value is None:
        assert result.problems, "a present but unusable file must be reported"
    for problem in result.problems:
        assert problem.path == str(path) and "\n" not in problem.error
    if result.value is not None:
        document = json.loads(json.dumps(result.value.to_json()))  # plain JSON data
        again = PARSERS[reader](document)
        assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(document, sort_keys=True)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("reader, cls, docs", DOCUMENTS, ids=lambda v: getattr(v, "__name__", ""))
def test_documents_read_as_written(scratch, reader, cls, docs):
    for index, doc in enumerate(docs):
        path = scratch / f"{reader.__name__}-{index}.json"
        path.write_text(json.dumps(doc))
        result = reader(path)
        assert result.ok, result.problems
        check_read(reader, cls, path, json.dumps(doc).encode())


@pytest.mark.parametrize("reader, cls, docs", DOCUMENTS, ids=lambda v: getattr(v, "__name__", ""))
@FUZZ
@given(data=st.data())
def test_document_readers_never_raise(scratch, reader, cls, docs, data):
    doc = data.draw(st.sampled_from(docs))
    raw = data.draw(
        st.one_of(
            mutated(doc).map(lambda d: json.dumps(d).encode()),
            damaged_bytes(doc),
            json_values.map(lambda v: json.dumps(v).encode()),
            st.binary(max_size=64),
        )
    )
    check_read(reader, cls, scratch / f"{reader.__name__}.json", raw)


def scan_result(line: bytes):
    """An evaluator's stdout as the sandbox reads it for its verdict."""
    scanner = ResultScanner()
    scanner.feed(line)
    return scanner.result()


LINE_PARSERS = [
    (telemetry.parse_telemetry_line, b"", {"schema_version": telemetry.SCHEMA_VERSION, "campaign_id": "c",
                                           "iteration_id": "episode-0003", "attempt_id": "invocation-1",
                                           "event": "phase_started", "timestamp": "2025-05-01T10:00:00+00:00",
                                           "monotonic_seconds": 12.5, "source": "agent_marker",
                                           "measurement": "explicit", "phase": "profile", "action": "start"}),
    (evaluations.parse_evaluation_line, b"", {"schema_version": 2, "timestamp": "2025-05-01T10:00:00+00:00",
                                              "gateway_kind": "run", "job_id": "j", "kernel_sha256": "f" * 64,
                                              "result": RESULT}),
    (scan_result, evaluations.RESULT_PREFIX.encode(), RESULT),
]


@pytest.mark.parametrize("parse, prefix, record", LINE_PARSERS, ids=lambda v: getattr(v, "__name__", ""))
def test_line_parsers_accept_their_record(parse, prefix, record):
    assert parse(prefix + json.dumps(record).encode()) is not None


@pytest.mark.parametrize("parse, prefix, record", LINE_PARSERS, ids=lambda v: getattr(v, "__name__", ""))
@FUZZ
@given(data=st.data())
def test_line_parsers_raise_only_format_error(parse, prefix, record, data):
    line = data.draw(
        st.one_of(
            mutated(record).map(lambda d: prefix + json.dumps(d).encode()),
            damaged_bytes(record).map(lambda b: prefix + b),
            json_values.map(lambda v: prefix + json.dumps(v).encode()),
            st.binary(max_size=64).map(lambda b: prefix + b),
            st.binary(max_size=64),
        )
    )
    try:
        parse(line)
    except FormatError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize(
    "parse",
    [evaluations.parse_result_json, supervisor.parse_attempt, supervisor.parse_state, supervisor.parse_active_episode,
     journal.parse_journal, handoff.parse_handoff, live_memory.parse_live_memory, memory.parse_memory_version,
     telemetry_summary.parse_telemetry_summary, abba.parse_verdict, abba.parse_abba_batch, abba.parse_abba_request],
    ids=lambda f: f.__name__,
)
@FUZZ
@given(value=json_values)
def test_object_parsers_raise_only_format_error(parse, value):
    try:
        parse(value)
    except FormatError:
        pass


@FUZZ
@given(runs=st.lists(st.builds(
    abba.AbbaRun,
    revision=st.sampled_from(abba.REVISIONS), repeat=st.integers(0, 3), exit_code=st.none() | st.integers(-1, 2),
    result=st.none() | st.builds(lambda p, l: evaluations.parse_result_json({"all_pass": p, "latency_us_geomean": l}),
                                 st.booleans(), st.none() | st.floats(allow_nan=True) | st.integers(-5, 10**6)),
    stdout_tail=st.none(), stderr_tail=st.none(), raw=st.just({})), max_size=8),
    repeats=st.integers(-1, 4), threshold=st.floats(-50, 50))
def test_verdict_is_total(runs, repeats, threshold):
    verdict = abba.compute_verdict(runs, repeats, threshold)
    assert verdict.gate in abba.GATES
    if verdict.gate == "PASS":
        assert verdict.improvement_pct > threshold and verdict.error is None
        assert sum(run.valid for run in runs) == 2 * repeats
    else:
        assert verdict.error


HUGE = 20 * 1024 * 1024


def test_a_20_mb_line_everywhere(scratch):
    """One huge record per parser (not hundreds): read fully, no exception, no blow-up."""
    tail = "x" * HUGE
    run = dict(RUN, stdout_tail=tail)
    assert abba.parse_abba_batch(json.loads(json.dumps({"schema_version": 1, "runs": [run]}))).runs[0].stdout_tail == tail
    huge_result = dict(RESULT, evaluator=tail)
    line = json.dumps({"schema_version": 2, "kernel_sha256": "f" * 64, "result": huge_result}).encode()
    assert evaluations.parse_evaluation_line(line).result.evaluator == tail
    assert evaluations.parse_result_line(evaluations.RESULT_PREFIX + json.dumps(huge_result)).evaluator == tail
    record = telemetry.parse_telemetry_line(json.dumps({"event": "source_read", "reference": tail}).encode())
    assert record.reference == tail
    garbage = b"{" + b"\x9f" * HUGE
    for parse in (telemetry.parse_telemetry_line, evaluations.parse_evaluation_line):
        with pytest.raises(FormatError):
            parse(garbage)
    path = scratch / "huge.json"
    path.write_text(json.dumps(dict(ATTEMPT, summary=tail)))
    assert supervisor.read_attempt(path).value.summary == tail
    path.write_bytes(garbage)
    assert supervisor.read_attempt(path).problems


def test_unreadable_paths_are_reported_not_raised(scratch):
    directory = scratch / "a-directory.json"
    directory.mkdir()
    for reader, _, _ in DOCUMENTS:
        assert reader(directory).problems
        assert reader(str(scratch / "nul\0byte.json")).problems
        missing = reader(scratch / "missing.json")
        assert missing.value is None and missing.problems == ()


@FUZZ
@given(lines=st.lists(st.one_of(st.binary(max_size=40),
                                damaged_bytes(LINE_PARSERS[0][2]),
                                mutated(LINE_PARSERS[0][2]).map(lambda d: json.dumps(d).encode())), max_size=5))
def test_telemetry_batch_decoding_never_raises(lines):
    records = telemetry.decode_folded_lines([line.replace(b"\n", b" ") for line in lines])
    assert records is None or len(records) <= len(lines)
