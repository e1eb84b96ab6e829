"""The compiled telemetry decoder against the msgspec reader it stands in for.

``_telemetry_rows.decode_block`` may leave any line to msgspec (it stops there and says
where; ``decode_telemetry_block`` reads that line with msgspec and goes on), but whatever
it reads must give exactly the rows and times that ``decode_telemetry_block_msgspec``
gives. These tests generate records around the edges of what the fast path reads
(escapes, non-ASCII, wrong types, odd numbers and times, extra keys, mutated bytes) and
compare the two value by value.
"""

from __future__ import annotations

import json
import math
import random
import struct
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.formats import telemetry
from console.formats.telemetry import decode_telemetry_block, decode_telemetry_block_msgspec

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

if telemetry.COMPILED:
    from console.formats._telemetry_rows import decode_block
else:  # tests/test_spine_ingest.py fails and says why
    pytestmark = pytest.mark.skip(reason="the compiled telemetry decoder is not built")


def same(a, b) -> bool:
    """Equal values, with floats compared bit for bit (so -0.0 != 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def fast_only(block: bytes) -> tuple | None:
    """What the compiled decoder alone makes of a block: (rows, ats), or None when it
    leaves a line to msgspec."""
    rows, ats, declined = decode_block(block)
    return (rows, ats) if declined is None else None


def check_agrees(block: bytes) -> tuple | None:
    """Compare the ingest path with msgspec alone on one block; return what the compiled
    decoder alone gave (None when it left a line to msgspec)."""
    combined = decode_telemetry_block(block)
    reference = decode_telemetry_block_msgspec(block)
    assert (combined is None) == (reference is None), (block[:300], combined, reference)
    if combined is not None:
        assert same(combined[0], reference[0]), (block[:300], combined[0], reference[0])
        assert same(combined[1], reference[1]), (block[:300], combined[1], reference[1])
    rows, ats, _ = decode_block(block)
    if reference is not None:  # what the compiled decoder read before stopping agrees too
        assert same(rows, reference[0][: len(rows)]) and same(ats, reference[1][: len(ats)])
    return fast_only(block)


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

# -- what writers emit is read by the fast path -------------------------------------------


def test_the_benchmark_workload_and_the_example_episode_take_the_fast_path(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workloads import telemetry_lines

    lines = b"".join(telemetry_lines(5000, seed=3)).rstrip(b"\n")
    assert check_agrees(lines) is not None

    with tarfile.open(ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz") as archive:
        members = [m for m in archive.getmembers() if m.name.endswith("telemetry.jsonl")]
        assert members
        for member in members:
            data = archive.extractfile(member).read().rstrip(b"\n")
            decoded = check_agrees(data)
            assert decoded is not None, member.name
            assert len(decoded[0]) == data.count(b"\n") + 1


def test_records_written_by_iteration_trace_take_the_fast_path(tmp_path):
    env = {"ATREX_TELEMETRY_CAMPAIGN_ID": "c", "ATREX_TELEMETRY_ITERATION_ID": "episode-0001",
           "ATREX_TELEMETRY_ATTEMPT_ID": "invocation-2"}
    records = [
        telemetry.phase_record("start", "research", env=env),
        telemetry.source_read_record("public_web", "https://example.org/a?b", env=env),
        telemetry.sandbox_started_record("sandbox-1-2", "benchmark", env=env),
        telemetry.sandbox_completed_record("sandbox-1-2", "benchmark", 1.25, exit_status=3, env=env),
        telemetry.phase_record("end", "research", env=env),
    ]
    block = b"\n".join(plain_line(r) for r in records)
    rows, ats = check_agrees(block)
    assert [r[0] for r in rows] == [r["event"] for r in records]
    assert rows[0][1:4] == ("episode-0001", "invocation-2", "research")
    assert rows[3][9:12] == (1.25, "failed", 3)
    assert all(isinstance(at, float) for at in ats)


@given(st.lists(st.integers(0, 10**19 - 1), min_size=1, max_size=50), st.data())
@FUZZ
def test_decimal_numbers_round_exactly_as_python_does(mantissas, data):
    lines = []
    texts = []
    for mantissa in mantissas:
        digits = str(mantissa)
        point = data.draw(st.integers(0, len(digits)))
        text = digits if point == len(digits) else f"{digits[:point] or '0'}.{digits[point:]}"
        if data.draw(st.booleans()):
            text = "-" + text
        texts.append(text)
        lines.append(plain_line(dict(BASE)).replace(b"1010.0530665625782", text.encode()))
    rows, _ = check_agrees(b"\n".join(lines))
    for row, text in zip(rows, texts):
        # An integer literal is converted as an integer, as msgspec does ("-0" is 0.0).
        assert same(row[4], float(text) if "." in text else float(int(text))), text


def test_a_hundred_thousand_float_reprs_round_trip():
    rng = random.Random(11)
    values = [rng.uniform(0, 10 ** rng.randint(0, 12)) for _ in range(100_000)]
    values += [rng.random() * 1e-6, 0.1, 1e-19, 9007199254740993.0, 2.0**53 + 2, 123456789012345678.0]
    block = b"\n".join(plain_line(dict(BASE, monotonic_seconds=v)) for v in values)
    rows, _ = check_agrees(block)
    assert all(row[4] == v for row, v in zip(rows, values))


@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 12, 31)),
    st.sampled_from(["+00:00", "Z", "", "+02:00", "-00:00", "z"]),
    st.integers(0, 9),
)
@FUZZ
def test_timestamps_convert_exactly_as_the_reader_does(moment, suffix, fraction_digits):
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if fraction_digits:
        text += "." + f"{moment.microsecond:06d}{moment.microsecond:06d}"[:fraction_digits]
    check_agrees(plain_line(dict(BASE, timestamp=text + suffix)))
    if suffix in ("+00:00", "Z", "") and fraction_digits <= 6:
        rows, ats = fast_only(plain_line(dict(BASE, timestamp=text + suffix)))
        expected = datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()
        assert same(ats[0], expected)


# -- anything else: declined, or read the same ------------------------------------------

FIELDS = ["action", "attempt_id", "campaign_id", "category", "duration_seconds", "event", "exit_status",
          "failure_type", "iteration_id", "marker_id", "measurement", "monotonic_seconds", "operation_id",
          "phase", "reference", "schema_version", "source", "source_kind", "status", "timestamp"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
FIELD_VALUES = st.one_of(
    st.sampled_from(["phase_started", "phase_completed", "source_read", "sandbox_operation_started",
                     "sandbox_operation_completed", "profile", "episode-0001", "2026-11-01T00:00:00+00:00",
                     "2026-02-29T00:00:00Z", "2024-02-29T23:59:59.5", "x\\u00e9", "a\"b", "é", ""]),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    JSON_VALUES,
)


@st.composite
def records(draw):
    record = {}
    for name in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=len(FIELDS))):
        record[name] = draw(FIELD_VALUES)
    if draw(st.booleans()):
        record["event"] = draw(st.sampled_from(["phase_started", "phase_completed", "source_read",
                                                "sandbox_operation_completed"]))
    if draw(st.booleans()):
        record["phase"] = draw(st.sampled_from(["profile", "benchmark"]))
    for _ in range(draw(st.integers(0, 2))):
        record[draw(st.text(max_size=8))] = draw(JSON_VALUES)
    return record


def render(record: dict, draw) -> bytes:
    keys = list(record)
    if draw(st.booleans()):
        keys.sort()
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]))
    text = json.dumps({k: record[k] for k in keys}, separators=separators, ensure_ascii=draw(st.booleans()))
    return text.encode()


@given(st.lists(records(), min_size=1, max_size=4), st.data())
@FUZZ
def test_generated_records_are_declined_or_read_the_same(batch, data):
    lines = [render(r, data.draw) for r in batch]
    if data.draw(st.booleans()):
        lines.insert(data.draw(st.integers(0, len(lines))), b"")
    check_agrees(b"\n".join(lines))


@given(st.binary(min_size=1, max_size=8), st.integers(0, 400), st.sampled_from(["insert", "replace", "delete"]))
@FUZZ
def test_mutated_lines_are_declined_or_read_the_same(junk, where, how):
    line = plain_line(dict(BASE, event="sandbox_operation_completed", duration_seconds=1.5, exit_status=0,
                           status="succeeded", operation_id="sandbox-1-2", category="profile"))
    where %= len(line)
    if how == "insert":
        mutated = line[:where] + junk + line[where:]
    elif how == "replace":
        mutated = line[:where] + junk + line[where + len(junk):]
    else:
        mutated = line[:where] + line[where + len(junk):]
    check_agrees(plain_line(BASE) + b"\n" + mutated)


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
        b'{"event":"source_read","timestamp":"2026-13-01T00:00:00Z"}',
        b'{"event":"source_read","timestamp":"2026-02-29T00:00:00Z"}',
        b'{"event":"source_read"} {"event":"source_read"}',
        b'{"event":"source_read"',
        b'["event"]',
        b"   ",
        b"{}",
    ],
)
def test_edge_lines_are_declined_by_the_fast_path(line):
    assert fast_only(line) is None
    check_agrees(line)


def test_defaults_and_nulls_match_the_record_type():
    rows, ats = fast_only(b'{"event":"source_read"}\n\n{"event":"source_read","reference":null,"timestamp":null}')
    assert rows[0] == ("source_read", "unknown", "attempt") + (None,) * 10
    assert rows[1] == rows[0]
    assert ats == [None, None]
    check_agrees(b'{"event":"source_read"}')


def test_a_bad_line_fails_the_block_and_an_odd_one_costs_only_itself():
    good = plain_line(BASE)
    assert decode_telemetry_block(good + b"\nnot json\n" + good) is None  # ingest then reports it by offset
    odd = b'{"event":"source_read","reference":"caf\xc3\xa9"}'  # valid, but not ASCII
    block = good + b"\n" + odd + b"\n" + good
    rows, ats, declined = decode_block(block)
    assert len(rows) == 1 and declined == (len(good) + 1, len(good) + 1 + len(odd))
    rows, ats = decode_telemetry_block(block)
    assert [row[6] for row in rows] == [None, "café", None]
    check_agrees(block)


def test_the_fast_path_accepts_the_exact_bound_of_its_number_range():
    assert math.isclose(fast_only(plain_line(dict(BASE, monotonic_seconds=1e-19)))[0][0][4], 1e-19)
    assert fast_only(plain_line(dict(BASE, exit_status=10**18 - 1)))[0][0][11] == 10**18 - 1
    assert fast_only(plain_line(dict(BASE, exit_status=-(10**18) + 1)))[0][0][11] == -(10**18) + 1
    check_agrees(plain_line(dict(BASE, exit_status=10**18)))
    moment = datetime(2200, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
    rows, ats = fast_only(plain_line(dict(BASE, timestamp=moment.isoformat())))
    assert ats[0] == moment.timestamp()
    assert fast_only(plain_line(dict(BASE, timestamp=(moment + timedelta(days=1)).isoformat()))) is None


PLAIN_TEXT = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\')
STRING_FIELDS = ["action", "campaign_id", "category", "failure_type", "marker_id", "measurement", "operation_id",
                 "reference", "schema_version", "source", "source_kind", "status"]


def random_plain_record(rng: random.Random) -> dict:
    """A record in the plain form, with every field's value drawn at random."""
    record = {"event": rng.choice(["phase_started", "phase_completed", "source_read", "sandbox_operation_started",
                                   "sandbox_operation_completed"])}
    if record["event"].startswith("phase") or rng.random() < 0.3:
        record["phase"] = "".join(rng.choices(PLAIN_TEXT, k=rng.randint(0, 12)))
    for name in STRING_FIELDS + ["iteration_id", "attempt_id"]:
        if rng.random() < 0.5:
            record[name] = "".join(rng.choices(PLAIN_TEXT, k=rng.randint(0, 40)))
    for name in STRING_FIELDS:
        if rng.random() < 0.05:
            record[name] = None
    for name in ("monotonic_seconds", "duration_seconds"):
        roll = rng.random()
        if roll < 0.4:
            record[name] = rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-12, 6)
        elif roll < 0.6:
            record[name] = rng.randint(-(2**63), 2**63)
        elif roll < 0.7:
            record[name] = None
    if rng.random() < 0.5:
        record["exit_status"] = rng.choice([None, rng.randint(-(10**18) + 1, 10**18 - 1), rng.randint(-300, 300)])
    if rng.random() < 0.9:
        moment = datetime(1970, 1, 1) + timedelta(microseconds=rng.randrange(230 * 365 * 86400 * 10**6))
        record["timestamp"] = moment.isoformat(timespec=rng.choice(["seconds", "milliseconds", "microseconds"]))
        record["timestamp"] += rng.choice(["", "Z", "+00:00"])
    if rng.random() < 0.2:
        record["extra"] = rng.choice([[1, {"a": None}], {"b": [True, False]}, -0.5, "x", None])
    return record


