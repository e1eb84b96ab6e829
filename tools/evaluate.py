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
torch tensor works.

Correctness: per seed, every output element within ``atol + rtol * |ref|`` (the problem's
``tolerance`` unless ``--atol``/``--rtol`` say otherwise) and the problem's ``check`` (if
``reference.py`` has one). Free pooled memory is filled with NaN before each checked call, so
output elements a kernel never writes cannot inherit right values from an earlier buffer.

Timing uses CUDA events on the current cupy stream (the legacy default stream, which torch
uses too), after warm-up. Each timed call comes after the L2 flush and a device-wide
synchronize, behind a 50 µs spin kernel that keeps the GPU busy while the host launches the
kernel (so the host's launch time is not counted), and ends with a device-wide synchronize; a
shape's latency is the median of its timed calls in µs. Two things are checked on the way:

- every timed call's output: bit-identical to the checked output of the same inputs, or else
  held to the same tolerance (a race that shows only under repetition fails the shape);
  bitwise differences within tolerance are counted and reported;
- work the events do not see: a few host-synced calls compare host wall time with event time.
  A kernel that leaves work running on a stream of its own (its result is not ready on the
  current stream when ``kernel`` returns) makes the host wait past the end event; when the
  median excess over an empty call passes ``max(20 µs, 10% of the host-synced time)`` the shape
  fails instead of being timed short. Work on a stream of its own that the kernel waits for
  before returning is timed, but a non-blocking stream does not wait for the spin kernel: up
  to its 50 µs, less the host's launch time, can fall before the start event.

The reference is timed the same way (without the checks) to give ``speedup_vs_ref_geomean``.

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
from problem_contract import (  # noqa: E402
    CHECK_FUNCTION,
    Case,
    InputBuilder,
    ProblemError,
    as_tuple,
    load_contract,
    load_module,
    select_cases,
)

EVALUATOR = "episcope.evaluate/1"
RESULT_PREFIX = "[test_kernel] RESULT_JSON="
L2_FLUSH_BYTES = 256 << 20  # several times the H100/H200 L2 (50 MB)
DEFAULT_ATOL, DEFAULT_RTOL = 1e-2, 0.05
LEAD_NS = 50_000  # spin before each timed call: the host's launch lands while the GPU is busy
GAP_PROBES = 7  # host-synced calls that look for work outside the timing events
GAP_LIMIT_US, GAP_LIMIT_FRACTION = 20.0, 0.10


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="test_kernel.py", description="Check and time kernel.py against reference.py.")
    p.add_argument("--workspace", default=".", help="workspace directory (default: current directory)")
    p.add_argument("--shape-id", action="append", default=[], help="shape index or id (repeatable, comma lists)")
    p.add_argument("--multi-seed", type=int, default=1, metavar="N", help="check correctness on N seeds (default 1)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--atol", type=float, default=None, help=f"absolute tolerance (default: the problem's, else {DEFAULT_ATOL:g})")
    p.add_argument("--rtol", type=float, default=None, help=f"relative tolerance (default: the problem's, else {DEFAULT_RTOL:g})")
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
    if outcome.get("nondeterministic_launches"):
        parts.append(f"(bitwise different on {outcome['nondeterministic_launches']} timed calls, within tolerance)")
    return " ".join(parts)


def resolve_tolerance(args: argparse.Namespace, contract_tolerance: dict | None) -> tuple[float, float]:
    """(atol, rtol): the command line first, then the problem's own, then the defaults."""
    own = contract_tolerance or {}
    atol = args.atol if args.atol is not None else own.get("atol", DEFAULT_ATOL)
    rtol = args.rtol if args.rtol is not None else own.get("rtol", DEFAULT_RTOL)
    return atol, rtol


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
        "seeds": list(range(args.seed, args.seed + max(1, args.multi_seed))), "warmup": args.warmup, "iters": args.iters,
    }
    try:
        contract = load_contract(workspace)
        cases = select_cases(contract.cases, args.shape_id)
    except ProblemError as exc:
        extra["atol"], extra["rtol"] = resolve_tolerance(args, None)
        result = build_result((), {}, eval_id=eval_id, extra=extra)
        result["failures"] = [f"contract: {exc}"]
        print(result_line(result), flush=True)
        return 1
    args.atol, args.rtol = resolve_tolerance(args, contract.tolerance)
    extra["atol"], extra["rtol"], extra["layout"] = args.atol, args.rtol, contract.layout
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


def _array_module(array):
    """numpy for numpy arrays (the checks run without a GPU in tests), else cupy."""
    if type(array).__module__.split(".")[0] == "numpy":
        import numpy

        return numpy
    import cupy

    return cupy


