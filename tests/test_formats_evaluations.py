"""Evaluator RESULT_JSON lines and evaluations.jsonl records (FORMATS §6)."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys

import pytest

from console.formats.evaluations import (
    RESULT_PREFIX,
    EvaluationRecord,
    parse_evaluation_line,
    parse_result_json,
)
from console.formats.gpu_side import evaluation_record
from console.formats.plainjson import append_json_line
from console.formats.problems import FormatError
from console.jobs.results import ResultScanner

RESULT = {
    "all_pass": True,
    "failures": [],
    "latency_us_geomean": 41.25,
    "latency_us_arith_mean": 44.0,
    "latency_us_by_shape": {"0": 38.5, "1": 44.2, "3f1c2a": 49.3},
    "speedup_vs_ref_geomean": 1.62,
    "max_abs_err": 0.0039,
    "max_rel_err": 0.011,
    "evaluator": "test_kernel.py",
    "eval_id": "eval-5c1e",
}
# The newer generation adds a performance objective and score; older ones name the geomean
# latency_us and lack most fields.
NEWER_RESULT = dict(RESULT, performance_objective="shape_speedup_arithmetic_mean", performance_score=1.71)
OLDER_RESULT = {"all_pass": False, "failures": ["sid=3: correctness mismatch"], "latency_us": 52.0}

SHA = hashlib.sha256(b"kernel").hexdigest()


def test_result_fields_and_unknowns():
    result = parse_result_json(RESULT)
    assert result.all_pass is True and result.failures == ()
    assert result.latency_us_by_shape["3f1c2a"] == 49.3
    assert result.failures is not None and result.all_pass == (not result.failures)  # agree
    assert result.performance_score is None  # unknown, never 0
    newer = parse_result_json(NEWER_RESULT)
    assert (newer.performance_objective, newer.performance_score) == ("shape_speedup_arithmetic_mean", 1.71)
    older = parse_result_json(OLDER_RESULT)
    assert older.latency_us_geomean == 52.0
    assert older.latency_us_arith_mean is None and older.max_abs_err is None and older.eval_id is None
    assert older.failures is not None and older.all_pass == (not older.failures)
    disagreeing = parse_result_json({"all_pass": True, "failures": ["x"]})  # kept as written, for the gate to see
    assert disagreeing.all_pass and disagreeing.failures == ("x",)
    assert json.loads(json.dumps(result.to_json()))["latency_us_by_shape"]["0"] == 38.5


@pytest.mark.parametrize(
    "obj, field",
    [
        ({"all_pass": "true"}, "all_pass"),
        ({"all_pass": 1}, "all_pass"),
        ({}, "all_pass"),
        ({"all_pass": True, "latency_us_geomean": True}, "latency_us_geomean"),
        ({"all_pass": True, "latency_us_geomean": "41"}, "latency_us_geomean"),
        ({"all_pass": True, "failures": "sid=1"}, "failures"),
        ({"all_pass": True, "failures": [3]}, "failures[0]"),
        ({"all_pass": True, "latency_us_by_shape": {"0": "fast"}}, "latency_us_by_shape"),
        ({"all_pass": True, "latency_us_by_shape": [1.0]}, "latency_us_by_shape"),
        ([RESULT], "document"),
    ],
)
def test_result_wrong_types_name_the_field(obj, field):
    with pytest.raises(FormatError) as info:
        parse_result_json(obj)
    message = str(info.value)
    assert field in message and "\n" not in message


def last_result(stdout: str | bytes):
    """The verdict the sandbox takes from an evaluator's stdout (the RESULT_JSON object, checked)."""
    scanner = ResultScanner()
    scanner.feed(stdout.encode() if isinstance(stdout, str) else stdout)
    return scanner.result()


def test_the_last_result_line_counts_amid_noise():
    stdout = "\n".join(
        [
            "compiling...",
            RESULT_PREFIX + json.dumps(OLDER_RESULT),
            "[test_kernel] shape 3 done",
            RESULT_PREFIX + json.dumps(RESULT),
            "bye",
        ]
    )
    assert last_result(stdout)["latency_us_geomean"] == 41.25
    assert last_result(stdout.encode())["all_pass"] is True
    assert last_result("no result here\n") is None
    with pytest.raises(FormatError):
        last_result(RESULT_PREFIX + "{truncated")


def test_nan_written_by_python_json_is_read():
    # A NaN-producing kernel: Python's json writes NaN, which strict JSON refuses.
    line = RESULT_PREFIX + json.dumps(dict(OLDER_RESULT, max_abs_err=float("nan")))
    assert math.isnan(last_result(line)["max_abs_err"])


def test_the_evaluator_line_of_a_real_process():
    code = f"import json; print('warmup'); print({RESULT_PREFIX!r} + json.dumps({RESULT!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert last_result(out)["eval_id"] == "eval-5c1e"


def test_schema_2_record_round_trip(tmp_path):
    record = evaluation_record(NEWER_RESULT, kernel_sha256=SHA, gateway_kind="run", job_id="job-17")
    path = tmp_path / "evaluations.jsonl"
    append_json_line(path, record)
    append_json_line(path, {"schema_version": 1, "timestamp": "2025-05-01T10:00:00+00:00", "result": RESULT})
    first, second = path.read_bytes().splitlines()
    parsed = parse_evaluation_line(first)
    assert isinstance(parsed, EvaluationRecord)
    assert (parsed.schema_version, parsed.kernel_sha256, parsed.gateway_kind, parsed.job_id) == (2, SHA, "run", "job-17")
    assert parsed.result.performance_score == 1.71
    old = parse_evaluation_line(second)
    assert old.schema_version == 1 and old.kernel_sha256 is None and old.gateway_kind is None
    assert old.timestamp == "2025-05-01T10:00:00+00:00"


@pytest.mark.parametrize(
    "line, field",
    [
        (b"", "invalid JSON"),
        (b'{"schema_version": 2', "invalid JSON"),
        (b"\xff\xfe garbage", "invalid JSON"),
        (b'{"result": {"all_pass": true}}', "schema_version"),
        (b'{"schema_version": "2", "result": {"all_pass": true}}', "schema_version"),
        (b'{"schema_version": true, "result": {"all_pass": true}}', "schema_version"),
        (b'{"schema_version": 0, "result": {"all_pass": true}}', "schema_version"),
        (b'{"schema_version": 2}', "result"),
        (b'{"schema_version": 2, "result": []}', "result"),
        (b'{"schema_version": 2, "result": {"all_pass": true}, "kernel_sha256": 5}', "kernel_sha256"),
        (b'{"schema_version": 2, "result": {"all_pass": true, "max_rel_err": "1e-3"}}', "result.max_rel_err"),
    ],
)
def test_bad_lines(line, field):
    with pytest.raises(FormatError) as info:
        parse_evaluation_line(line)
    assert field in str(info.value)


def test_writer_refuses_what_the_reader_would_refuse():
    with pytest.raises(FormatError):
        evaluation_record({"failures": []}, kernel_sha256=SHA, gateway_kind="run", job_id=None)
    with pytest.raises(FormatError):
        evaluation_record(RESULT, kernel_sha256="abc", gateway_kind="run", job_id=None)
    with pytest.raises(FormatError):
        evaluation_record(RESULT, kernel_sha256=SHA, gateway_kind="profile", job_id=None)
    from_parsed = evaluation_record(parse_result_json(RESULT).raw, kernel_sha256=SHA, gateway_kind="dev", job_id=None)
    assert from_parsed["result"] == RESULT
