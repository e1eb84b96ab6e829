"""Evaluate a workspace's kernel.py against its reference: correctness, then latency.

This is the evaluator a workspace calls as ``test_kernel.py``. It prints one line per shape
and, last, exactly one ``[test_kernel] RESULT_JSON={...}`` line (FORMATS §6); the exit code is
0 iff every selected shape passed.

Design: this process never touches the GPU. It runs the work in a worker child (this same
file with ``--worker``), in its own process group, which reports progress one JSON line at
a time on a private pipe. Each shape has a deadline (``--shape-timeout``); a worker that
overruns it, crashes, or dies of a CUDA error that poisons its context is killed as a group,
that shape is recorded as failed, and a fresh worker continues with the remaining shapes.
A hung GPU kernel cannot be interrupted from inside its own process, but killing the process
tears down its CUDA context, which is why the watchdog lives in a separate process. The worker
never outlives this process: SIGTERM/SIGINT/SIGHUP here kill its group, and on Linux the worker
asks the kernel for SIGKILL when its parent dies (a sandbox that SIGKILLs our group).

The kernel may be written in anything: inputs are handed over as cupy arrays, outputs are
taken back through DLPack (``cupy.from_dlpack``), so a torch or triton kernel that returns a
torch tensor works. Timing uses CUDA events on the current cupy stream (the legacy default
stream, which torch uses too), after warm-up, with the L2 cache flushed before every timed
call; a shape's latency is the median of its timed calls in µs. The reference is timed the
same way to give ``speedup_vs_ref_geomean``.

This process needs only the standard library; the worker needs cupy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from problem_contract import Case, InputBuilder, ProblemError, as_tuple, load_contract, load_module, select_cases  # noqa: E402

EVALUATOR = "episcope.evaluate/1"
RESULT_PREFIX = "[test_kernel] RESULT_JSON="
L2_FLUSH_BYTES = 256 << 20  # several times the H100/H200 L2 (50 MB)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="test_kernel.py", description="Check and time kernel.py against reference.py.")
    p.add_argument("--workspace", default=".", help="workspace directory (default: current directory)")
    p.add_argument("--shape-id", action="append", default=[], help="shape index or id (repeatable, comma lists)")
    p.add_argument("--multi-seed", type=int, default=1, metavar="N", help="check correctness on N seeds (default 1)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--atol", type=float, default=1e-2)
    p.add_argument("--rtol", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=10, help="untimed calls before timing (default 10)")
    p.add_argument("--iters", type=int, default=50, help="timed calls per shape (default 50)")
    p.add_argument("--shape-timeout", type=float, default=120.0, help="seconds one shape may take (default 120)")
    p.add_argument(
        "--start-timeout", type=float, default=60.0,
        help="extra seconds a worker may spend importing cupy, reference.py and kernel.py (default 60)",
    )
    p.add_argument("--no-flush-l2", action="store_true", help="do not flush the L2 cache before timed calls")
    p.add_argument("--no-reference-timing", action="store_true", help="skip timing the reference")
    p.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--report-fd", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--cases", default="", help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", type=int, default=0, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------------------------------------
# Summaries (pure; tested without a GPU)


def geomean(values: list[float]) -> float | None:
    if not values or any(v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def build_result(cases: tuple[Case, ...], outcomes: dict[int, dict], *, eval_id: str, extra: dict | None = None) -> dict:
    """The RESULT_JSON object from per-shape outcomes ``{sid: {"ok", "failure", "latency_us", ...}}``.

    Aggregate latencies are given only when every selected shape was measured; a partial
    set would make a different, silently incomparable average.
    """
    failures: list[str] = []
    by_shape: dict[str, float] = {}
    ref_by_shape: dict[str, float] = {}
    abs_errs: list[float] = []
    rel_errs: list[float] = []
    for case in cases:
        outcome = outcomes.get(case.index) or {"ok": False, "failure": f"sid={case.index}: not evaluated"}
        if not outcome.get("ok"):
            failures.append(outcome.get("failure") or f"sid={case.index}: failed")
        if outcome.get("latency_us") is not None:
            by_shape[case.shape_id] = round(outcome["latency_us"], 3)
        if outcome.get("ref_latency_us") is not None:
            ref_by_shape[case.shape_id] = round(outcome["ref_latency_us"], 3)
        if outcome.get("max_abs_err") is not None:
            abs_errs.append(outcome["max_abs_err"])
        if outcome.get("max_rel_err") is not None:
            rel_errs.append(outcome["max_rel_err"])
    complete = bool(cases) and len(by_shape) == len(cases)
    latencies = list(by_shape.values())
    speedups = [ref_by_shape[k] / by_shape[k] for k in by_shape if k in ref_by_shape and by_shape[k] > 0]
    gm = geomean(latencies) if complete else None
    result = {
        "all_pass": bool(cases) and not failures,
        "failures": failures,
        "latency_us_geomean": round(gm, 3) if gm is not None else None,
        "latency_us_arith_mean": round(sum(latencies) / len(latencies), 3) if complete else None,
        "latency_us_by_shape": by_shape,
        "ref_latency_us_by_shape": ref_by_shape,
        "speedup_vs_ref_geomean": (
            round(geomean(speedups), 4) if complete and len(speedups) == len(cases) and geomean(speedups) else None
        ),
        "max_abs_err": max(abs_errs) if abs_errs else None,
        "max_rel_err": max(rel_errs) if rel_errs else None,
        "measured_shape_count": len(by_shape),
        "expected_shape_count": len(cases),
        "evaluator": EVALUATOR,
        "eval_id": eval_id,
    }
    result.update(extra or {})
    return result


def result_line(result: dict) -> str:
    return RESULT_PREFIX + json.dumps(result, sort_keys=True, separators=(",", ":"), allow_nan=False)


def shape_line(case: Case, outcome: dict) -> str:
    head = f"[test_kernel] {case.label} id={case.shape_id}:"
    if not outcome.get("ok"):
        return f"{head} FAIL {outcome.get('failure')}"
    parts = [f"{head} PASS", f"{outcome['latency_us']:.3f} us"]
    if outcome.get("ref_latency_us"):
        speedup = outcome["ref_latency_us"] / outcome["latency_us"]
        parts.append(f"(reference {outcome['ref_latency_us']:.3f} us, x{speedup:.2f})")
    parts.append(f"max_abs_err={outcome.get('max_abs_err'):.3g}")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Parent: the watchdog


class _Worker:
    """One worker child and the reader of its report pipe."""

    def __init__(self, args: argparse.Namespace, workspace: Path, case_indices: list[int]) -> None:
        read_fd, write_fd = os.pipe()
        argv = [
            sys.executable, str(Path(__file__).resolve()), "--worker", "--report-fd", str(write_fd),
            "--workspace", str(workspace), "--cases", ",".join(map(str, case_indices)), "--parent-pid", str(os.getpid()),
            "--multi-seed", str(args.multi_seed), "--seed", str(args.seed),
            "--atol", repr(args.atol), "--rtol", repr(args.rtol),
            "--warmup", str(args.warmup), "--iters", str(args.iters), "--device", str(args.device),
        ]
        argv += ["--no-flush-l2"] if args.no_flush_l2 else []
        argv += ["--no-reference-timing"] if args.no_reference_timing else []
        # The kernel's own prints go to stderr so stdout carries only the evaluator's lines.
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), pass_fds=(write_fd,),
            start_new_session=True, cwd=str(workspace),
        )
        os.close(write_fd)
        self._fd = read_fd
        self._buffer = b""

    def next_message(self, deadline: float) -> dict | None:
        """The next report, ``None`` at the deadline, ``{"event": "eof"}`` when the pipe closes."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return {"event": "eof"}
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"event": "garbled", "line": line[:200].decode("utf-8", "replace")}

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.reap()

    def reap(self) -> str:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return "did not exit"
        return f"signal {-code}" if code < 0 else f"exit code {code}"


