"""Immutable profiling driver: runs kernel.py on one case, a few times, for a profiler.

A profiler (ncu) runs ``python3 profile_driver.py`` and records the launches between the
driver's cudaProfilerStart and cudaProfilerStop: the warm-up and timed calls of the kernel,
not the building of its inputs. The driver only builds inputs, warms up and calls the
kernel. It checks nothing, writes nothing (never memory/), and prints
``[profile_driver] <label>: warmup=W iters=N`` to stderr.

Environment: PROFILE_ITERS (10), PROFILE_WARMUP (3), PROFILE_WORKLOAD_IDX (0, an index into
the contract's shapes), PROFILE_SHAPE_ID (a shape id or index; wins over the index),
PROFILE_DEVICE (cuda:0).

A private case: if ``.atrex_private_profile_case.json`` exists in the current directory it
is read and deleted before kernel.py is imported (so the kernel cannot see it), and that one
case is used: ``{"axes": {..}, "seed"?: int, "shape_id"?: str}`` for a shape outside the
contract, or ``{"shape_id": ..}`` / ``{"workload_idx": ..}`` to pick a contract shape.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _candidate in (_HERE, _HERE / "tools"):  # tools/profile_driver.py or a workspace's copy
    if (_candidate / "problem_contract.py").is_file():
        sys.path.insert(0, str(_candidate))
        break
from problem_contract import Case, InputBuilder, ProblemError, load_contract, load_module, select_cases  # noqa: E402

PRIVATE_CASE_FILE = ".atrex_private_profile_case.json"


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"[profile_driver] {name}={raw!r} is not an integer") from None
    if value < 0:
        raise SystemExit(f"[profile_driver] {name} must be >= 0")
    return value


def _take_private_case() -> dict | None:
    path = Path.cwd() / PRIVATE_CASE_FILE
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)
    try:
        case = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"[profile_driver] {PRIVATE_CASE_FILE}: {exc}") from None
    if not isinstance(case, dict):
        raise SystemExit(f"[profile_driver] {PRIVATE_CASE_FILE}: not an object")
    return case


def _device_ordinal(spec: str) -> int:
    spec = spec.strip() or "cuda:0"
    head, _, ordinal = spec.partition(":")
    if head != "cuda" or not (ordinal or "0").isdigit():
        raise SystemExit(f"[profile_driver] PROFILE_DEVICE={spec!r}: expected cuda:<n>")
    return int(ordinal or 0)


def resolve_case(cases: tuple[Case, ...], private: dict | None) -> tuple[Case, int]:
    """The case to run and its seed, from the private case or the environment."""
    if private is not None:
        seed = int(private.get("seed", 0))
        if isinstance(private.get("axes"), dict):
            return Case(-1, str(private.get("shape_id", "private")), dict(private["axes"])), seed
        selector = private.get("shape_id", private.get("workload_idx"))
        if selector is None:
            raise SystemExit(f"[profile_driver] {PRIVATE_CASE_FILE}: needs axes, shape_id or workload_idx")
        return select_cases(cases, [str(selector)])[0], seed
    shape_id = os.environ.get("PROFILE_SHAPE_ID", "").strip()
    if shape_id:
        return select_cases(cases, [shape_id])[0], 0
    index = _env_int("PROFILE_WORKLOAD_IDX", 0)
    if index >= len(cases):
        raise SystemExit(f"[profile_driver] PROFILE_WORKLOAD_IDX={index}: the contract has {len(cases)} shapes")
    return cases[index], 0


def main() -> int:
    workspace = Path.cwd()
    private = _take_private_case()
    iters, warmup = _env_int("PROFILE_ITERS", 10), _env_int("PROFILE_WARMUP", 3)
    device = _device_ordinal(os.environ.get("PROFILE_DEVICE", "cuda:0"))
    try:
        contract = load_contract(workspace)
        case, seed = resolve_case(contract.cases, private)
        import cupy

        cupy.cuda.Device(device).use()
        inputs = InputBuilder(workspace, contract)(case, seed)
        kernel = getattr(load_module(workspace, "kernel"), "kernel", None)
        if not callable(kernel):
            raise ProblemError("kernel.py defines no kernel()")
    except ProblemError as exc:
        print(f"[profile_driver] {exc}", file=sys.stderr)
        return 2
    label = case.label if case.index >= 0 else " ".join([case.shape_id, *(f"{k}={v}" for k, v in case.axes.items())])
    print(f"[profile_driver] {label}: warmup={warmup} iters={iters}", file=sys.stderr, flush=True)
    # The profiled range: profile_nvidia.sh runs ncu with --profile-from-start off, so only
    # the kernel's own launches are recorded, not what building the inputs launched.
    # Outside a profiler these calls do nothing.
    cupy.cuda.Device().synchronize()
    cupy.cuda.runtime.profilerStart()
    try:
        for _ in range(warmup):
            kernel(*inputs)
        cupy.cuda.Device().synchronize()
        for _ in range(iters):
            kernel(*inputs)
        cupy.cuda.Device().synchronize()
    finally:
        cupy.cuda.runtime.profilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