def test_random_plain_records_are_accepted_and_read_the_same():
    rng = random.Random(2026)
    for _ in range(40):
        records = [random_plain_record(rng) for _ in range(500)]
        keys_sorted = rng.random() < 0.5
        lines = []
        for record in records:
            items = sorted(record.items()) if keys_sorted else rng.sample(list(record.items()), len(record))
            lines.append(json.dumps(dict(items), separators=rng.choice([(",", ":"), (", ", ": ")])).encode())
        decoded = check_agrees(b"\n".join(lines))
        assert decoded is not None
        assert len(decoded[0]) == len(records)


def test_a_cold_scan_folds_the_same_state_with_and_without_the_compiled_decoder(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workloads import write_telemetry_workspace

    from console.episode.session import Session

    path = Path(write_telemetry_workspace(str(tmp_path), 20_000))
    bad_offset = path.stat().st_size
    with path.open("ab") as fh:  # one bad line and one the fast path declines, mid-file
        fh.write(b'{"event":"phase_started"\n')
        fh.write(b'{"event":"source_read","reference":"caf\\u00e9","timestamp":"2026-11-02T00:00:00+02:00"}\n')
    with path.open("ab") as fh:
        fh.write(b"".join(
            (json.dumps(dict(BASE, iteration_id="episode-9999", monotonic_seconds=float(i)), sort_keys=True) + "\n").encode()
            for i in range(300)
        ))

    def scan(compiled: bool):
        previous = telemetry.use_compiled_decoder(compiled)
        try:
            return Session(str(tmp_path)).scan()
        finally:
            telemetry.use_compiled_decoder(previous)

    fast, reference = scan(True), scan(False)
    assert fast.telemetry_events == reference.telemetry_events == 20_000 + 1 + 300
    for name in ("phase_spans", "source_reads", "sandbox_operations", "open_spans"):
        assert list(getattr(fast, name)) == list(getattr(reference, name)), name
    assert dict(fast.phase_totals) == dict(reference.phase_totals)
    assert (fast.orchestration_seconds, fast.last_event_at) == (reference.orchestration_seconds, reference.last_event_at)
    assert [(u.offset, u.error) for u in fast.unreadable] == [(u.offset, u.error) for u in reference.unreadable]
    assert [u.offset for u in fast.unreadable] == [bad_offset]


def test_every_prefix_and_every_single_byte_change_of_a_record():
    """Exhaustive over positions: each cut and each structural byte swapped in."""
    line = plain_line(dict(BASE, event="sandbox_operation_completed", duration_seconds=0.25, exit_status=-3,
                           status="failed", operation_id="sandbox-1-2", category="profile", reference="a/b",
                           timestamp="2026-11-01T00:16:50Z"))
    accepted = 0
    for cut in range(len(line) + 1):
        check_agrees(line[:cut])
    for where in range(len(line)):
        for byte in b'"\\{}[]:,0-.eE+nt \t\r\x00\x7f\x80\xff':
            if check_agrees(line[:where] + bytes([byte]) + line[where + 1:]) is not None:
                accepted += 1
    assert accepted > 0  # some changes stay valid records (a digit, a letter inside a string)