def _run_workers(args: argparse.Namespace, workspace: Path, cases: tuple[Case, ...], log) -> dict[int, dict]:
    outcomes: dict[int, dict] = {}
    pending = [c.index for c in cases]
    by_index = {c.index: c for c in cases}

    def record(sid: int, outcome: dict) -> None:
        outcomes[sid] = outcome
        pending.remove(sid)
        log(shape_line(by_index[sid], outcome))

    while pending:
        worker = _Worker(args, workspace, pending)
        current: int | None = None
        progressed = False
        deadline = time.monotonic() + args.start_timeout + args.shape_timeout
        try:
            while pending:
                message = worker.next_message(deadline)
                if message is None:
                    worker.kill()
                    if current is None:
                        reason = f"worker did not reach a shape within {args.start_timeout + args.shape_timeout:g}s"
                        for sid in list(pending):
                            record(sid, {"ok": False, "failure": f"sid={sid}: {reason} (kernel.py import hang?)"})
                    else:
                        record(current, {"ok": False, "failure": f"sid={current}: timed out after {args.shape_timeout:g}s"})
                    break
                event = message.get("event")
                if event == "start":
                    current = int(message["sid"])
                    deadline = time.monotonic() + args.shape_timeout
                elif event == "done":
                    record(int(message["sid"]), message["outcome"])
                    current, progressed = None, True
                    deadline = time.monotonic() + args.shape_timeout
                elif event == "fatal":
                    worker.kill()
                    for sid in list(pending):
                        record(sid, {"ok": False, "failure": f"sid={sid}: {message.get('error')}"})
                elif event in ("eof", "garbled"):
                    worker.kill()
                    how = worker.reap() if event == "eof" else "garbled report"
                    if current is not None:
                        record(current, {"ok": False, "failure": f"sid={current}: worker died ({how}) while running this shape"})
                    elif not progressed:
                        for sid in list(pending):
                            record(sid, {"ok": False, "failure": f"sid={sid}: worker exited before this shape ({how})"})
                    # otherwise the worker left after a CUDA fault; a fresh one takes the rest
                    break
            else:
                worker.reap()
        except BaseException:
            worker.kill()
            raise
    return outcomes


