"""End to end on a GPU: tools/profile_nvidia.sh under ncu on the pattern kernels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "profile_nvidia.sh"
CASES = ROOT / "examples" / "ncu_patterns" / "cases.py"

sys.path.insert(0, str(ROOT))

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute")]


def _profile(tmp_path: Path, case: str, level: str, regex: str, *flags: str) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path / f"{case}-{level}"
    env = dict(os.environ, PROFILE_LEVEL=level, PROFILE_KERNEL_REGEX=regex)
    proc = subprocess.run(
        [str(TOOL), str(CASES), "--output-dir", str(out), "--launch-skip", "1", "--launch-count", "1", *flags,
         "--", "--case", case],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    return out, proc


def test_sol_profile_of_the_copy_kernel_is_memory_bound(tmp_path):
    (tmp_path / "kernel.py").write_text("# the file a reused profile is checked against\n")
    out, proc = _profile(tmp_path, "copy", "sol", "^copy_f32$")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "gateway_profile.json").read_text())
    assert doc["profiler"] == "ncu" and doc["level"] == "sol"
    (kernel,) = doc["kernels"]
    assert kernel["name"] == "copy_f32" and kernel["bound"] == "memory"
    assert kernel["duration"] > 0 and kernel["dram_pct"] > 50
    assert "_mem" in {d["id"] for d in kernel["diagnostics"]}
    import hashlib

    assert doc["kernel_sha256"] == hashlib.sha256((tmp_path / "kernel.py").read_bytes()).hexdigest()
    assert (out / "ncu.ncu-rep").is_file()
    from console.formats.profile_summary_text import parse

    summary = parse((out / "summary.txt").read_text())
    assert summary["kernel"] == "copy_f32" and "memory-bound" in summary["symptoms"]


def test_deep_source_profile_finds_bank_conflicts_and_localizes_them(tmp_path):
    out, proc = _profile(tmp_path, "bank_conflict", "deep", "^smem_column_read$", "--source")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "ncu_source.ncu-rep").is_file()
    doc = json.loads((out / "gateway_profile.json").read_text())
    (kernel,) = doc["kernels"]
    assert "H" in {d["id"] for d in kernel["diagnostics"]}
    manifest = json.loads((out / "analysis" / "source_evidence_manifest.json").read_text())
    status = {e["name"]: e["status"] for e in manifest["evidence"]}
    assert status["warp_stalls_line_run"] == "ok" and status["disasm_run"] == "ok"
    assert doc["localize"] and all((out / rel).is_file() for rel in doc["localize"])


def test_the_profile_driver_funnel_holds_only_the_kernels_own_launches(tmp_path):
    """Building the inputs launches cupy's random generators; outside the driver's profiled
    range they must not show up in the survey, let alone become its dominant kernel."""
    from console.commands.init import create_workspace

    workspace = create_workspace(tmp_path / "ws", "row_softmax")
    env = dict(os.environ, PROFILE_LEVEL="survey", PROFILE_WARMUP="1", PROFILE_ITERS="2",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        ["bash", "tools/profile_nvidia.sh", "profile_driver.py", "--output-dir", "profiles/survey"],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((workspace / "profiles" / "survey" / "gateway_profile.json").read_text())
    assert [k["name"] for k in doc["kernels"]] == ["row_softmax_naive"], doc["kernels"]
    assert doc["dominant_kernel"] == "row_softmax_naive"
    assert doc["kernels"][0]["metrics"]["launches"] == 3  # one warm-up call and two timed calls

    # Deep with source counters on the same range: one launch of the named kernel.
    env["PROFILE_LEVEL"] = "deep"
    proc = subprocess.run(
        ["bash", "tools/profile_nvidia.sh", "profile_driver.py", "--output-dir", "profiles/deep",
         "--kernel-name", "row_softmax_naive", "--source"],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    deep = json.loads((workspace / "profiles" / "deep" / "gateway_profile.json").read_text())
    assert [k["name"] for k in deep["kernels"]] == ["row_softmax_naive"]
    assert (workspace / "profiles" / "deep" / "analysis" / "source_sass.csv").stat().st_size > 0


@pytest.mark.parametrize("containment", ["auto", "cgroup", "subreaper"])
def test_four_sandboxed_profiles_at_once_all_finish(tmp_path, containment):
    """The funnel runs surveys in waves of four sandbox jobs; every containment the sandbox
    can choose for them must let four ncu processes profile side by side (inside PID
    namespaces the second profiler waited until its timeout, so profile jobs keep host pids)."""
    from console.commands.init import create_workspace

    workspace = create_workspace(tmp_path / "ws", "row_softmax")
    forced = "" if containment == "auto" else containment
    env = dict(os.environ, EPISCOPE_SANDBOX_CONTAINMENT=forced, PROFILE_WARMUP="1", PROFILE_ITERS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    jobs = [
        subprocess.Popen(
            [sys.executable, "tools/sandbox.py", "--kind", "profile", "--profile-level", "survey", "--timeout", "30",
             "-e", f"PROFILE_WORKLOAD_IDX={shape}", "--", "bash", "tools/profile_nvidia.sh", "profile_driver.py",
             "--output-dir", f"profiles/wave/shape-{shape}"],
            cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for shape in range(4)
    ]
    outcomes = [(job.wait(timeout=90), job.stderr.read()[-1500:]) for job in jobs]
    assert [code for code, _ in outcomes] == [0, 0, 0, 0], outcomes
