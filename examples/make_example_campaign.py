"""Build a small, self-consistent example campaign in the AKA layout (FORMATS §1-§9).

    python examples/make_example_campaign.py OUT_DIR [--seed N] [--name row_softmax]

OUT_DIR gets:
    <name>/                                  campaign repo (episcope init of row_softmax)
        memory/v0.json, memory/v1.json      baseline and the promoted episode's record
        memory/live.json                    live mirror (git-ignored)
        .atrex_long_horizon/state.json, active_episode.json,
            episodes/e0001/{BRIEF.md, attempt.json, telemetry.summary.json, telemetry.brief.md,
                            archive/, episode_runtime/ (the worktree's runtime files),
                            verification_runtime/<uuid>/ (the ABBA directory)}
    .atrex_long_horizon_worktrees/<name>/e0001-<8hex>/   the episode worktree
        .atrex_long_horizon/{journal.json, handoff.json, telemetry.jsonl, evaluations.jsonl}
        verification_artifacts/.atrex_long_horizon_verify/<uuid>/   ABBA request and results
        profiles/episode_1/{survey,sol,deep}/shape-<i>/  gateway_profile.json, summary.txt, ...
        plans/episode_1.md, plans/e0001-trial2-kernel.py

The story: the naive kernel is the baseline (v0); episode 1 profiles it (survey of all five
shapes in waves of at most four, sol on two, deep on one), commits the one-block-per-row
kernel (trial 1), tries a variant that regresses (trial 2, reverted), hands off trial 1,
which passes ABBA verification and is promoted as v1. The active episode is left in phase
``promoted``: its records are already copied under episodes/e0001/, but the worktree and
active_episode.json are still there (the supervisor removes them last), so every artifact
family is present at once.

Everything is deterministic for a given seed and repository state: dates, ids, latencies
and git commits. Latencies are the ones measured on an H200 by tools/evaluate.py with small
seeded jitter. Every sha256 is the sha256 of the real file; every commit is a real commit.
No GPU is needed.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import shutil
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import evaluate  # noqa: E402  (tools/evaluate.py: the RESULT_JSON builder itself)
from problem_contract import load_contract  # noqa: E402

from console.commands.init import create_workspace  # noqa: E402
from console.formats import abba, gpu_side  # noqa: E402
from console.formats.plainjson import atomic_write_json, dumps  # noqa: E402
from console.formats.profile_record import profile_job_record  # noqa: E402
from console.formats.telemetry_builders import SCHEMA_VERSION  # noqa: E402

PROBLEM = REPO / "examples" / "problems" / "row_softmax"
WORKTREES = ".atrex_long_horizon_worktrees"
RUNTIME = ".atrex_long_horizon"

# Median µs per workload (rows, cols) on an H200, from tools/evaluate.py (defaults: warm-up 10,
# 50 timed calls, L2 flushed before each): the naive and fast bundled kernels, the reference.
# Source: benchmarks/row_softmax_kernels.py, kept in tests/fixtures/evaluator/row_softmax_h200_bench.json.
NAIVE_US = {(4096, 1024): 586.816, (8192, 2048): 1163.024, (2048, 8192): 4642.208, (16384, 512): 295.488,
            (1024, 32768): 18533.504, (4099, 1000): 438.224, (1000, 777): 305.664, (257, 10001): 3852.384,
            (1, 4099): 473.664, (3001, 1): 3.968}
FAST_US = {(4096, 1024): 13.392, (8192, 2048): 37.152, (2048, 8192): 36.4, (16384, 512): 21.744, (1024, 32768): 73.424,
           (4099, 1000): 13.504, (1000, 777): 8.448, (257, 10001): 16.896, (1, 4099): 7.808, (3001, 1): 3.84}
REF_US = {(4096, 1024): 144.464, (8192, 2048): 493.76, (2048, 8192): 493.472, (16384, 512): 290.24, (1024, 32768): 958.944,
          (4099, 1000): 143.2, (1000, 777): 120.608, (257, 10001): 94.448, (1, 4099): 115.296, (3001, 1): 117.84}
# trial 2 (blocks of at most 128 threads, more float4 per thread): slower on the long rows; rows
# that are not a multiple of 4 or shorter than a warp take the same path in both trials, and
# 4099x1000 the same block shapes as 4096x1024 (not measured: its factor is 4096x1024's)
TRIAL2_FACTOR = {(4096, 1024): 0.99, (8192, 2048): 1.01, (2048, 8192): 1.12, (16384, 512): 1.0, (1024, 32768): 1.31,
                 (4099, 1000): 0.99, (1000, 777): 1.0, (257, 10001): 1.0, (1, 4099): 1.0, (3001, 1): 1.0}


class Clock:
    """Wall time and CLOCK_MONOTONIC of the recorded machine, advanced together."""

    def __init__(self, wall: datetime, mono: float) -> None:
        self.wall, self.mono = wall, mono

    def advance(self, seconds: float) -> None:
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds

    def iso(self) -> str:
        return self.wall.isoformat()

    def git_date(self) -> str:
        return self.wall.strftime("%Y-%m-%dT%H:%M:%S+0000")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "atrex-long-horizon", "GIT_AUTHOR_EMAIL": "supervisor@example.invalid",
    "GIT_COMMITTER_NAME": "atrex-long-horizon", "GIT_COMMITTER_EMAIL": "supervisor@example.invalid",
}


def git_env(clock: Clock) -> dict:
    """Identity and dates fixed by the story, so commit ids depend only on the seed."""
    return {**GIT_IDENTITY, "GIT_AUTHOR_DATE": clock.git_date(), "GIT_COMMITTER_DATE": clock.git_date()}


def git(cwd: Path, clock: Clock, *argv: str) -> str:
    env = {**os.environ, **git_env(clock)}
    out = subprocess.run(["git", *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"git {' '.join(argv)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


class Story:
    """Holds the generated campaign's shared state while the episode is written out."""

    def __init__(self, out: Path, name: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.name = name
        self.parent = out
        self.campaign = out / name
        start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC) + timedelta(seconds=self.rng.randrange(0, 30 * 86400))
        self.clock = Clock(start, round(200000.0 + self.rng.uniform(0, 50000), 6))
        self.hex8 = f"{self.rng.getrandbits(32):08x}"
        self.episode_id = f"e0001-{self.hex8}"
        self.worktree = out / WORKTREES / name / self.episode_id
        self.branch = f"atrex/long-e0001-{self.hex8}"
        self.cases = load_contract(PROBLEM).cases
        self.telemetry: list[dict] = []
        self.evaluations: list[dict] = []
        self.pid = self.rng.randrange(2000, 60000)

    # -- ids and numbers ----------------------------------------------------------------

    def uuid_hex(self) -> str:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4).hex

    def job_id(self) -> str:
        return f"{self.clock.wall:%Y%m%dT%H%M%SZ}-{self.rng.getrandbits(24):06x}"

    def jitter(self, value: float, pct: float = 1.0) -> float:
        return value * (1.0 + self.rng.uniform(-pct, pct) / 100.0)

    def latencies(self, table: dict, factor: dict | None = None) -> dict[int, float]:
        out = {}
        for case in self.cases:
            key = (case.axes["rows"], case.axes["cols"])
            out[case.index] = self.jitter(table[key] * (factor[key] if factor else 1.0))
        return out

    def result(self, kernel_us: dict[int, float], *, seeds: int = 1, errs: tuple[float, float] = (3.1e-8, 4.2e-6)) -> dict:
        outcomes = {
            c.index: {
                "ok": True, "latency_us": kernel_us[c.index],
                "ref_latency_us": self.jitter(REF_US[(c.axes["rows"], c.axes["cols"])]),
                "max_abs_err": errs[0] * self.rng.uniform(0.5, 1.0), "max_rel_err": errs[1] * self.rng.uniform(0.5, 1.0),
            }
            for c in self.cases
        }
        extra = {"atol": 1e-12, "rtol": 1e-4, "seeds": list(range(seeds)), "warmup": 10, "iters": 50, "layout": "definition"}
        return evaluate.build_result(self.cases, outcomes, eval_id=self.uuid_hex(), extra=extra)

    # -- telemetry --------------------------------------------------------------------

    def event(self, event: str, source: str, measurement: str, **fields) -> dict:
        record = {
            "schema_version": SCHEMA_VERSION, "campaign_id": self.name, "iteration_id": "episode-0001",
            "attempt_id": "invocation-1", "event": event, "timestamp": self.clock.iso(),
            "monotonic_seconds": round(self.clock.mono, 6), "source": source, "measurement": measurement, **fields,
        }
        self.telemetry.append(record)
        return record

    def phase(self, action: str, phase: str) -> None:
        event = "phase_started" if action == "start" else "phase_completed"
        self.event(event, "agent_marker", "explicit", phase=phase, action=action, marker_id=self.uuid_hex())

    def source_read(self, kind: str, reference: str) -> None:
        self.event("source_read", "agent_marker", "explicit", source_kind=kind, reference=reference)

    def sandbox_wave(self, category: str, durations: list[float]) -> None:
        """Up to four sandbox operations started together; returns when all are done."""
        assert len(durations) <= 4
        ops = []
        for i, duration in enumerate(durations):
            op = f"sandbox-{self.pid}-{int(self.clock.mono * 1e9)}"
            self.event("sandbox_operation_started", "sandbox", "exact", operation_id=op, category=category)
            ops.append((op, duration))
            self.clock.advance(0.05 + 0.01 * i)
        start = self.clock.mono
        for op, duration in sorted(ops, key=lambda item: item[1]):
            self.clock.advance(max(0.0, start + duration - self.clock.mono))
            self.event(
                "sandbox_operation_completed", "sandbox", "exact", operation_id=op, category=category,
                duration_seconds=round(duration, 6), status="succeeded", exit_status=0,
            )

    def evaluation(self, kernel_path: Path, result: dict, *, category: str) -> dict:
        duration = self.jitter(22.0 if category == "benchmark" else 31.0, 10)
        job = self.job_id()
        self.sandbox_wave(category, [duration])
        record = {
            "schema_version": 2, "timestamp": self.clock.iso(), "gateway_kind": "run", "job_id": job,
            "kernel_sha256": sha256_file(kernel_path), "result": result,
        }
        self.evaluations.append(record)
        return record


