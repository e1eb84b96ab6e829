"""One probe-instrumented launch of row_softmax_regs, for the recorded episode's timeline question.

    python3 timeline_capture.py --rows R --cols C --dir D

Reads D/kernel_probe.cu (kernel.py's CUDA source with the probe sites) and D/events.json;
writes D/capture.bin (the raw ATREXLT1 buffer) and D/manifest.json, checks the instrumented
output against the reference with the problem's tolerance and row-sum test, and screens the
probe's cost: CUDA-event time of the clean and the instrumented launch, alternated, medians.
examples/record_episode.py copies it into the episode and runs it as a sandbox job with the
skill's backends/ staged as an input; it prints one ``[capture] PROBE_JSON=`` line.
"""

import argparse
import json
import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, "skills/autonomous-gpu-kernel-timeline/backends")
sys.path.insert(0, ".")
import kernel  # noqa: E402  (the workspace's clean kernel.py)
import reference  # noqa: E402
from cuda_backend.cupy_adapter import TimelineBuffer, compile_module  # noqa: E402
from input import make_inputs  # noqa: E402

from console.timeline.manifest import warp_writers_manifest  # noqa: E402

SCREEN_ROUNDS = 20
RECORDS_PER_WRITER = 6  # three ranges, a begin and an end each


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--cols", type=int, required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    out = Path(args.dir)
    dictionary = json.loads((out / "events.json").read_text())
    tolerance = json.loads(Path("definition.json").read_text())["tolerance"]
    (x,) = make_inputs({"rows": args.rows, "cols": args.cols}, 0)
    # the launch kernel.py makes for this row length, so the probe sits in the same kernel
    _, threads = kernel._plan(args.cols)
    vpt = next(v for v in kernel._VPTS if v * threads * 4 >= args.cols)
    name = f"row_softmax_regs<{vpt}>"
    module = compile_module((out / "kernel_probe.cu").read_text(), dictionary, source_name="kernel_probe.cu",
                            options=("-std=c++17",), name_expressions=[name])
    function = module.get_function(name)
    manifest = warp_writers_manifest((args.rows, 1, 1), (threads, 1, 1), launch_id=1,
                                     records_per_owner=RECORDS_PER_WRITER, warps=[0])
    buf = TimelineBuffer(manifest)
    y = cupy.empty_like(x)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()

    def instrumented():
        function((args.rows,), (threads,), (x, y, cupy.int32(args.cols), np.uint64(buf.ptr)))

    def timed(launch) -> float:
        buf.reset()
        cupy.cuda.Device().synchronize()
        start.record()
        launch()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) * 1e3

    clean_us, probe_us = [], []
    for _ in range(SCREEN_ROUNDS):
        clean_us.append(timed(lambda: kernel.kernel(x)))
        probe_us.append(timed(instrumented))
    buf.reset()
    instrumented()
    cupy.cuda.Device().synchronize()
    buf.save(out / "capture.bin")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    ref = reference.reference(x)
    within = bool(cupy.all(cupy.abs(y - ref) <= tolerance["atol"] + tolerance["rtol"] * cupy.abs(ref)))
    row_problem = reference.check(y, x)
    clean, probe = float(np.median(clean_us)), float(np.median(probe_us))
    result = {"kernel": name, "grid": manifest["grid"], "block": manifest["block"],
              "correctness": "passed" if within and row_problem is None else "failed", "row_check": row_problem,
              "screen_us": {"clean": round(clean, 3), "instrumented": round(probe, 3),
                            "overhead_pct": round((probe - clean) / clean * 100, 2), "rounds": SCREEN_ROUNDS}}
    # a failed check is part of the answer (the capture is then classed by it), not a failed job
    print("[capture] PROBE_JSON=" + json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
