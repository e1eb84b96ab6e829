"""Deliberately broken kernels on the bundled problems: each must fail, or be timed right (GPU).

Shape indices of row_softmax: 0 = 4096x1024, 5 = 4099x1000, 6 = 1000x777, 8 = 1x4099, 9 = 3001x1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = REPO / "examples" / "problems"
EVALUATE = REPO / "tools" / "evaluate.py"
PREFIX = "[test_kernel] RESULT_JSON="

pytestmark = pytest.mark.gpu


def workspace(tmp_path: Path, kernel_source: str, problem: str = "row_softmax") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    for name in ("definition.json", "workload.jsonl", "reference.py", "input.py"):
        shutil.copy(PROBLEMS / problem / name, ws / name)
    (ws / "kernel.py").write_text(kernel_source)
    return ws


def evaluate(ws: Path, *args: str) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, str(EVALUATE), "--workspace", str(ws), "--iters", "20", "--warmup", "3", *args],
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(PREFIX)]
    assert len(lines) == 1, proc.stdout + proc.stderr
    result = json.loads(lines[0][len(PREFIX):])
    assert (proc.returncode == 0) == result["all_pass"]
    return result, proc.stdout + proc.stderr


def failed_sids(result: dict) -> list[int]:
    return sorted(int(f.split(":")[0].removeprefix("sid=")) for f in result["failures"])


ONE_HOT = """
import cupy
def kernel(x):
    y = cupy.zeros_like(x)
    y[cupy.arange(x.shape[0]), x.argmax(axis=1)] = 1.0
    return y
"""

# Max and sum are right, but the write loop stops at the last multiple of 32 columns.
TAIL_BUG = r'''
import cupy
_k = cupy.RawKernel(r"""
extern "C" __global__ void softmax_tail_bug(const float* x, float* y, int cols) {
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    __shared__ float m, s;
    if (threadIdx.x == 0) {
        float mx = xr[0];
        for (int c = 1; c < cols; ++c) mx = fmaxf(mx, xr[c]);
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) sum += expf(xr[c] - mx);
        m = mx; s = sum;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < (cols / 32) * 32; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
}
""", "softmax_tail_bug")
def kernel(x):
    y = cupy.empty_like(x)
    _k((x.shape[0],), (128,), (x, y, cupy.int32(x.shape[1])))
    return y
'''

# Every block leaves its row sum in one global variable and reads it back: a race between blocks.
RACE = r'''
import cupy
_k = cupy.RawKernel(r"""
__device__ volatile float row_sum;
extern "C" __global__ void softmax_race(const float* x, float* y, int cols) {
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    __shared__ float m;
    if (threadIdx.x == 0) {
        float mx = xr[0];
        for (int c = 1; c < cols; ++c) mx = fmaxf(mx, xr[c]);
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) sum += expf(xr[c] - mx);
        m = mx; row_sum = sum;
    }
    __syncthreads();
    const float inv = 1.0f / row_sum;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
""", "softmax_race")
def kernel(x):
    y = cupy.empty_like(x)
    _k((x.shape[0],), (128,), (x, y, cupy.int32(x.shape[1])))
    return y
'''

NO_MAX_SHIFT = r'''
import cupy
_k = cupy.RawKernel(r"""
extern "C" __global__ void softmax_unstable(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(x[(long long)row * cols + c]);
    for (int c = 0; c < cols; ++c) y[(long long)row * cols + c] = expf(x[(long long)row * cols + c]) / s;
}
""", "softmax_unstable")
def kernel(x):
    y = cupy.empty_like(x)
    _k(((x.shape[0] + 255) // 256,), (256,), (x, y, cupy.int32(x.shape[0]), cupy.int32(x.shape[1])))
    return y
'''

# Right on the checked call and on most timed calls; every fifth later call is wrong somewhere.
FLAKY = """
import cupy
calls = 0
def kernel(x):
    global calls
    calls += 1
    e = cupy.exp(x - x.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    if calls > 6 and calls % 5 == 0:
        y[x.shape[0] // 2, -1] *= 1.5
    return y
"""

SIDE_STREAM = """
import cupy
import kernel_naive
stream = cupy.cuda.Stream(non_blocking=True)
def kernel(x):
    with stream:
        y = kernel_naive.kernel(x)
    {sync}
    return y
"""


def test_one_hot_output_fails_every_shape(tmp_path):
    result, log = evaluate(workspace(tmp_path, ONE_HOT), "--shape-id", "0,5,8,9")
    assert failed_sids(result) == [0, 5, 8], log  # one column: the one-hot output is the softmax
    assert all("correctness mismatch" in f for f in result["failures"]), log


def test_tail_bug_fails_every_tail_shape_and_only_those(tmp_path):
    result, log = evaluate(workspace(tmp_path, TAIL_BUG), "--shape-id", "0,5,6,8,9")
    assert failed_sids(result) == [5, 6, 8, 9], log
    assert len(result["latency_us_by_shape"]) == 1, log


def test_race_between_blocks_fails(tmp_path):
    result, log = evaluate(workspace(tmp_path, RACE), "--shape-id", "5,6")
    assert failed_sids(result) == [5, 6], log


def test_missing_max_shift_fails_every_shape(tmp_path):
    result, log = evaluate(workspace(tmp_path, NO_MAX_SHIFT), "--shape-id", "0,6,8,9")
    assert failed_sids(result) == [0, 6, 8, 9], log


def test_wrong_output_on_later_timed_calls_fails(tmp_path):
    result, log = evaluate(workspace(tmp_path, FLAKY), "--shape-id", "6")
    assert len(result["failures"]) == 1 and "timed call 6 of 20: 1 of 777000 elements outside" in result["failures"][0], log


def test_kernel_on_its_own_stream_is_rejected_unless_it_synchronizes(tmp_path):
    naive = (PROBLEMS / "row_softmax" / "kernel_naive.py").read_text()
    plain = workspace(tmp_path / "plain", naive)
    unsynced = workspace(tmp_path / "unsynced", SIDE_STREAM.format(sync=""))
    synced = workspace(tmp_path / "synced", SIDE_STREAM.format(sync="stream.synchronize()"))
    for ws in (unsynced, synced):
        (ws / "kernel_naive.py").write_text(naive)
    base, log = evaluate(plain, "--shape-id", "0", "--no-reference-timing")
    assert base["all_pass"], log
    result, log = evaluate(unsynced, "--shape-id", "0", "--no-reference-timing")
    assert len(result["failures"]) == 1, log
    assert result["failures"][0].startswith("sid=0: not timeable: work outside the timing events"), log
    result, log = evaluate(synced, "--shape-id", "0", "--no-reference-timing")
    assert result["all_pass"], log
    # timed from the start event: at most the 50 us spin ahead of it can be missed
    plain_us = base["latency_us_geomean"]
    assert plain_us - 50 <= result["latency_us_geomean"] <= 1.2 * plain_us, (plain_us, result)


def test_rms_norm_naive_passes_and_dropping_eps_fails(tmp_path):
    naive = (PROBLEMS / "rms_norm" / "kernel_naive.py").read_text()
    result, log = evaluate(workspace(tmp_path / "naive", naive, "rms_norm"), "--multi-seed", "2")
    assert result["all_pass"] and result["measured_shape_count"] == 7, log
    broken = naive.replace("rsqrtf(s / cols + eps)", "rsqrtf(s / cols)")
    result, log = evaluate(workspace(tmp_path / "no_eps", broken, "rms_norm"), "--shape-id", "0,5,6")
    assert failed_sids(result) == [0, 5, 6], log