def compare(out: tuple, ref: tuple, atol: float, rtol: float) -> tuple[float, float, int, int]:
    """(max_abs_err, max_rel_err, bad elements, total elements) over all outputs.

    An element passes when ``|out - ref| <= atol + rtol * |ref|``; a NaN or infinity where the
    reference is finite never passes.
    """
    if len(out) != len(ref):
        raise _Mismatch(f"kernel returned {len(out)} output(s), reference {len(ref)}")
    max_abs = max_rel = 0.0
    bad = total = 0
    for i, (o, r) in enumerate(zip(out, ref)):
        if tuple(o.shape) != tuple(r.shape):
            raise _Mismatch(f"output {i} shape {tuple(o.shape)} != reference {tuple(r.shape)}")
        if o.dtype != r.dtype:
            raise _Mismatch(f"output {i} dtype {o.dtype} != reference {r.dtype}")
        xp = _array_module(o)
        o64, r64 = o.astype(xp.float64), r.astype(xp.float64)
        err = xp.abs(o64 - r64)
        finite = xp.isfinite(o64) | ~xp.isfinite(r64)
        err = xp.where(finite, xp.nan_to_num(err, nan=0.0, posinf=0.0), xp.inf)
        # relative to max(|ref|, atol): values under the absolute tolerance do not dominate it
        rel = err / xp.maximum(xp.abs(r64), max(atol, 1e-300))
        bad += int(xp.count_nonzero(~(err <= atol + rtol * xp.abs(r64))))
        total += o.size
        if o.size:
            max_abs = max(max_abs, float(err.max()))
            max_rel = max(max_rel, float(rel.max()))
    return max_abs, max_rel, bad, total


def bitwise_equal(a: tuple, b: tuple) -> bool:
    """Same count, shapes, dtypes and bytes (NaNs included, unlike ``==``)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        xp = _array_module(x)
        if x.size and not bool(xp.array_equal(xp.ascontiguousarray(x).ravel().view(xp.uint8),
                                              xp.ascontiguousarray(y).ravel().view(xp.uint8))):
            return False
    return True


def _poison_free_memory(cupy, nbytes: list[int]) -> None:
    """Hand the next allocations of these sizes NaN-filled blocks of cupy's memory pool.

    Without this, an output buffer is often the block a previous output (or the reference's)
    just released, so elements a kernel never writes would still hold right values.
    """
    cupy.get_default_memory_pool().free_all_blocks()
    blocks = [cupy.empty(n, dtype=cupy.uint8) for n in nbytes if n]
    for block in blocks:
        block.fill(0xFF)  # all-ones bits: NaN in every float format
    del blocks


_LEAD_SOURCE = r"""
extern "C" __global__ void lead(long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < (unsigned long long)ns);
}
"""


class _LaunchGap(Exception):
    """The kernel left work that the timing events do not cover."""


class _Timer:
    def __init__(self, warmup: int, iters: int, flush_l2: bool) -> None:
        import cupy

        self.cupy = cupy
        self.warmup, self.iters = max(0, warmup), max(1, iters)
        self.flush = cupy.empty(L2_FLUSH_BYTES // 4, dtype=cupy.int32) if flush_l2 else None
        self.lead = cupy.RawKernel(_LEAD_SOURCE, "lead")
        self.empty_gap_us = self._median(self._gap_us(lambda: None, ()) for _ in range(GAP_PROBES))

    @staticmethod
    def _median(values) -> float:
        samples = sorted(values)
        mid = len(samples) // 2
        return samples[mid] if len(samples) % 2 else (samples[mid - 1] + samples[mid]) / 2

    def _gap_us(self, fn, inputs: tuple) -> tuple[float, float]:
        """Host wall time minus event time (µs) of one call that starts and ends on an idle device."""
        cupy = self.cupy
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        start.record()
        fn(*inputs)
        end.record()
        cupy.cuda.Device().synchronize()
        wall = (time.perf_counter() - t0) * 1e6
        return wall - cupy.cuda.get_elapsed_time(start, end) * 1000.0

    def check_gap(self, fn, inputs: tuple) -> float:
        """µs of work outside the events beyond an empty call's; raises _LaunchGap past the limit."""
        walls, excess = [], []
        for _ in range(GAP_PROBES):
            t0 = time.perf_counter()
            excess.append(self._gap_us(fn, inputs) - self.empty_gap_us)
            walls.append((time.perf_counter() - t0) * 1e6)
        gap, wall = self._median(excess), self._median(walls)
        if gap > max(GAP_LIMIT_US, GAP_LIMIT_FRACTION * wall):
            raise _LaunchGap(
                f"work outside the timing events: the host waited {gap:.1f} us past the end event "
                f"(host-synced call {wall:.1f} us); launch on the current stream or synchronize before returning"
            )
        return gap

    def median_us(self, fn, inputs: tuple, check=None) -> float:
        """Median event time of the timed calls; ``check(output, n)`` sees each call's output
        (outside the timed region) and returns a failure reason or None."""
        cupy = self.cupy
        for _ in range(self.warmup):
            fn(*inputs)
        samples = []
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        for n in range(self.iters):
            if self.flush is not None:
                self.flush.fill(0)
            # idle before the lead: work the kernel puts on a stream of its own must not
            # overlap the flush (each slows the other many times over)
            cupy.cuda.Device().synchronize()
            self.lead((1,), (1,), (cupy.int64(LEAD_NS),))
            start.record()
            output = fn(*inputs)
            end.record()
            cupy.cuda.Device().synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0)
            if check is not None:
                reason = check(output, n)
                if reason:
                    raise _Mismatch(reason)
            del output
        return self._median(samples)