# ---------------------------------------------------------------------------------------------
# Profiles (FORMATS §9)


def kernel_entry(name: str, duration_ns: float, level: str, metrics: dict | None = None) -> dict:
    entry = {"name": name, "duration": round(duration_ns), "duration_unit": "ns",
             "compute_sol_pct": None, "mem_sol_pct": None, "dram_pct": None, "occupancy_pct": None,
             "bound": None, "metrics": {"gpu__time_duration.sum": round(duration_ns)}}
    if level != "survey" and metrics:
        entry.update(compute_sol_pct=metrics["sm"], mem_sol_pct=metrics["mem"], dram_pct=metrics["dram"],
                     occupancy_pct=metrics["occ"], bound="memory" if metrics["mem"] >= metrics["sm"] else "compute")
        entry["metrics"].update({
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": metrics["sm"],
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": metrics["mem"],
            "dram__throughput.avg.pct_of_peak_sustained_elapsed": metrics["dram"],
            "sm__warps_active.avg.pct_of_peak_sustained_elapsed": metrics["occ"],
        })
    return entry


def gateway_profile(story: Story, level: str, kernels: list[dict]) -> dict:
    """The synced gateway_profile.json: the sandbox's job record around the profile (FORMATS §8)."""
    kernels = sorted(kernels, key=lambda k: -k["duration"])
    profile = {"profiler": "ncu", "level": level, "kernels": kernels, "kernel_count": len(kernels),
               "total_duration_us": round(sum(k["duration"] for k in kernels) / 1000.0, 3),
               "dominant_kernel": kernels[0]["name"], "kernels_omitted": 0}
    return profile_job_record(story.job_id(), "succeeded", profile)


