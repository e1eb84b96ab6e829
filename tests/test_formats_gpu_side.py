"""The GPU machine's own checks (gpu_side, standard library) and the host's msgspec records
accept and refuse the same evaluator results, ABBA runs and job records, and score runs alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.formats import abba, evaluations, gpu_side, job_record
from console.formats.problems import FormatError

REPO = Path(__file__).resolve().parent.parent

RESULT = {"all_pass": True, "failures": [], "latency_us_geomean": 41.25, "latency_us_arith_mean": 44.0,
          "latency_us_by_shape": {"0": 38.5, "1": None}, "speedup_vs_ref_geomean": 1.6, "max_abs_err": 0.004,
          "max_rel_err": 0.01, "evaluator": "test_kernel.py", "eval_id": 7, "performance_objective": "x",
          "performance_score": 1.7, "latency_us": 40.0}
RUN = {"revision": "incumbent", "repeat": 0, "exit_code": 0, "result": RESULT, "stdout_tail": "", "stderr_tail": ""}
JOB = {"schema": gpu_side.JOB_SCHEMA, "job_id": "20260101T000000Z-aaaaaa", "state": "succeeded", "argv": ["python3"],
       "kind": "run", "backend": "local", "workspace": "/w", "created_at": "2026-01-01T00:00:00+00:00",
       "started_at": None, "finished_at": None, "exit_code": 0, "result_code": 0, "sync": ["profiles"], "timeout": 30,
       "pid": 12, "pgid": 12, "sandbox_pid": None, "launcher": "console", "slot": 1, "operation_id": "op",
       "category": "benchmark", "message": None, "synced": ["a"], "refused": [{"path": "p", "reason": "r"}]}

# Each pair: the GPU side's check, the host's reader, a well-formed object of that format.
PAIRS = [
    (gpu_side.check_result, evaluations.parse_result_json, RESULT),
    (gpu_side.check_run, abba.parse_abba_run, RUN),
    (gpu_side.check_job_record, job_record.job_record_from_obj, JOB),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
# Values a field of these formats may hold, right or wrong for it.
field_values = st.sampled_from([None, True, 0, -1, 2.5, "", "x", "incumbent", "queued", gpu_side.JOB_SCHEMA, [], ["a"],
                                [3], {}, {"0": 1.0}, {"0": "fast"}, [{}], [1], RESULT]) | json_values


def verdict_of(check, obj):
    """Whether ``check`` accepts ``obj``, and the field its refusal names (before the colon)."""
    try:
        check(obj)
    except FormatError as exc:
        return str(exc).split(":")[0]
    return None


@pytest.mark.parametrize("check, read, good", PAIRS, ids=lambda v: getattr(v, "__name__", ""))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_both_sides_accept_and_refuse_the_same(check, read, good, data):
    obj = dict(good)
    for key in data.draw(st.lists(st.sampled_from(sorted(good)), max_size=3, unique=True)):
        if data.draw(st.booleans()):
            obj[key] = data.draw(field_values)
        else:
            del obj[key]
    gpu, host = verdict_of(check, obj), verdict_of(read, obj)
    assert (gpu is None) == (host is None), (gpu, host, obj)


def test_both_sides_name_the_same_values():
    assert get_args(abba.Revision) == gpu_side.REVISIONS and get_args(abba.Gate) == gpu_side.GATES
    assert get_args(job_record.JobState) == gpu_side.JOB_STATES
    assert get_args(get_type_hints(job_record.JobRecord)["schema"]) == (gpu_side.JOB_SCHEMA,)


@pytest.mark.parametrize("check, read, good", PAIRS, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("bad", [[], "x", 3, None])
def test_both_sides_refuse_what_is_not_an_object(check, read, good, bad):
    with pytest.raises(FormatError):
        check(bad)
    with pytest.raises(FormatError):
        read(bad)


@pytest.mark.parametrize("field, value, named", [
    ("all_pass", "true", "result.all_pass"),
    ("failures", [3], "result.failures[0]"),
    ("latency_us_geomean", "41", "result.latency_us_geomean"),
    ("latency_us_by_shape", {"0": "fast"}, "result.latency_us_by_shape"),
])
def test_a_refused_run_names_the_same_field_path_on_both_sides(field, value, named):
    run = dict(RUN, result=dict(RESULT, **{field: value}))
    for check in (gpu_side.check_run, abba.parse_abba_run):
        with pytest.raises(FormatError) as info:
            check(run, "runs[2]")
        assert str(info.value).startswith(f"runs[2].{named}"), info.value


def run_obj(revision, repeat, latency, exit_code=0, all_pass=True):
    result = None if latency is None else {"all_pass": all_pass, "latency_us_geomean": latency}
    return {"revision": revision, "repeat": repeat, "exit_code": exit_code, "result": result}


runs_strategy = st.lists(st.builds(
    run_obj, st.sampled_from(gpu_side.REVISIONS), st.integers(0, 2),
    st.none() | st.floats(allow_nan=True) | st.integers(-5, 10**6), st.none() | st.integers(-1, 1), st.booleans(),
), max_size=6)


@settings(max_examples=300, deadline=None)
@given(runs=runs_strategy, repeats=st.integers(-1, 3), threshold=st.floats(-50, 50))
def test_the_tool_and_the_host_score_runs_alike(runs, repeats, threshold):
    gpu = gpu_side.abba_verdict([gpu_side.check_run(run) for run in runs], repeats, threshold)
    host = abba.compute_verdict([abba.parse_abba_run(run) for run in runs], repeats, threshold)
    assert gpu == {key: getattr(host, key) for key in gpu}


def test_what_the_sandbox_writes_the_host_reads():
    record = gpu_side.evaluation_record(RESULT, kernel_sha256="f" * 64, gateway_kind="run", job_id="j")
    parsed = evaluations.parse_evaluation_line(json.dumps(record))
    assert parsed.result.raw == RESULT and parsed.kernel_sha256 == "f" * 64 and parsed.result.eval_id == "7"
    checked = gpu_side.check_job_record(JOB)
    assert job_record.job_record_from_obj(checked).raw == JOB


def test_the_gpu_side_imports_the_standard_library_only():
    code = ("import sys; sys.modules['msgspec'] = sys.modules['orjson'] = None\n"
            "import console.formats.gpu_side, console.jobs.runner\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