def _finite(value: float) -> float | None:
    """The value, or None where it is inf/NaN (RESULT_JSON is strict JSON)."""
    return value if math.isfinite(value) else None


def _evaluate_case(case: Case, ctx: dict, args: argparse.Namespace) -> dict:
    sid = case.index
    seeds = range(args.seed, args.seed + max(1, args.multi_seed))
    cupy = ctx["cupy"]
    max_abs = max_rel = 0.0
    timing = None  # (inputs, reference, checked output) of the first seed
    for seed in seeds:
        stage = "input.py"
        try:
            inputs = ctx["inputs"](case, seed)
            stage = "reference"
            ref = _to_device_arrays(ctx["reference"](*inputs), "reference")
            _poison_free_memory(cupy, [r.nbytes for r in ref])
            stage = "kernel"
            out = _to_device_arrays(ctx["kernel"](*inputs), "kernel")
            cupy.cuda.Device().synchronize()
            stage = "comparison"
            abs_err, rel_err, bad, total = compare(out, ref, args.atol, args.rtol)
            stage = "check"
            reason = ctx["check"](out[0] if len(out) == 1 else out, *inputs) if ctx["check"] and not bad else None
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
                "max_abs_err": _finite(abs_err), "max_rel_err": _finite(rel_err),
            }
        if reason:
            return {"ok": False, "failure": f"sid={sid}: check failed (seed={seed}): {reason}",
                    "max_abs_err": abs_err, "max_rel_err": rel_err}
        if timing is None:
            timing = (inputs, ref, out)
        del ref, out
    inputs, ref, checked = timing
    differing = []

    def same_as_checked(values, n: int) -> str | None:
        out = _to_device_arrays(values, "kernel")
        if bitwise_equal(out, checked):
            return None
        differing.append(n)
        _, _, bad, total = compare(out, ref, args.atol, args.rtol)
        if bad:
            return f"timed call {n + 1} of {args.iters}: {bad} of {total} elements outside atol={args.atol:g} rtol={args.rtol:g}"
        return None

    outcome = {"ok": True, "failure": None, "max_abs_err": max_abs, "max_rel_err": max_rel}
    try:
        outcome["latency_us"] = ctx["timer"].median_us(ctx["kernel"], inputs, same_as_checked)
        outcome["outside_events_us"] = round(ctx["timer"].check_gap(ctx["kernel"], inputs), 3)
    except _Mismatch as exc:
        return {"ok": False, "failure": f"sid={sid}: wrong output: {exc}", "max_abs_err": max_abs, "max_rel_err": max_rel}
    except _LaunchGap as exc:
        return {"ok": False, "failure": f"sid={sid}: not timeable: {exc}", "max_abs_err": max_abs, "max_rel_err": max_rel}
    except Exception as exc:
        return {"ok": False, "failure": f"sid={sid}: kernel raised while timed: {_describe(exc)}", "raised": True}
    outcome["nondeterministic_launches"] = len(differing)
    if not args.no_reference_timing:
        try:
            outcome["ref_latency_us"] = ctx["timer"].median_us(ctx["reference"], inputs)
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
        reference_module = load_module(workspace, "reference")
        reference = getattr(reference_module, "reference", None)
        if not callable(reference):
            raise ProblemError("reference.py defines no reference()")
        check = getattr(reference_module, CHECK_FUNCTION, None)
    except Exception as exc:
        report.send(event="fatal", error=f"problem could not be loaded: {_describe(exc)}")
        return 2
    try:
        import cupy

        cupy.cuda.Device(args.device).use()
        ctx = {"cupy": cupy, "reference": reference, "check": check if callable(check) else None,
               "inputs": InputBuilder(workspace, contract)}
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