def _exit_on_signal(signum, frame) -> None:
    # Unwinds through _run_workers, whose handler kills the worker's group.
    raise SystemExit(128 + signum)


def main_parent(args: argparse.Namespace) -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    workspace = Path(args.workspace).resolve()
    eval_id = uuid.uuid4().hex
    extra = {
        "atol": args.atol, "rtol": args.rtol, "seeds": list(range(args.seed, args.seed + max(1, args.multi_seed))),
        "warmup": args.warmup, "iters": args.iters,
    }
    try:
        contract = load_contract(workspace)
        cases = select_cases(contract.cases, args.shape_id)
    except ProblemError as exc:
        result = build_result((), {}, eval_id=eval_id, extra=extra)
        result["failures"] = [f"contract: {exc}"]
        print(result_line(result), flush=True)
        return 1
    extra["layout"] = contract.layout
    outcomes = _run_workers(args, workspace, cases, lambda line: print(line, flush=True))
    result = build_result(cases, outcomes, eval_id=eval_id, extra=extra)
    print(result_line(result), flush=True)
    return 0 if result["all_pass"] else 1


# ---------------------------------------------------------------------------------------------
# Worker: runs on the GPU


class _Report:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, **message) -> None:
        data = (json.dumps(message, allow_nan=False, default=str) + "\n").encode()
        os.write(self._fd, data)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _to_device_arrays(values, what: str) -> tuple:
    import cupy

    arrays = []
    for i, value in enumerate(as_tuple(values)):
        if isinstance(value, cupy.ndarray):
            arrays.append(value)
        elif hasattr(value, "__dlpack__"):
            module = type(value).__module__.split(".")[0]
            if module == "numpy":
                arrays.append(cupy.asarray(value))
            else:
                try:
                    arrays.append(cupy.from_dlpack(value))
                except Exception as exc:
                    raise _Mismatch(f"{what} output {i} cannot cross DLPack ({_describe(exc)})") from None
        else:
            raise _Mismatch(f"{what} output {i} is a {type(value).__name__}, not an array")
    return tuple(arrays)


class _Mismatch(Exception):
    """The kernel's output is not comparable with the reference (wrong count, shape, dtype)."""


def _compare(out: tuple, ref: tuple, atol: float, rtol: float) -> tuple[float, float, int, int]:
    """(max_abs_err, max_rel_err, bad elements, total elements) over all outputs."""
    import cupy

    if len(out) != len(ref):
        raise _Mismatch(f"kernel returned {len(out)} output(s), reference {len(ref)}")
    max_abs = max_rel = 0.0
    bad = total = 0
    for i, (o, r) in enumerate(zip(out, ref)):
        if tuple(o.shape) != tuple(r.shape):
            raise _Mismatch(f"output {i} shape {tuple(o.shape)} != reference {tuple(r.shape)}")
        if o.dtype != r.dtype:
            raise _Mismatch(f"output {i} dtype {o.dtype} != reference {r.dtype}")
        o64, r64 = o.astype(cupy.float64), r.astype(cupy.float64)
        err = cupy.abs(o64 - r64)
        finite = cupy.isfinite(o64) | ~cupy.isfinite(r64)
        err = cupy.where(finite, cupy.nan_to_num(err, nan=0.0, posinf=0.0), cupy.inf)
        # relative to max(|ref|, atol): values under the absolute tolerance do not dominate it
        rel = err / cupy.maximum(cupy.abs(r64), atol)
        bad += int(cupy.count_nonzero(~(err <= atol + rtol * cupy.abs(r64))))
        total += o.size
        if o.size:
            max_abs = max(max_abs, float(err.max()))
            max_rel = max(max_rel, float(rel.max()))
    return max_abs, max_rel, bad, total