def metrics_key(name: str, duration_ns: float, rows: int, cols: int, grid: int, block: int, m: dict) -> dict:
    """analysis/metrics_key_run.json in AKA's flat layout (ncu metric names, ``__kernel_name__``),
    saying what summary.txt says of the naive kernel: one thread per row reads its row three
    times, 32 sectors per request."""
    requests = 3 * rows * cols // 32
    return {
        "__kernel_name__": name, "gpu__time_duration.sum": round(duration_ns),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": m["sm"],
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": m["mem"],
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": m["dram"],
        "sm__warps_active.avg.pct_of_peak_sustained_active": m["occ"], "sm__maximum_warps_per_active_cycle_pct": 100.0,
        "lts__t_sector_hit_rate.pct": m["l2"], "launch__grid_size": grid, "launch__block_size": block,
        "device__attribute_multiprocessor_count": 132, "launch__registers_per_thread": 24,
        "smsp__sass_inst_executed_op_local_ld.sum": 0, "smsp__sass_inst_executed_op_local_st.sum": 0,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": requests,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 32 * requests,
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": m["stall_ls"],
        "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": m["stall_lg"],
    }


def summary_text(name: str, duration_us: float, grid: int, block: int, m: dict, source: bool) -> str:
    localize = "analysis/source_metrics_line_run.txt, analysis/warp_stalls_line_run.txt" if source else (
        "(run with --source to produce analysis/source_metrics_line_run.txt, analysis/warp_stalls_line_run.txt)"
    )
    return f"""===== NCU Profile Summary =====
Kernel: {name}
Duration: {duration_us:.2f} us
Grid: {grid} blocks x {block} threads
SM Throughput: {m['sm']:.1f}%
Memory Throughput: {m['mem']:.1f}%
L2 Hit Rate: {m['l2']:.1f}%
Achieved Occupancy: {m['occ']:.1f}%
Tensor Core Utilization: 0.0%
Registers/Thread: 24
Local Ld/St: 0 / 0
Top Stall Reasons:
  long_scoreboard: {m['stall_ls']:.1f}
  lg_throttle: {m['stall_lg']:.1f}
  not_selected: 0.4
===== Diagnosis =====
Detected 3 pattern(s):
  Pattern A [high]: small-grid
    Evidence: {grid} blocks for 132 SMs; {132 - min(grid, 132)} SMs idle
  Pattern C [high]: uncoalesced-loads
    Evidence: 32.0 sectors per request on global loads (ideal 4.0)
  Pattern J [medium]: low-achieved-occupancy
    Evidence: achieved occupancy {m['occ']:.1f}% of theoretical 100.0%
SYMPTOMS: low-sm-utilization, memory-bound, pipeline-stalls
LOCALIZE: {localize}
===== Suggested Queries =====
ncu --import ncu.ncu-rep --page details --section MemoryWorkloadAnalysis_Tables
ncu --import ncu.ncu-rep --page source --print-source cuda
"""


