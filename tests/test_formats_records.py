"""The host-side record idiom (console/formats/records.py) and bounded reads.

Records are msgspec Structs: a wrong type is one FormatError line naming the field path,
unknown keys are ignored, what is absent is None (never 0), and ``to_json`` parses back
to an equal record (replay re-parses recorded events).
"""

from __future__ import annotations

import json
import os

import pytest

from console.formats.bounded_read import read_regular_file
from console.formats.handoff import parse_handoff
from console.formats.journal import parse_journal
from console.formats.live_memory import parse_live_memory
from console.formats.memory import parse_memory_version
from console.formats.problems import FormatError
from console.formats.records import Record, Version, convert, field_error
from console.formats.supervisor import parse_active_episode, parse_attempt, parse_state
from console.formats.telemetry_summary import parse_telemetry_summary


class Point(Record, frozen=True):
    version: Version | None = None
    counts: tuple[int, ...] | None = None


def test_errors_name_the_field_path_on_one_line():
    with pytest.raises(FormatError) as info:
        convert({"counts": [1, "2"]}, Point)
    assert str(info.value) == "counts[1]: Expected `int`, got `str`"
    with pytest.raises(FormatError) as info:
        convert({"version": "latest"}, Point, "runs[3]")
    assert str(info.value).startswith("runs[3].version: 'latest' is not a version (vN)")
    with pytest.raises(FormatError, match="^Expected `object`, got `array`$"):
        convert([], Point)
    assert field_error("Expected `int`, got `str` - at `$[2].a`", "attempts") == "attempts[2].a: Expected `int`, got `str`"


def test_versions_read_both_spellings_and_encode_as_numbers():
    assert convert({"version": "v12"}, Point).version == 12 == convert({"version": 12}, Point).version
    for bad in (True, -1, "v", 1.5, "12.0"):
        with pytest.raises(FormatError, match="version"):
            convert({"version": bad}, Point)
    assert json.dumps(convert({"version": "v7"}, Point).to_json()) == '{"version": 7, "counts": null}'


class Node(Record, frozen=True):
    child: Node | None = None


def test_deeply_nested_objects_are_a_format_error_not_a_crash():
    deep: dict[str, object] = {}
    for _ in range(100_000):
        deep = {"child": deep}
    with pytest.raises(FormatError, match="^journal is nested too deeply$"):
        convert(deep, Node, "journal")


def test_unknown_keys_ignored_and_absent_is_none_never_zero():
    active = parse_active_episode({"episode": 2, "from_a_newer_supervisor": {"x": 1}})
    assert active.episode == 2 and active.restart_count is None and active.fast_trials is None
    state = parse_state({"episodes": 1})
    assert state.tokens is None and state.attempts is None


@pytest.mark.parametrize(
    "parse, document",
    [
        (parse_handoff, {"status": "candidate_ready", "candidate_commit": "b" * 40, "last_trial_commit": ""}),
        (parse_active_episode, {"episode": 9, "memory_version": "v10", "mode": "goal", "base_commit": ""}),
        (parse_attempt, {"episode": 3, "version": "v5", "next_directions": ["a", {"idea": "tma"}],
                         "verification": {"gate": "FAIL", "error": "slower"},
                         "telemetry": {"measurement": "partial", "reason_codes": ["r"]}}),
        (parse_state, {"episodes": 2, "tokens": 10, "attempts": [{"episode": 1, "version": 2}],
                       "usage_receipts": {"i": 3}}),
        (parse_journal, {"memory_version": "v3", "experiments": [{"name": "n", "evidence": {"a": 1}, "own": True}],
                         "outcome": {"summary": "s", "next_directions": ["x"]}}),
        (parse_live_memory, {"schema": "atrex_long_horizon_live_v1", "version": "v4",
                             "latest_experiment": {"name": "n", "kept": 1}}),
        (parse_memory_version, {"version": "v3", "performance": {"latency_us_geomean": 4.0, "dram_peak_utilization_pct": 80},
                                "experience": {"experiments": [1, 2]}, "open_directions": [{"k": 1}]}),
        (parse_telemetry_summary, {"schema": "s", "version": "v2", "phase_tokens": {
            "phases": {"profile": {"usage": {"total_tokens": 5}}}, "coverage": {"profile": 1.0}}}),
    ],
)
def test_to_json_parses_back_to_an_equal_record(parse, document):
    record = parse(document)
    assert parse(json.loads(json.dumps(record.to_json()))) == record


def test_derived_fields_survive_the_round_trip():
    memory = parse_memory_version({"performance": {"dram_peak_utilization_pct": 80}, "experience": {"experiments": [1, 2]}}, 4)
    assert memory.version == 4 and memory.peak_utilization_pct == {"dram": 80.0} and memory.experiment_count == 2
    again = parse_memory_version(memory.to_json())
    assert again.version == 4 and again.peak_utilization_pct == {"dram": 80.0}
    live = parse_live_memory({"schema": "atrex_long_horizon_live_v1"})
    assert live.schema_version == "atrex_long_horizon_live_v1"
    attempt = parse_attempt({"base_commit": "", "telemetry": {"summary": "t.json"}})
    assert attempt.base_commit is None and attempt.telemetry_summary == "t.json"


def test_regular_files_only(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_bytes(b"{}")
    assert read_regular_file(plain) == b"{}"
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing.json")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "zero.json"
    os.symlink("/dev/zero", link)
    for path, why in ((fifo, "a FIFO"), (link, "a device"), (tmp_path, "a directory")):
        with pytest.raises(FormatError, match=why):
            read_regular_file(path)
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 101)
    with pytest.raises(FormatError, match="101 bytes, more than the 100 allowed"):
        read_regular_file(big, limit=100)
    assert read_regular_file(big, limit=101) == b"x" * 101
    with pytest.raises(FormatError, match="unusable path"):
        read_regular_file(str(tmp_path / "nul\0.json"))
