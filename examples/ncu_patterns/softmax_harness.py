"""Run one row_softmax kernel file (`kernel(x)`) a few times for a profiler.

`python3 softmax_harness.py PATH/kernel_naive.py` takes its input from input.py beside the
kernel file, on workload PROFILE_WORKLOAD_IDX (default 1, 8192x2048) of workload.jsonl,
then calls kernel(x) once to warm up and twice more: profile with --launch-skip 1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_INFINITY = "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"


def _define_infinity(cp) -> None:
    """NVRTC has no <math.h>, so INFINITY is undefined there; give kernel sources that use
    it the same value (one line is prepended: SASS line numbers shift by one)."""
    for name in ("RawKernel", "RawModule"):
        original = getattr(cp, name)

        # RawModule takes its arguments by keyword only, RawKernel also by position.
        def make(code, *args, _original=original, **kwargs):
            if "INFINITY" in code:
                code = _INFINITY + code
            return _original(*args, code=code, **kwargs)

        setattr(cp, name, make)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: softmax_harness.py KERNEL_FILE", file=sys.stderr)
        return 2
    import cupy as cp

    kernel_file = os.path.abspath(argv[0])
    problem = os.path.dirname(kernel_file)
    idx = int(os.environ.get("PROFILE_WORKLOAD_IDX", "1"))
    with open(os.path.join(problem, "workload.jsonl"), encoding="utf-8") as f:
        workloads = [json.loads(line) for line in f if line.strip()]
    axes = workloads[idx]["workload"]["axes"]
    (x,) = _load(os.path.join(problem, "input.py"), "softmax_input").make_inputs(axes, 0)
    _define_infinity(cp)
    kernel = _load(kernel_file, "softmax_kernel").kernel
    for _ in range(3):
        y = kernel(x)
    cp.cuda.Device().synchronize()
    print(f"[softmax_harness] {os.path.basename(kernel_file)} rows={axes['rows']} cols={axes['cols']} "
          f"y[0,:2]={cp.asnumpy(cp.asarray(y)[0, :2]).tolist()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
