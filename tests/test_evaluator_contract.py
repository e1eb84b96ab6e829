"""Evaluator pieces that need no GPU: contract loading, RESULT_JSON, the worker watchdog."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import evaluate  # noqa: E402
from problem_contract import Case, ProblemError, load_contract, select_cases  # noqa: E402

PROBLEMS = REPO / "examples" / "problems"
PROBLEM = PROBLEMS / "row_softmax"
PREFIX = "[test_kernel] RESULT_JSON="


def copy_problem(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("definition.json", "workload.jsonl", "reference.py", "input.py"):
        shutil.copy(PROBLEM / name, ws / name)
    shutil.copy(PROBLEM / "kernel_naive.py", ws / "kernel.py")
    return ws


def test_definition_layout_gives_uuids_and_definition_axis_order():
    contract = load_contract(PROBLEM)
    assert contract.layout == "definition"
    assert [(c.axes["rows"], c.axes["cols"]) for c in contract.cases] == [
        (4096, 1024), (8192, 2048), (2048, 8192), (16384, 512), (1024, 32768),
        (4099, 1000), (1000, 777), (257, 10001), (1, 4099), (3001, 1),
    ]
    assert contract.tolerance == {"atol": 1e-12, "rtol": 1e-4}
    first = contract.cases[0]
    assert first.shape_id == "4923a465-819c-5029-b058-8d37b554d4c9"
    assert first.label == "sid=0 rows=4096 cols=1024"


def test_agent_problem_and_shapes_layouts(tmp_path):
    (tmp_path / "input.py").write_text("def make_inputs(axes, seed):\n    return ()\n")
    (tmp_path / "shapes.json").write_text(json.dumps([{"n": 4}, {"id": "big", "n": 1 << 20}]))
    contract = load_contract(tmp_path)
    assert contract.layout == "shapes"
    assert [(c.shape_id, c.axes) for c in contract.cases] == [("0", {"n": 4}), ("big", {"n": 1 << 20})]
    (tmp_path / "agent_problem.json").write_text(json.dumps({"shapes": [{"uuid": "u1", "axes": {"m": 8}}]}))
    contract = load_contract(tmp_path)
    assert contract.layout == "agent_problem"
    assert contract.cases == (Case(0, "u1", {"m": 8}),)


def test_broken_contracts_name_file_and_offset(tmp_path):
    with pytest.raises(ProblemError, match="no contract"):
        load_contract(tmp_path)
    (tmp_path / "definition.json").write_text("{}")
    (tmp_path / "workload.jsonl").write_bytes(b'{"workload": {"uuid": "a", "axes": {"n": 1}}}\n{"workload": 3}\n')
    with pytest.raises(ProblemError, match=r"workload.jsonl@46: bad workload line"):
        load_contract(tmp_path)
    (tmp_path / "definition.json").unlink()
    (tmp_path / "shapes.json").write_text("[{}]")
    with pytest.raises(ProblemError, match="needs input.py"):
        load_contract(tmp_path)


def test_select_by_index_id_and_comma_lists():
    cases = load_contract(PROBLEM).cases
    chosen = select_cases(cases, ["3", "4923a465-819c-5029-b058-8d37b554d4c9,4", "3"])
    assert [c.index for c in chosen] == [3, 0, 4]
    assert select_cases(cases, []) == cases
    with pytest.raises(ProblemError, match="unknown shape '19'"):
        select_cases(cases, ["19"])


def test_result_aggregates_only_complete_measurements():
    cases = (Case(0, "a", {"n": 1}), Case(1, "b", {"n": 2}))
    good = {
        0: {"ok": True, "latency_us": 10.0, "ref_latency_us": 40.0, "max_abs_err": 1e-6, "max_rel_err": 1e-5},
        1: {"ok": True, "latency_us": 40.0, "ref_latency_us": 40.0, "max_abs_err": 3e-6, "max_rel_err": 2e-5},
    }
    result = evaluate.build_result(cases, good, eval_id="e1")
    assert result["all_pass"] is True and result["failures"] == []
    assert result["latency_us_geomean"] == 20.0 and result["latency_us_arith_mean"] == 25.0
    assert result["speedup_vs_ref_geomean"] == 2.0
    assert result["latency_us_by_shape"] == {"a": 10.0, "b": 40.0}
    assert (result["max_abs_err"], result["max_rel_err"]) == (3e-6, 2e-5)
    partial = evaluate.build_result(cases, {0: good[0], 1: {"ok": False, "failure": "sid=1: correctness mismatch"}}, eval_id="e2")
    assert partial["all_pass"] is False and partial["failures"] == ["sid=1: correctness mismatch"]
    assert partial["latency_us_geomean"] is None and partial["speedup_vs_ref_geomean"] is None
    assert partial["latency_us_by_shape"] == {"a": 10.0}
    assert evaluate.build_result(cases, {}, eval_id="e3")["failures"] == ["sid=0: not evaluated", "sid=1: not evaluated"]
    line = evaluate.result_line(result)
    assert line.startswith(PREFIX) and json.loads(line[len(PREFIX):]) == result


def run_evaluator(ws: Path, *args: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "evaluate.py"), *args], cwd=ws, capture_output=True, text=True, timeout=60
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return proc.returncode, json.loads(lines[0][len(PREFIX):]), proc.stdout


def test_bad_contract_still_prints_one_result(tmp_path):
    code, result, _ = run_evaluator(tmp_path)
    assert code == 1 and result["all_pass"] is False
    assert result["failures"][0].startswith("contract: ")
    code, result, _ = run_evaluator(copy_problem(tmp_path), "--shape-id", "77")
    assert code == 1 and "unknown shape '77'" in result["failures"][0]


def test_missing_reference_function_fails_every_selected_shape(tmp_path):
    ws = copy_problem(tmp_path)
    (ws / "reference.py").write_text("x = 1\n")
    code, result, stdout = run_evaluator(ws, "--shape-id", "1,2")
    assert code == 1
    assert result["failures"] == [
        "sid=1: problem could not be loaded: ProblemError: reference.py defines no reference()",
        "sid=2: problem could not be loaded: ProblemError: reference.py defines no reference()",
    ]
    assert "[test_kernel] sid=1 rows=8192 cols=2048" in stdout


def test_hung_worker_is_killed_with_its_process_group(tmp_path):
    ws = copy_problem(tmp_path)
    pid_file = tmp_path / "child.pid"
    # reference.py is imported first by the worker; this one starts a grandchild and hangs.
    (ws / "reference.py").write_text(
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(300)\n"
    )
    started = time.monotonic()
    code, result, _ = run_evaluator(ws, "--shape-id", "0", "--start-timeout", "1", "--shape-timeout", "1")
    assert time.monotonic() - started < 20
    assert code == 1
    assert result["failures"] == ["sid=0: worker did not reach a shape within 2s (kernel.py import hang?)"]
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the worker's child survived the watchdog")


def test_worker_dies_with_a_killed_evaluator(tmp_path):
    ws = copy_problem(tmp_path)
    pid_file = tmp_path / "worker.pid"
    (ws / "reference.py").write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, str(REPO / "tools" / "evaluate.py"), "--shape-id", "0"], cwd=ws,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        worker = int(pid_file.read_text())
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("the worker outlived its SIGKILLed evaluator")


def load_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("problem", sorted(p.name for p in PROBLEMS.iterdir() if (p / "definition.json").is_file()))
def test_every_bundled_problem_has_tails_and_its_own_tolerance(problem):
    contract = load_contract(PROBLEMS / problem)
    sizes = [tuple(int(v) for v in c.axes.values()) for c in contract.cases]
    assert any(rows == 1 for rows, _ in sizes) and any(cols == 1 for _, cols in sizes)
    assert any(rows % 2 and cols % 2 and cols > 512 for rows, cols in sizes)
    # a tail past every common vector, warp, block and tile width
    assert any(all(cols % w for w in (32, 128, 512)) and cols > 512 for _, cols in sizes)
    assert contract.tolerance is not None and contract.tolerance["rtol"] <= 1e-3
    assert len({c.shape_id for c in contract.cases}) == len(contract.cases)


def test_problem_tolerance_is_the_default_and_the_command_line_wins(tmp_path):
    args = evaluate.build_parser().parse_args([])
    assert evaluate.resolve_tolerance(args, None) == (1e-2, 0.05)
    assert evaluate.resolve_tolerance(args, {"rtol": 1e-4}) == (1e-2, 1e-4)
    args = evaluate.build_parser().parse_args(["--atol", "0.5"])
    assert evaluate.resolve_tolerance(args, {"atol": 1e-12, "rtol": 1e-4}) == (0.5, 1e-4)
    ws = copy_problem(tmp_path)
    definition = json.loads((ws / "definition.json").read_text())
    for bad in ({"atol": "1e-3"}, {"rtol": -1}, {"ulp": 2}, [1e-3], {"atol": True}):
        (ws / "definition.json").write_text(json.dumps({**definition, "tolerance": bad}))
        with pytest.raises(ProblemError, match="definition.json: .*tolerance"):
            load_contract(ws)
    code, result, _ = run_evaluator(ws, "--shape-id", "0")
    assert code == 1 and "tolerance" in result["failures"][0] and result["atol"] == 1e-2


def softmax32(x, shift=True):
    m = x.max(axis=-1, keepdims=True) if shift else numpy.float32(0)
    with numpy.errstate(over="ignore", invalid="ignore"):
        e = numpy.exp(x - m)
        return e / e.sum(axis=-1, keepdims=True)


def test_row_softmax_inputs_make_every_broken_output_fail():
    """The bundled inputs, built with numpy: a float32 softmax passes, the usual mistakes do not."""
    inputs = load_file(PROBLEM / "input.py", "_rs_input")
    reference = load_file(PROBLEM / "reference.py", "_rs_reference")
    atol, rtol = load_contract(PROBLEM).tolerance.values()

    def verdict(y, x):
        _, _, bad, _ = evaluate.compare((y,), (reference.reference(x),), atol, rtol)
        return bad, reference.check(y, x)

    for rows, cols in ((1, 4099), (3001, 1), (7, 1000), (5, 777)):
        x = inputs.make_logits(numpy, rows, cols, seed=1)
        assert x.dtype == numpy.float32 and x.shape == (rows, cols)
        assert verdict(softmax32(x), x) == (0, None)
        assert verdict(softmax32(x, shift=False), x)[0] > 0, (rows, cols)  # overflow on row 0 at least
    x = inputs.make_logits(numpy, 64, 1000, seed=2)
    y = softmax32(x)
    assert float(y.min()) > 1e-6  # every element is far above atol: each one is checked
    one_hot = numpy.zeros_like(y)
    one_hot[numpy.arange(64), y.argmax(axis=-1)] = 1
    bad, reason = verdict(one_hot, x)
    assert bad > 60 * 999 and reason is None  # a distribution, but not the softmax
    tail = numpy.full_like(y, numpy.nan)
    tail[:, :992] = softmax32(x[:, :992])  # the last partial warp of each row never written
    assert verdict(tail, x)[0] >= 64 * 8
    short_sum = y.copy()
    short_sum[:, -3:] = 0  # three elements dropped from the sum and the output
    short_sum *= numpy.float32(1.0) / short_sum.sum(axis=-1, keepdims=True)
    assert verdict(short_sum, x)[0] > 0
    assert "sums to" in reference.check(y * numpy.float32(1.001), x)
    assert reference.check(numpy.where(y > y.mean(), y, -y), x) == "output has negative values"


def test_bitwise_equal_sees_nans_and_single_bits():
    a = numpy.array([[1.0, numpy.nan]], dtype=numpy.float32)
    assert evaluate.bitwise_equal((a,), (a.copy(),))
    b = a.copy()
    b.view(numpy.uint32)[0, 0] ^= 1
    assert not evaluate.bitwise_equal((a,), (b,))
    assert not evaluate.bitwise_equal((a,), (a.astype(numpy.float64),))
    assert not evaluate.bitwise_equal((a,), (a, a))


def test_rms_norm_inputs_make_a_missing_eps_or_weight_fail():
    problem = PROBLEMS / "rms_norm"
    inputs = load_file(problem / "input.py", "_rn_input")
    reference = load_file(problem / "reference.py", "_rn_reference")
    atol, rtol = load_contract(problem).tolerance.values()
    for rows, cols in ((1, 12289), (3001, 1), (9, 777)):
        x, w = inputs.make_rows_and_weight(numpy, rows, cols, seed=3)
        ref = reference.reference(x, w)
        mean_square = (x * x).mean(axis=-1, keepdims=True, dtype=numpy.float32)
        good = x / numpy.sqrt(mean_square + numpy.float32(1e-6)) * w
        no_eps = x / numpy.sqrt(mean_square) * w
        no_weight = x / numpy.sqrt(mean_square + numpy.float32(1e-6))
        assert evaluate.compare((good,), (ref,), atol, rtol)[2] == 0
        assert evaluate.compare((no_eps,), (ref,), atol, rtol)[2] >= cols  # row 0 at least
        assert evaluate.compare((no_weight,), (ref,), atol, rtol)[2] > 0


def test_shape_line_reports_bitwise_differences_and_result_stays_strict_json():
    case = Case(0, "a", {"n": 1})
    ok = {"ok": True, "latency_us": 10.0, "max_abs_err": 1e-7, "nondeterministic_launches": 3}
    assert "(bitwise different on 3 timed calls, within tolerance)" in evaluate.shape_line(case, ok)
    assert "bitwise" not in evaluate.shape_line(case, dict(ok, nondeterministic_launches=0))
    # an output full of inf: the errors are unknown (None), never a non-JSON number
    failed = {"ok": False, "failure": "sid=0: correctness mismatch", "max_abs_err": evaluate._finite(float("inf")),
              "max_rel_err": evaluate._finite(float("nan"))}
    line = evaluate.result_line(evaluate.build_result((case,), {0: failed}, eval_id="e"))
    assert json.loads(line[len(PREFIX):])["max_abs_err"] is None