class _Timer:
    def __init__(self, warmup: int, iters: int, flush_l2: bool) -> None:
        import cupy

        self.cupy = cupy
        self.warmup, self.iters = max(0, warmup), max(1, iters)
        self.flush = cupy.empty(L2_FLUSH_BYTES // 4, dtype=cupy.int32) if flush_l2 else None

    def median_us(self, fn, inputs: tuple) -> float:
        cupy = self.cupy
        for _ in range(self.warmup):
            fn(*inputs)
        cupy.cuda.Device().synchronize()
        pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(self.iters)]
        for start, end in pairs:
            if self.flush is not None:
                self.flush.fill(0)
            start.record()
            fn(*inputs)
            end.record()
        pairs[-1][1].synchronize()
        samples = sorted(cupy.cuda.get_elapsed_time(s, e) * 1000.0 for s, e in pairs)
        mid = len(samples) // 2
        return samples[mid] if len(samples) % 2 else (samples[mid - 1] + samples[mid]) / 2


def _evaluate_case(case: Case, ctx: dict, args: argparse.Namespace) -> dict:
    sid = case.index
    seeds = range(args.seed, args.seed + max(1, args.multi_seed))
    max_abs = max_rel = 0.0
    timing_inputs = None
    for seed in seeds:
        stage = "input.py"
        try:
            inputs = ctx["inputs"](case, seed)
            stage = "reference"
            ref = _to_device_arrays(ctx["reference"](*inputs), "reference")
            stage = "kernel"
            out = _to_device_arrays(ctx["kernel"](*inputs), "kernel")
            ctx["cupy"].cuda.Device().synchronize()
            stage = "comparison"
            abs_err, rel_err, bad, total = _compare(out, ref, args.atol, args.rtol)
        except _Mismatch as exc:
            return {"ok": False, "failure": f"sid={sid}: wrong output: {exc}"}
        except Exception as exc:
            return {"ok": False, "failure": f"sid={sid}: {stage} raised {_describe(exc)}", "raised": True}
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        if bad:
            return {
                "ok": False,
                "failure": f"sid={sid}: correctness mismatch (seed={seed}, {bad} of {total} elements outside "
                f"atol={args.atol:g} rtol={args.rtol:g}, max_abs_err={abs_err:.3g})",
                "max_abs_err": abs_err, "max_rel_err": rel_err,
            }
        if timing_inputs is None:
            timing_inputs = inputs
        del ref, out
    outcome = {"ok": True, "failure": None, "max_abs_err": max_abs, "max_rel_err": max_rel}
    try:
        outcome["latency_us"] = ctx["timer"].median_us(ctx["kernel"], timing_inputs)
    except Exception as exc:
        return {"ok": False, "failure": f"sid={sid}: kernel raised while timed: {_describe(exc)}", "raised": True}
    if not args.no_reference_timing:
        try:
            outcome["ref_latency_us"] = ctx["timer"].median_us(ctx["reference"], timing_inputs)
        except Exception:
            outcome["ref_latency_us"] = None
    return outcome


def _context_alive(cupy) -> bool:
    try:
        cupy.cuda.Device().synchronize()
        cupy.zeros(1).sum().item()
        return True
    except Exception:
        return False


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if parent_pid and os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def main_worker(args: argparse.Namespace) -> int:
    _die_with_parent(args.parent_pid)
    report = _Report(args.report_fd)
    workspace = Path(args.workspace)
    try:
        contract = load_contract(workspace)
        by_index = {c.index: c for c in contract.cases}
        cases = [by_index[int(i)] for i in args.cases.split(",") if i]
        reference = getattr(load_module(workspace, "reference"), "reference", None)
        if not callable(reference):
            raise ProblemError("reference.py defines no reference()")
    except Exception as exc:
        report.send(event="fatal", error=f"problem could not be loaded: {_describe(exc)}")
        return 2
    try:
        import cupy

        cupy.cuda.Device(args.device).use()
        ctx = {"cupy": cupy, "reference": reference, "inputs": InputBuilder(workspace, contract)}
        ctx["timer"] = _Timer(args.warmup, args.iters, not args.no_flush_l2)
    except Exception as exc:
        report.send(event="fatal", error=f"GPU set-up failed: {_describe(exc)}")
        return 2
    try:
        kernel = getattr(load_module(workspace, "kernel"), "kernel", None)
        if not callable(kernel):
            raise ProblemError("kernel.py defines no kernel()")
    except Exception as exc:
        report.send(event="fatal", error=f"kernel.py could not be imported: {_describe(exc)}")
        return 2
    ctx["kernel"] = kernel
    for case in cases:
        report.send(event="start", sid=case.index)
        outcome = _evaluate_case(case, ctx, args)
        raised = outcome.pop("raised", False)
        report.send(event="done", sid=case.index, outcome=outcome)
        # A CUDA fault (illegal address, launch failure) poisons this context for good:
        # leave, and let the parent start a fresh worker for the remaining shapes.
        if raised and not _context_alive(cupy):
            return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker:
        return main_worker(args)
    return main_parent(args)


if __name__ == "__main__":
    sys.exit(main())