def write_profiles(story: Story, root: Path) -> list[str]:
    """Profile the naive kernel as the episode did; returns the files written (relative)."""
    written: list[str] = []
    naive_grid = {c.index: -(-c.axes["rows"] // 256) for c in story.cases}
    input_kernel = "cupy_multiply__float32_float_float32"

    def put(rel: str, obj) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(obj if isinstance(obj, bytes) else dumps(obj, indent=True) + b"\n")
        written.append(rel)

    def metrics(case) -> dict:
        grid = naive_grid[case.index]
        busy = min(grid, 132) / 132.0
        return {"sm": round(story.jitter(9.0 * busy + 1.5, 5), 1), "mem": round(story.jitter(38.0 * busy + 6.0, 5), 1),
                "dram": round(story.jitter(12.0 * busy + 2.0, 5), 1), "occ": round(story.jitter(7.9, 3), 1),
                "l2": round(story.jitter(61.0, 5), 1), "stall_ls": round(story.jitter(18.4, 8), 1),
                "stall_lg": round(story.jitter(6.2, 8), 1)}

    base = "profiles/episode_1"
    survey = [c.index for c in story.cases]
    for wave in (survey[i:i + 4] for i in range(0, len(survey), 4)):
        story.sandbox_wave("profile", [story.jitter(24.0, 15) for _ in wave])
        for i in wave:
            case = story.cases[i]
            naive_ns = NAIVE_US[(case.axes["rows"], case.axes["cols"])] * 1000
            kernels = [kernel_entry("row_softmax_naive", story.jitter(naive_ns, 2), "survey"),
                       kernel_entry(input_kernel, story.jitter(case.axes["rows"] * case.axes["cols"] * 0.0011, 5), "survey")]
            put(f"{base}/survey/shape-{i}/gateway_profile.json", gateway_profile(story, "survey", kernels))
    sol = [4, 2]
    story.sandbox_wave("profile", [story.jitter(41.0, 15) for _ in sol])
    for i in sol:
        case = story.cases[i]
        m = metrics(case)
        naive_ns = story.jitter(NAIVE_US[(case.axes["rows"], case.axes["cols"])] * 1000, 2)
        put(f"{base}/sol/shape-{i}/gateway_profile.json",
            gateway_profile(story, "sol", [kernel_entry("row_softmax_naive", naive_ns, "sol", m)]))
        put(f"{base}/sol/shape-{i}/summary.txt",
            summary_text("row_softmax_naive", naive_ns / 1000, naive_grid[i], 256, m, False).encode())
        put(f"{base}/sol/shape-{i}/analysis/metrics_key_run.json",
            metrics_key("row_softmax_naive", naive_ns, case.axes["rows"], case.axes["cols"], naive_grid[i], 256, m))
    story.sandbox_wave("profile", [story.jitter(118.0, 10)])
    case = story.cases[4]
    m = metrics(case)
    naive_ns = story.jitter(NAIVE_US[(1024, 32768)] * 1000, 2)
    deep = f"{base}/deep/shape-4"
    put(f"{deep}/gateway_profile.json", gateway_profile(story, "deep", [kernel_entry("row_softmax_naive", naive_ns, "deep", m)]))
    put(f"{deep}/summary.txt", summary_text("row_softmax_naive", naive_ns / 1000, naive_grid[4], 256, m, True).encode())
    put(f"{deep}/analysis/metrics_key_run.json", metrics_key("row_softmax_naive", naive_ns, case.axes["rows"], case.axes["cols"], naive_grid[4], 256, m))
    put(f"{deep}/analysis/source_metrics_line_run.txt", (
        b"# line  source                                           sectors/req  l2_hit%  share%\n"
        b"  13    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);        32.0     58.2    33.1\n"
        b"  15    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);       32.0     63.0    33.4\n"
        b"  16    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) / s;  32.0   61.7    33.5\n"
    ))
    put(f"{deep}/analysis/warp_stalls_line_run.txt", (
        b"# line  long_scoreboard  lg_throttle  wait  not_selected\n"
        b"  13    6.1              2.0          0.7   0.1\n"
        b"  15    6.0              2.1          0.9   0.1\n"
        b"  16    6.3              2.2          1.1   0.2\n"
    ))
    evidence = [
        {"name": "source_metrics_line_run", "json": "analysis/source_metrics_line_run.json",
         "txt": "analysis/source_metrics_line_run.txt", "purpose": "memory traffic per source line", "status": "ok"},
        {"name": "warp_stalls_line_run", "json": "analysis/warp_stalls_line_run.json",
         "txt": "analysis/warp_stalls_line_run.txt", "purpose": "stall reasons per source line", "status": "ok"},
        {"name": "disasm_run", "json": "analysis/disasm_run.json", "txt": "analysis/disasm_run.txt",
         "purpose": "SASS of the hot loop", "status": "skipped"},
    ]
    put(f"{deep}/analysis/source_evidence_manifest.json", {"schema": "v1", "evidence": evidence})
    return written


# ---------------------------------------------------------------------------------------------
# Documents


def memory_record(story: Story, version: int, result: dict, **fields) -> dict:
    lat = result["latency_us_by_shape"]
    bandwidth = evaluate.geomean([
        2 * 4 * c.axes["rows"] * c.axes["cols"] / lat[c.shape_id] / 1e3 for c in story.cases
    ])
    performance = {
        "latency_us": result["latency_us_geomean"], "latency_us_geomean": result["latency_us_geomean"],
        "latency_us_arith_mean": result["latency_us_arith_mean"], "latency_us_by_shape": lat,
        "measurement_status": "complete", "measured_shape_count": len(lat), "expected_shape_count": len(story.cases),
        "speedup_vs_ref_geomean": result["speedup_vs_ref_geomean"], "tflops": None,
        "bandwidth_gbps": round(bandwidth, 1), "bandwidth_peak_utilization_pct": round(bandwidth / 4800 * 100, 1),
    }
    performance.update(fields.pop("performance", {}))
    record = {
        "version": version, "masked": False, "timestamp": story.clock.iso(), "performance": performance,
        "correctness": {"status": "PASS", "max_abs_err": result["max_abs_err"], "max_rel_err": result["max_rel_err"]},
        "quality_gate": {"result": "PASS", "failure_reason": None},
    }
    record.update(fields)
    return record


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def build(out: Path, name: str, seed: int) -> Path:
    story = Story(out, name, seed)
    if story.campaign.exists() or (out / WORKTREES / name).exists():
        raise SystemExit(f"{story.campaign} (or its worktrees) already exists")
    clock = story.clock

    # -- the campaign and its baseline (v0) ---------------------------------------------
    clock.advance(-5400)
    # create_workspace's git inherits this process's environment
    fixed = git_env(clock)
    saved = {key: os.environ.get(key) for key in fixed}
    os.environ.update(fixed)
    try:
        create_workspace(story.campaign, "row_softmax")
    finally:
        for key, value in saved.items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value
    campaign = story.campaign
    clock.advance(1800)
    baseline = story.result(story.latencies(NAIVE_US))
    v0 = memory_record(
        story, 0, baseline,
        performance={"measurement_subject": "incumbent", "measurement_source": "framework_baseline",
                     "comparison_method": None, "carried_from_version": None, "authoritative_improvement_pct": None},
        optimization={"action_category": "baseline", "summary": "bundled naive kernel: one thread per row, three passes"},
        profile_evidence=None, experience={"experiment_count": 0, "recorded_experiment_count": 0, "experiments": []},
        open_directions=["one block per row with coalesced loads", "warp-shuffle reductions", "keep the row in registers"],
        git_commit_hash=git(campaign, clock, "rev-parse", "HEAD"), long_horizon=None,
    )
    atomic_write_json(campaign / "memory" / "v0.json", v0)
    git(campaign, clock, "add", "memory/v0.json")
    git(campaign, clock, "commit", "-q", "-m", "long-horizon: record baseline memory v0")
    base_commit = git(campaign, clock, "rev-parse", "HEAD")

    # -- episode 1 starts --------------------------------------------------------------
    clock.advance(3600)
    story.worktree.parent.mkdir(parents=True, exist_ok=True)
    git(campaign, clock, "worktree", "add", "-q", "-b", story.branch, str(story.worktree), base_commit)
    wt = story.worktree
    created_at = clock.iso()
    episode_dir = campaign / RUNTIME / "episodes" / "e0001"
    brief = (f"# Episode 1 of {name}\n\nMemory version: v0 (baseline {baseline['latency_us_geomean']:.1f} us geomean).\n"
             f"Worktree: {wt}\nBranch: {story.branch}\nBase commit: {base_commit}\n\n"
             "Change only kernel.py. Profile through tools/sandbox.py, at most four jobs at once.\n"
             "Hand off with .atrex_long_horizon/handoff.json.\n")
    write_text(episode_dir / "BRIEF.md", brief)
    active = {"episode": 1, "memory_version": 0, "base_commit": base_commit, "episode_branch": story.branch,
              "worktree": str(wt.resolve()), "mode": "full", "fast_trials": 0, "phase": "exploring"}
    atomic_write_json(campaign / RUNTIME / "active_episode.json", active)

    clock.advance(12)
    story.phase("start", "benchmark")
    base_eval = story.evaluation(wt / "kernel.py", story.result(story.latencies(NAIVE_US)), category="benchmark")
    story.phase("end", "benchmark")

    clock.advance(4)
    story.phase("start", "profile")
    write_profiles(story, wt)
    story.phase("end", "profile")

    clock.advance(3)
    story.phase("start", "research")
    for rel in ("profiles/episode_1/sol/shape-4/summary.txt", "profiles/episode_1/deep/shape-4/summary.txt",
                "profiles/episode_1/deep/shape-4/analysis/source_metrics_line_run.txt"):
        clock.advance(story.jitter(20, 30))
        story.source_read("workspace", rel)
    clock.advance(35)
    story.source_read("gpu_wiki", "hopper/memory-coalescing.md")
    clock.advance(50)
    story.source_read("public_web", "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html")
    clock.advance(40)
    story.phase("end", "research")

    clock.advance(2)
    story.phase("start", "planning")
    clock.advance(story.jitter(70, 20))
    write_text(wt / "plans" / "episode_1.md", (
        "# Episode 1 plan\n\n"
        "Evidence: profiles/episode_1/sol/shape-4/summary.txt (small-grid: 4 blocks on 132 SMs; 32 sectors per request).\n\n"
        "1. One block per row, float4 loads, warp-shuffle reductions, row kept in registers.\n"
        "   Expect: DRAM-bound, > 50x on every shape.\n"
        "2. If 1 holds: smaller blocks with more float4 per thread on long rows.\n"))
    story.phase("end", "planning")

    # -- trial 1: the one-block-per-row kernel ------------------------------------------
    clock.advance(2)
    story.phase("start", "implementation")
    clock.advance(story.jitter(420, 15))
    (wt / "kernel.py").write_bytes((PROBLEM / "kernel_fast.py").read_bytes())
    git(wt, clock, "commit", "-q", "-am", "trial 1: one block per row, float4 loads, warp-shuffle reductions")
    trial1 = git(wt, clock, "rev-parse", "HEAD")
    story.phase("end", "implementation")
    clock.advance(3)
    story.phase("start", "correctness")
    story.evaluation(wt / "kernel.py", story.result(story.latencies(FAST_US), seeds=3), category="correctness")
    story.phase("end", "correctness")
    clock.advance(2)
    story.phase("start", "benchmark")
    t1_eval = story.evaluation(wt / "kernel.py", story.result(story.latencies(FAST_US)), category="benchmark")
    story.phase("end", "benchmark")
    experiments = [{
        "name": "block-per-row-registers",
        "hypothesis": "the naive kernel leaves 128 of 132 SMs idle on 1024 rows and loads 32 sectors per request; "
                      "one coalesced block per row should make every shape DRAM-bound",
        "change": "one block per row, float4 loads into registers, warp-shuffle max and sum",
        "evidence": ["profiles/episode_1/sol/shape-4/summary.txt", f"evaluations.jsonl eval_id={t1_eval['result']['eval_id']}"],
        "result": f"geomean {base_eval['result']['latency_us_geomean']:.1f} -> {t1_eval['result']['latency_us_geomean']:.1f} us, all pass",
        "decision": "continue", "timestamp": clock.iso(),
    }]

    # -- trial 2: a regression, reverted ------------------------------------------------
    clock.advance(5)
    story.phase("start", "implementation")
    clock.advance(story.jitter(260, 15))
    trial2_text = (PROBLEM / "kernel_fast.py").read_text().replace("for limit in (256, 1024):", "for limit in (128, 1024):")
    write_text(wt / "plans" / "e0001-trial2-kernel.py", trial2_text)
    (wt / "kernel.py").write_text(trial2_text)
    story.phase("end", "implementation")
    clock.advance(2)
    story.phase("start", "benchmark")
    t2_eval = story.evaluation(wt / "kernel.py", story.result(story.latencies(FAST_US, TRIAL2_FACTOR)), category="benchmark")
    story.phase("end", "benchmark")
    git(wt, clock, "checkout", "-q", "--", "kernel.py")
    experiments.append({
        "name": "smaller-blocks-long-rows",
        "hypothesis": "128-thread blocks with more float4 per thread raise memory-level parallelism on long rows",
        "change": "block size limit 256 -> 128 in the launch plan (plans/e0001-trial2-kernel.py)",
        "evidence": [f"evaluations.jsonl eval_id={t2_eval['result']['eval_id']}"],
        "result": f"geomean {t2_eval['result']['latency_us_geomean']:.1f} us, slower on 1024x32768 and 2048x8192",
        "decision": "revert", "timestamp": clock.iso(),
    })

    # -- final checks on HEAD and hand-off ----------------------------------------------
    clock.advance(3)
    story.phase("start", "correctness")
    story.evaluation(wt / "kernel.py", story.result(story.latencies(FAST_US), seeds=3), category="correctness")
    story.phase("end", "correctness")
    clock.advance(2)
    story.phase("start", "benchmark")
    final_eval = story.evaluation(wt / "kernel.py", story.result(story.latencies(FAST_US)), category="benchmark")
    story.phase("end", "benchmark")
    clock.advance(2)
    story.phase("start", "recording")
    clock.advance(story.jitter(45, 20))
    candidate = git(wt, clock, "rev-parse", "HEAD")
    assert candidate == trial1
    outcome = {"summary": "one block per row with float4 loads and register-resident rows; all shapes DRAM-bound",
               "next_directions": ["several rows per block for rows of 512 floats", "persistent blocks for few-row shapes"]}
    journal = {"schema_version": 1, "episode": 1, "memory_version": 0, "base_commit": base_commit,
               "episode_branch": story.branch, "state": "candidate_ready", "experiments": experiments,
               "outcome": outcome, "created_at": created_at, "finalized_at": clock.iso(), "candidate_commit": candidate}
    runtime = wt / RUNTIME
    atomic_write_json(runtime / "journal.json", journal)
    atomic_write_json(runtime / "handoff.json", {"status": "candidate_ready", "candidate_commit": candidate})
    story.phase("end", "recording")
    write_text(runtime / "telemetry.jsonl", "".join(dumps(r).decode() + "\n" for r in story.telemetry))
    write_text(runtime / "evaluations.jsonl", "".join(dumps(r).decode() + "\n" for r in story.evaluations))

    # -- ABBA verification in one allocation (R=2: I C C I) ----------------------------
    clock.advance(30)
    active["phase"] = "verifying"
    verify_uuid = story.uuid_hex()
    # written where the verification runs (the worktree), named where it stays once the
    # episode is archived (FORMATS §7)
    live_verify = wt / "verification_artifacts" / ".atrex_long_horizon_verify"
    artifacts = live_verify / verify_uuid
    archived_rel = f"{RUNTIME}/episodes/e0001/verification_runtime/{verify_uuid}"
    command = ["python3", "test_kernel.py"]
    schedule = [{"revision": rev, "repeat": i // 2} for i, rev in enumerate(gpu_side.abba_schedule(2))]
    runs = []
    for revision_step in schedule:
        table = FAST_US if revision_step["revision"] == "candidate" else NAIVE_US
        result = story.result(story.latencies(table))
        clock.advance(story.jitter(26.0, 10))
        runs.append({**revision_step, "exit_code": 0, "result": result,
                     "stdout_tail": evaluate.result_line(result)[-2000:], "stderr_tail": ""})
    batches = [("0001", [0, 1, 2, 3]), ("0002", [4])]
    for number, shape_ids in batches:
        request = {"schema_version": gpu_side.PAYLOAD_SCHEMA, "schedule": schedule,
                   "command": [*command, "--shape-id", ",".join(map(str, shape_ids))], "run_timeout_seconds": 600,
                   "manifests": {"incumbent": {"commit": base_commit, "kernel_sha256": base_eval["kernel_sha256"]},
                                 "candidate": {"commit": candidate, "kernel_sha256": final_eval["kernel_sha256"]}}}
        atomic_write_json(artifacts / f"request-{number}.json", request)
        batch_runs = []
        for run in runs:
            sub_ids = {story.cases[i].shape_id for i in shape_ids}
            by_shape = {k: v for k, v in run["result"]["latency_us_by_shape"].items() if k in sub_ids}
            sub = {**run["result"], "latency_us_by_shape": by_shape,
                   "latency_us_geomean": round(evaluate.geomean(list(by_shape.values())), 3),
                   "latency_us_arith_mean": round(sum(by_shape.values()) / len(by_shape), 3),
                   "measured_shape_count": len(by_shape), "expected_shape_count": len(by_shape)}
            sub["ref_latency_us_by_shape"] = {k: v for k, v in run["result"]["ref_latency_us_by_shape"].items() if k in sub_ids}
            batch_runs.append({**run, "result": sub, "stdout_tail": evaluate.result_line(sub)[-2000:]})
        atomic_write_json(artifacts / f"result-{number}.json",
                          {"schema_version": gpu_side.PAYLOAD_SCHEMA, "runs": batch_runs, "error": None, "shape_batch_count": 1})
    atomic_write_json(artifacts / "result.json",
                      {"schema_version": gpu_side.PAYLOAD_SCHEMA, "runs": runs, "error": None, "shape_batch_count": len(batches)})
    verdict = abba.compute_verdict([abba.parse_abba_run(r) for r in runs], 2, artifact=archived_rel).to_json()

    # -- the supervisor copies the worktree's runtime files and the contents of its
    # verification directory into the episode's record; the worktree stays until the end
    shutil.copytree(runtime, episode_dir / "episode_runtime")
    shutil.copytree(live_verify, episode_dir / "verification_runtime")

    # -- promotion: kernel.py from the candidate plus memory v1, one commit on main ------
    clock.advance(20)
    git(campaign, clock, "checkout", "-q", candidate, "--", "kernel.py")
    candidate_result = {**final_eval["result"]}
    cand_by_shape = {}
    for shape_id in candidate_result["latency_us_by_shape"]:
        values = [r["result"]["latency_us_by_shape"][shape_id] for r in runs if r["revision"] == "candidate"]
        cand_by_shape[shape_id] = round(math.sqrt(values[0] * values[1]), 3)
    candidate_result["latency_us_by_shape"] = cand_by_shape
    candidate_result["latency_us_geomean"] = round(verdict["candidate_latency_us"], 3)
    candidate_result["latency_us_arith_mean"] = round(sum(cand_by_shape.values()) / len(cand_by_shape), 3)
    v1 = memory_record(
        story, 1, candidate_result,
        performance={"measurement_subject": "candidate", "measurement_source": "abba_verification",
                     "comparison_method": "same_allocation_abba", "carried_from_version": None,
                     "authoritative_improvement_pct": round(verdict["improvement_pct"], 3)},
        optimization={"action_category": "memory_access", "summary": outcome["summary"]},
        profile_evidence={"tool_used": "ncu", "bottleneck_type": "latency-bound (small grid, uncoalesced loads)",
                          "evidence_summary": "naive kernel: 4 blocks on 132 SMs for 1024 rows, 32 sectors per request",
                          "evidence_chain": ["profiles/episode_1/survey/shape-4/gateway_profile.json",
                                             "profiles/episode_1/sol/shape-4/summary.txt",
                                             "profiles/episode_1/deep/shape-4/analysis/source_metrics_line_run.txt"]},
        experience={"experiment_count": len(experiments), "recorded_experiment_count": len(experiments),
                    "experiments": [{"index": i, **e, "details": None} for i, e in enumerate(experiments)]},
        open_directions=outcome["next_directions"][:3], git_commit_hash=candidate,
        long_horizon={"status": "candidate_ready", "mode": "full", "verification": "abba"},
    )
    atomic_write_json(campaign / "memory" / "v1.json", v1)
    git(campaign, clock, "add", "kernel.py", "memory/v1.json")
    git(campaign, clock, "commit", "-q", "-m", "long-horizon: promote episode 1 (v1)")
    promotion = git(campaign, clock, "rev-parse", "HEAD")
    active.update(phase="promoted", terminal_status="candidate_ready", promotion_commit=promotion)
    atomic_write_json(campaign / RUNTIME / "active_episode.json", active)

    # -- supervisor records ------------------------------------------------------------
    rng = story.rng
    phase_names = ("profile", "research", "planning", "implementation", "correctness", "benchmark", "recording")
    phases = {}
    for phase_name in phase_names:
        inp, outp = rng.randrange(40000, 400000), rng.randrange(2000, 30000)
        cr, cw = rng.randrange(100000, 900000), rng.randrange(5000, 60000)
        usage = {"input_tokens": inp, "output_tokens": outp, "cache_read_tokens": cr, "cache_write_tokens": cw,
                 "total_tokens": inp + outp + cr + cw}
        count = sum(1 for r in story.telemetry if r.get("phase") == phase_name and r["event"] == "phase_started")
        phases[phase_name] = {"usage": usage, "interval_count": count, "measurement": "exact", "reason": None}
    orchestration = {"input_tokens": 52000, "output_tokens": 3100, "cache_read_tokens": 210000,
                     "cache_write_tokens": 9000, "total_tokens": 274100}
    terminal = {key: sum(p["usage"][key] for p in phases.values()) + orchestration[key] for key in orchestration}
    episode_tokens = terminal["total_tokens"]
    summary_rel = f"{RUNTIME}/episodes/e0001/telemetry.summary.json"
    telemetry_summary = {
        "schema_version": "atrex_long_horizon_episode_telemetry_v1", "episode": 1, "version": "v1",
        "status": "candidate_ready", "accepted": True, "control_tokens": 18250, "resume_count": 0, "invocation_count": 1,
        "phase_tokens": {"terminal_usage": terminal, "phases": phases, "orchestration": orchestration,
                         "unattributed": {k: 0 for k in orchestration}, "coverage": 1.0,
                         "reconciliation_status": "reconciled", "measurement": "exact", "reason_codes": []},
        "measurement": "exact",
    }
    atomic_write_json(campaign / summary_rel, telemetry_summary)
    write_text(episode_dir / "telemetry.brief.md", (
        f"# Episode 1 telemetry\n\nTokens: {episode_tokens}\n"
        + "".join(f"- {p}: {phases[p]['usage']['total_tokens']} tokens, {phases[p]['interval_count']} interval(s)\n"
                  for p in phase_names)))
    attempt = {
        "episode": 1, "version": "v1", "mode": "full", "fast_trials": 0, "status": "candidate_ready", "accepted": True,
        "violation": None, "base_commit": base_commit, "episode_branch": story.branch, "episode_head": candidate,
        "candidate_commit": candidate, "changed_paths": ["kernel.py"], "session_id": story.uuid_hex(),
        "resume_count": 0, "tokens": episode_tokens, "summary": outcome["summary"],
        "next_directions": outcome["next_directions"], "verification": verdict,
        "telemetry": {"summary": summary_rel, "measurement": "exact", "reason_codes": []},
        "promotion_commit": promotion,
    }
    atomic_write_json(episode_dir / "attempt.json", attempt)
    (episode_dir / "archive").mkdir(parents=True, exist_ok=True)
    state = {"episodes": 1, "accepted": 1, "rejected": 0, "pivoted": 0, "blocked": 0, "protocol_failures": 0,
             "interrupted": 0, "tokens": episode_tokens + 18250, "consecutive_without_promotion": 0,
             "attempts": [attempt], "usage_receipts": {}}
    atomic_write_json(campaign / RUNTIME / "state.json", state)
    live = {"schema_version": "atrex_long_horizon_live_v1", "canonical": False, "canonical_memory_recorded": True,
            "note": "observability mirror; never promotion evidence", "version": 1, "episode": 1, "phase": "promoted",
            "journal_state": "candidate_ready", "experiment_count": len(experiments),
            "latest_experiment": experiments[-1], "outcome": outcome, "candidate_commit": candidate,
            "base_commit": base_commit, "episode_branch": story.branch, "created_at": created_at,
            "updated_at": clock.iso(), "canonical_memory": "memory/v1.json", "accepted": True}
    atomic_write_json(campaign / "memory" / "live.json", live)
    write_text(campaign / RUNTIME / "supervisor.log", (
        f"[long-horizon] episode=1 mode=full status=candidate_ready accepted=True version=v1 "
        f"tokens={episode_tokens} commit={promotion}\n"))
    return campaign


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build an example AKA-layout campaign (no GPU needed).")
    parser.add_argument("out_dir", help="directory to build into (the campaign is OUT_DIR/<name>)")
    parser.add_argument("--seed", type=int, default=0, help="seed for ids, dates and jitter (default 0)")
    parser.add_argument("--name", default="row_softmax", help="campaign name (default row_softmax)")
    args = parser.parse_args(argv)
    out = Path(args.out_dir).expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    campaign = build(out, args.name, args.seed)
    print(campaign)
    return 0


if __name__ == "__main__":
    sys.exit(main())
