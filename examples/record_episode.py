#!/usr/bin/env python3
"""Record two real optimization episodes on a GPU machine, in the AKA campaign layout.

    PYTHONPATH=. python3 examples/record_episode.py OUT_DIR [--name row_softmax]
                                                   [--archive FILE.tar.gz]

Everything below runs for real, on the GPU of this machine, through the tool kit:

supervisor  `episcope init`-equivalent campaign (git), baseline evaluation -> memory/v0.json,
            state.json; per episode active_episode.json and a worktree (`git worktree add -b
            atrex/long-eNNNN-<8hex>` under <parent>/.atrex_long_horizon_worktrees/<name>/)
episode 1   inside the worktree, with ATREX_TELEMETRY_* set: phase markers, source reads,
            survey -> sol -> deep (--source) profiles of the naive kernel through
            tools/sandbox.py, one at a time (profiles/episode_1/<level>/shape-<i>),
            the files LOCALIZE names read, the change (the bundled fast kernel becomes
            kernel.py, committed), correctness (--multi-seed 3) and benchmark through the
            sandbox, a sol profile of the new kernel against the old one, handoff.json
episode 2   a timeline question about the incumbent: its CUDA source with probe sites, one
            capture through the sandbox (examples/timeline_capture.py), decoded by the
            timeline skill into profiles/timeline/e0002/ (trace, summary, receipt); the trial
            that answer suggests (every row through the online kernel), correctness,
            benchmark, sol and deep --source profiles of the trial, handoff.json
supervisor  after each: handoff checks, ABBA verification (tools/abba.py, I C C I, more than
            MIN_IMPROVEMENT_PCT faster to pass) in the worktree's verification_artifacts/,
            archived to episodes/eNNNN/verification_runtime/<uuid>/, a promotion commit with
            memory/v<N>.json or a rejection, attempt.json, telemetry.summary.json, state.json;
            the active episode is archived as AKA does (its runtime files under
            episodes/eNNNN/episode_runtime/, archive/git.json, active_episode.json removed)

The second trial is slower than the incumbent on the H200, so the recording holds one
promotion and one rejection; the exit status is 1 if ABBA said otherwise. No token counts
exist for a scripted episode: every token field is recorded as unknown. With --archive the
campaign and its worktrees are packed into one tar.gz (no raw .ncu-rep, no links), which
`episcope status FILE.tar.gz` opens. Needs git, ncu, cupy and GitPython (for the campaign's
first commit); standard library and numpy otherwise (it runs where orjson and the console's
UI packages are absent).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

from problem_contract import load_contract  # noqa: E402

from console.commands.init import create_workspace  # noqa: E402
from console.formats import gpu_side  # noqa: E402
from console.formats.plainjson import atomic_replacement, atomic_write_json  # noqa: E402
from console.timeline.manifest import EVENTS_SCHEMA  # noqa: E402

PROBLEM = "row_softmax"
WORKTREES = ".atrex_long_horizon_worktrees"
RUNTIME = ".atrex_long_horizon"
# the supervisor promotes a candidate only when it is more than this much faster (ABBA geomean)
MIN_IMPROVEMENT_PCT = 1.0
H200_DRAM_GBPS = 4800.0  # nominal HBM3e bandwidth of the H200, for *_peak_utilization_pct
PROBE_MARKERS = ("atrex_timeline.cuh", "atrex::timeline::Recorder", "ATREX_TIMELINE_ENABLED", "cute.experimental.iket.")
SUPERVISOR = {"GIT_AUTHOR_NAME": "atrex-long-horizon", "GIT_AUTHOR_EMAIL": "supervisor@example.invalid",
              "GIT_COMMITTER_NAME": "atrex-long-horizon", "GIT_COMMITTER_EMAIL": "supervisor@example.invalid"}
AGENT = {"GIT_AUTHOR_NAME": "episode-agent", "GIT_AUTHOR_EMAIL": "agent@example.invalid",
         "GIT_COMMITTER_NAME": "episode-agent", "GIT_COMMITTER_EMAIL": "agent@example.invalid"}

# Episode 2's timeline: the shape with the most bytes per row, one writer (thread 0) per block
TIMELINE_SHAPE = (1024, 32768)
TIMELINE_EVENTS = {"schema": EVENTS_SCHEMA, "sites": [
    {"site_id": 1, "name": "load", "kind": "range", "boundary_semantics": "issue order: the row's loads and the thread's max"},
    {"site_id": 2, "name": "reduce", "kind": "range",
     "boundary_semantics": "issue order: block max, exponentials, block sum (both barriers included)"},
    {"site_id": 3, "name": "store", "kind": "range", "boundary_semantics": "issue order: normalise and issue the stores"}]}
CAPTURE_SCRIPT = Path(__file__).with_name("timeline_capture.py")
CAPTURE_PREFIX = "[capture] PROBE_JSON="

_T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[record {time.monotonic() - _T0:7.1f}s] {message}", flush=True)


def now() -> str:
    return datetime.now(UTC).isoformat()


def fail(message: str) -> None:
    raise SystemExit(f"record_episode: {message}")


def git(cwd: Path, identity: dict, *argv: str) -> str:
    out = subprocess.run(["git", *argv], cwd=cwd, env={**os.environ, **identity}, capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"git {' '.join(argv)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def last_json(stdout: str, prefix: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        text = line.strip()
        if text.startswith(prefix):
            return json.loads(text[len(prefix):])
    return None


def run(argv: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """Run to the end, echo its output into this log, return it."""
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    for stream in (proc.stdout, proc.stderr):
        for line in stream.splitlines():
            # the ABBA verdict repeats every run's output; the artifacts keep it
            if not line.startswith(("==PROF==", "[profile_driver]", gpu_side.ABBA_PREFIX)):
                print(f"    | {line}", flush=True)
    return proc


def run_profile_job(command: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """Run one sandboxed profile to the end; echo only the sandbox's and the script's own lines."""
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith(("[sandbox]", "profile_nvidia.sh")) and not line.startswith(gpu_side.PROFILE_PREFIX):
            print(f"    | {line}", flush=True)
    return proc


def instrument_regs(source: str) -> str:
    """kernel.py's CUDA source with probe sites in row_softmax_regs: load, reduce, store, written
    by thread 0 of each block into the buffer passed as a new last argument."""
    cuda = re.search(r'_SOURCE = r"""(.*?)"""', source, re.S)
    if cuda is None:
        fail("kernel.py has no _SOURCE")
    text = cuda.group(1)
    head, sep, rest = text.partition("template <int VPT>\n__global__ void row_softmax_regs(")
    body, sep2, tail = rest.partition("__global__ void row_softmax_online(")
    if not sep or not sep2:
        fail("kernel.py has no row_softmax_regs followed by row_softmax_online")
    edits = (
        ("int cols) {\n    __shared__ float scratch[33];\n",
         "int cols, void* timeline) {\n    __shared__ float scratch[33];\n"
         "    atrex::timeline::Recorder rec(timeline, 0u, threadIdx.x == 0);\n    rec.begin(atrex_sites::load);\n"),
        ("    m = block_reduce(m, MaxOp(), NEG_INF, scratch);\n",
         "    rec.end(atrex_sites::load);\n    rec.begin(atrex_sites::reduce);\n"
         "    m = block_reduce(m, MaxOp(), NEG_INF, scratch);\n"),
        ("    const float inv = 1.0f / s;\n",
         "    rec.end(atrex_sites::reduce);\n    rec.begin(atrex_sites::store);\n    const float inv = 1.0f / s;\n"),
    )
    for old, new in edits:
        if body.count(old) != 1:
            fail(f"row_softmax_regs: cannot place a probe site at {old.strip()!r}")
        body = body.replace(old, new)
    store_loop, closing, after = body.rpartition("    }\n}\n")
    if not closing:
        fail("row_softmax_regs: no closing store loop")
    body = store_loop + "    }\n    rec.end(atrex_sites::store);\n}\n" + after
    return head + sep + body + sep2 + tail


def stream_every_row(source: str) -> str:
    """Episode 2's trial: kernel.py with every row length planned onto row_softmax_online."""
    plan = re.search(r"def _plan\(cols\):\n.*?\n\n\n", source, re.S)
    if plan is None:
        fail("kernel.py has no _plan(cols)")
    return source.replace(plan.group(0), (
        "def _plan(cols):\n"
        '    """(kernel, threads) for one row length: every row streams through the online kernel,\n'
        '    which holds no row in registers (fewer registers per thread, more blocks per SM)."""\n'
        '    return _module.get_function("row_softmax_online"), 512\n\n\n'))


def site_means(summary: dict) -> dict[str, float]:
    """Mean microseconds per range of each site, from a timeline summary (one range per writer)."""
    return {site: round(total / (summary["site_event_count"][site] / 2) / 1e3, 3)
            for site, total in summary["site_total_duration_ns"].items()}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# ---------------------------------------------------------------------------------------------
# The episode


class Recorder:
    def __init__(self, out: Path, name: str) -> None:
        self.out = out
        self.name = name
        self.campaign = out / name
        self.cases = load_contract(REPO / "examples" / "problems" / PROBLEM).cases
        self.incumbent_version = 0

    # -- supervisor: campaign and baseline ----------------------------------------------

    def make_campaign(self) -> None:
        saved = {k: os.environ.get(k) for k in SUPERVISOR}
        os.environ.update(SUPERVISOR)  # create_workspace's git inherits this environment
        try:
            create_workspace(self.campaign, PROBLEM)
        finally:
            for key, value in saved.items():
                if value is None:
                    del os.environ[key]
                else:
                    os.environ[key] = value
        atomic_write_json(self.campaign / RUNTIME / "state.json", {
            "episodes": 0, "accepted": 0, "rejected": 0, "pivoted": 0, "blocked": 0, "protocol_failures": 0,
            "interrupted": 0, "tokens": None, "consecutive_without_promotion": 0, "attempts": [], "usage_receipts": {}})
        log(f"campaign {self.campaign} at {git(self.campaign, SUPERVISOR, 'rev-parse', 'HEAD')[:12]}")

    def memory_record(self, version: int, result: dict, **fields) -> dict:
        lat = result["latency_us_by_shape"]
        bandwidth = geomean([2 * 4 * c.axes["rows"] * c.axes["cols"] / lat[c.shape_id] / 1e3 for c in self.cases])
        performance = {
            "latency_us": result["latency_us_geomean"], "latency_us_geomean": result["latency_us_geomean"],
            "latency_us_arith_mean": result["latency_us_arith_mean"], "latency_us_by_shape": lat,
            "measurement_status": "complete" if len(lat) == len(self.cases) else "not_evaluated_or_incomplete",
            "measured_shape_count": len(lat), "expected_shape_count": len(self.cases),
            "speedup_vs_ref_geomean": result.get("speedup_vs_ref_geomean"), "tflops": None,
            "bandwidth_gbps": round(bandwidth, 1),
            "bandwidth_peak_utilization_pct": round(bandwidth / H200_DRAM_GBPS * 100, 1),
        }
        performance.update(fields.pop("performance"))
        correctness = fields.pop("correctness", result)
        record = {
            "version": version, "masked": False, "timestamp": now(), "performance": performance,
            "correctness": {"status": "PASS" if correctness["all_pass"] else "FAIL",
                            "max_abs_err": correctness.get("max_abs_err"), "max_rel_err": correctness.get("max_rel_err")},
            "quality_gate": {"result": "PASS" if correctness["all_pass"] else "FAIL",
                             "failure_reason": None if correctness["all_pass"] else "; ".join(correctness["failures"])},
        }
        record.update(fields)
        return record

    def baseline(self) -> None:
        log("baseline evaluation of the naive kernel (framework baseline, v0)")
        proc = run(["python3", "test_kernel.py"], self.campaign, dict(os.environ))
        self.baseline_result = last_json(proc.stdout, gpu_side.RESULT_PREFIX)
        if proc.returncode != 0 or not self.baseline_result or not self.baseline_result["all_pass"]:
            fail("the baseline evaluation did not pass")
        head = git(self.campaign, SUPERVISOR, "rev-parse", "HEAD")
        v0 = self.memory_record(
            0, self.baseline_result,
            performance={"measurement_subject": "incumbent", "measurement_source": "framework_baseline",
                         "comparison_method": None, "carried_from_version": None, "authoritative_improvement_pct": None},
            optimization={"action_category": "baseline", "summary": "bundled naive kernel: one thread per row, three passes"},
            profile_evidence=None, experience={"experiment_count": 0, "recorded_experiment_count": 0, "experiments": []},
            open_directions=[], git_commit_hash=head, long_horizon=None)
        atomic_write_json(self.campaign / "memory" / "v0.json", v0)
        git(self.campaign, SUPERVISOR, "add", "memory/v0.json")
        git(self.campaign, SUPERVISOR, "commit", "-q", "-m", "long-horizon: record baseline memory v0")
        self.incumbent_result = self.baseline_result
        log(f"v0: {self.baseline_result['latency_us_geomean']} us geomean")

    def start_episode(self, n: int) -> None:
        """Episode ``n`` from the incumbent (the campaign's HEAD): its worktree, branch and brief."""
        self.n = n
        self.hex8 = secrets.token_hex(4)
        self.episode_id = f"e{n:04d}-{self.hex8}"
        self.branch = f"atrex/long-e{n:04d}-{self.hex8}"
        self.worktree = self.out / WORKTREES / self.name / self.episode_id
        self.episode_dir = self.campaign / RUNTIME / "episodes" / f"e{n:04d}"
        self.experiments: list[dict] = []
        self.journal: dict = {}
        self.base_commit = git(self.campaign, SUPERVISOR, "rev-parse", "HEAD")
        incumbent_us = self.incumbent_result["latency_us_geomean"]
        self.active = {"episode": n, "memory_version": self.incumbent_version, "base_commit": self.base_commit,
                       "episode_branch": self.branch,
                       "worktree": str(self.worktree), "mode": "full", "fast_trials": 0, "phase": "preparing"}
        atomic_write_json(self.campaign / RUNTIME / "active_episode.json", self.active)
        self.worktree.parent.mkdir(parents=True, exist_ok=True)
        git(self.campaign, SUPERVISOR, "worktree", "add", "-q", "-b", self.branch, str(self.worktree), self.base_commit)
        self.created_at = now()
        self.episode_dir.mkdir(parents=True, exist_ok=True)
        (self.episode_dir / "BRIEF.md").write_text(
            f"# Episode {n} of {self.name}\n\nMemory version: v{self.incumbent_version} ({incumbent_us} us geomean).\n"
            f"Branch: {self.branch}\nBase commit: {self.base_commit}\n\n"
            "Change only kernel.py. Run GPU work through tools/sandbox.py, at most four jobs at once.\n"
            "Hand off with .atrex_long_horizon/handoff.json.\n", encoding="utf-8")
        self.active["phase"] = "exploring"
        atomic_write_json(self.campaign / RUNTIME / "active_episode.json", self.active)
        self.write_live("exploring", "in_progress", None, None)
        log(f"worktree {self.worktree} on {self.branch}")

    def write_live(self, phase: str, journal_state: str, canonical: str | None, accepted: bool | None) -> None:
        atomic_write_json(self.campaign / "memory" / "live.json", {
            "schema_version": "atrex_long_horizon_live_v1", "canonical": False,
            "canonical_memory_recorded": canonical is not None, "note": "observability mirror; never promotion evidence",
            "version": self.incumbent_version, "episode": self.n, "phase": phase, "journal_state": journal_state,
            "experiment_count": len(self.experiments), "latest_experiment": self.experiments[-1] if self.experiments else None,
            "outcome": self.journal.get("outcome"), "candidate_commit": self.journal.get("candidate_commit"),
            "base_commit": self.base_commit, "episode_branch": self.branch, "created_at": self.created_at,
            "updated_at": now(), "canonical_memory": canonical, "accepted": accepted})

    # -- agent ---------------------------------------------------------------------------

    def supervisor_env(self) -> dict:
        # tools/abba.py copied into the campaign imports the console package from here
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}

    def agent_env(self) -> dict:
        env = dict(os.environ)
        env.update({
            "ATREX_TELEMETRY_TRACE": str(self.worktree / RUNTIME / "telemetry.jsonl"),
            "ATREX_TELEMETRY_CAMPAIGN_ID": self.name, "ATREX_TELEMETRY_ITERATION_ID": f"episode-{self.n:04d}",
            "ATREX_TELEMETRY_ATTEMPT_ID": "invocation-1",
            "PYTHONPATH": self.supervisor_env()["PYTHONPATH"],
            "PROFILE_WARMUP": "1", "PROFILE_ITERS": "1", **AGENT,
        })
        return env

    def trace(self, *argv: str) -> None:
        proc = run([sys.executable, "tools/iteration_trace.py", *argv], self.worktree, self.env)
        if proc.returncode != 0:
            fail(f"iteration_trace {' '.join(argv)} failed")

    def read(self, kind: str, reference: str) -> str:
        """Read a document for real and log the read."""
        path = REPO / reference if kind == "reference_projects" else self.worktree / reference
        text = path.read_text(encoding="utf-8")
        self.trace("source-read", kind, reference)
        return text

    def save_journal(self, **changes) -> None:
        self.journal.update(changes, experiments=self.experiments)
        atomic_write_json(self.worktree / RUNTIME / "journal.json", self.journal)

    def profile_cmd(self, level: str, shape: int, out: str, *extra: str, regex: str | None = None) -> list[str]:
        cmd = [sys.executable, "tools/sandbox.py", "--kind", "profile", "--profile-level", level, "--timeout", "120",
               "-e", f"PROFILE_WORKLOAD_IDX={shape}"]
        if regex:
            cmd += ["--kernel-regex", regex]
        return cmd + ["--", "bash", "tools/profile_nvidia.sh", "profile_driver.py", "--output-dir", out, *extra]

    def profile_jobs(self, jobs: list[tuple[str, list[str]]]) -> dict[str, dict]:
        """Run the profiles one after another (on the H200, four ncu processes started together
        with the driver's profiled range let one finish and kept the other three waiting until
        the sandbox's timeout); a job that failed is run once more. Returns out dir -> PROFILE_JSON."""
        found: dict[str, dict] = {}
        for out, cmd in jobs:
            proc = run_profile_job(cmd, self.worktree, self.env)
            profile = last_json(proc.stdout, gpu_side.PROFILE_PREFIX) if proc.returncode == 0 else None
            if profile is None:
                log(f"profile {out} failed (exit {proc.returncode}); once more")
                retry = run_profile_job(cmd, self.worktree, self.env)
                profile = last_json(retry.stdout, gpu_side.PROFILE_PREFIX) if retry.returncode == 0 else None
                if profile is None:
                    print(retry.stdout[-3000:], retry.stderr[-3000:], flush=True)
                    fail(f"profile {out} failed twice")
            dominant = profile.get("dominant_kernel")
            log(f"  {out}: dominant {dominant}, {profile.get('total_duration_us')} us in {profile.get('kernel_count')} kernel(s)")
            found[out] = profile
        return found

    def evaluate(self, *args: str) -> dict:
        proc = run([sys.executable, "tools/sandbox.py", "--kind", "run", "--timeout", "300", "--",
                    "python3", "test_kernel.py", *args], self.worktree, self.env)
        result = last_json(proc.stdout, gpu_side.RESULT_PREFIX)
        if result is None:
            fail(f"no RESULT_JSON from test_kernel.py {' '.join(args)}")
        log(f"  test_kernel.py {' '.join(args)}: all_pass={result['all_pass']} geomean {result['latency_us_geomean']} us")
        return result

    def check_and_benchmark(self) -> tuple[dict, dict]:
        """The committed trial through the sandbox: correctness over three seeds, then the
        benchmark, each in its phase. The correctness result is kept for the memory record."""
        self.trace("phase-start", "correctness")
        self.correctness = self.evaluate("--multi-seed", "3")
        self.trace("phase-end", "correctness")
        self.trace("phase-start", "benchmark")
        bench = self.evaluate()
        self.trace("phase-end", "benchmark")
        return self.correctness, bench

    def open_journal(self) -> None:
        self.env = self.agent_env()
        self.save_journal(schema_version=1, episode=self.n, memory_version=self.incumbent_version,
                          base_commit=self.base_commit, episode_branch=self.branch, state="in_progress", outcome=None,
                          created_at=self.created_at, finalized_at=None, candidate_commit=None)

    def hand_off(self, trial: str, outcome: dict) -> None:
        """The recording phase: journal outcome, then the hand-off, last."""
        self.trace("phase-start", "recording")
        if any(marker in (self.worktree / "kernel.py").read_text() for marker in PROBE_MARKERS):
            fail("kernel.py holds a timeline probe")
        self.save_journal(state="candidate_ready", outcome=outcome, finalized_at=now(), candidate_commit=trial)
        atomic_write_json(self.worktree / RUNTIME / "handoff.json", {"status": "candidate_ready", "candidate_commit": trial})
        self.trace("phase-end", "recording")
        self.candidate = trial
        self.outcome = outcome

    def agent_episode1(self) -> None:
        """Profile the naive kernel down the funnel, then replace it with the block-per-row kernel."""
        self.open_journal()
        P = "profiles/episode_1"
        self.trace("source-read", "workspace", "definition.json")
        self.read("workspace", "kernel.py")

        # profile: survey every shape, sol on the two slowest, deep on the slowest
        self.trace("phase-start", "profile")
        log("profile: survey")
        survey: dict[str, dict] = {}
        indices = [c.index for c in self.cases]
        survey.update(self.profile_jobs([(f"{P}/survey/shape-{i}", self.profile_cmd("survey", i, f"{P}/survey/shape-{i}"))
                                         for i in indices]))

        def dominant_ns(profile: dict) -> float:
            top = next(k for k in profile["kernels"] if k["name"] == profile["dominant_kernel"])
            return float(top["duration"])

        ranked = sorted(indices, key=lambda i: -dominant_ns(survey[f"{P}/survey/shape-{i}"]))
        slowest = ranked[0]
        target = survey[f"{P}/survey/shape-{slowest}"]["dominant_kernel"]
        regex = f"^{re.escape(target)}$"
        log(f"profile: sol on shapes {ranked[:2]} ({target})")
        self.profile_jobs([(f"{P}/sol/shape-{i}", self.profile_cmd("sol", i, f"{P}/sol/shape-{i}", "--launch-count", "1", regex=regex))
                           for i in ranked[:2]])
        log(f"profile: deep --source on shape {slowest}")
        deep_dir = f"{P}/deep/shape-{slowest}"
        (deep,) = self.profile_jobs([(deep_dir, self.profile_cmd("deep", slowest, deep_dir, "--launch-count", "1", "--source",
                                                                 regex=regex))]).values()
        self.trace("phase-end", "profile")

        # research: read what the funnel says, and where it points
        self.trace("phase-start", "research")
        sol_summary = self.read("workspace", f"{P}/sol/shape-{slowest}/summary.txt")
        deep_summary = self.read("workspace", f"{deep_dir}/summary.txt")
        localize = re.search(r"^LOCALIZE: (.*)$", deep_summary, re.M)
        for rel in (localize.group(1).split(", ") if localize else []):
            if rel.startswith("analysis/") and (self.worktree / deep_dir / rel).is_file():
                self.read("workspace", f"{deep_dir}/{rel}")
        self.read("reference_projects", f"examples/problems/{PROBLEM}/kernel_fast.py")
        self.trace("phase-end", "research")
        patterns = re.findall(r"^\s+Pattern (\S+) \[(\w+)\]: (.+)$", deep_summary, re.M)
        symptoms = re.search(r"^SYMPTOMS: (.*)$", deep_summary, re.M)
        sol_patterns = re.findall(r"^\s+Pattern (\S+) \[(\w+)\]: (.+)$", sol_summary, re.M)
        diagnosis = ", ".join(f"{label} ({pid}, {sev})" for pid, sev, label in patterns) or "no pattern"
        self.diagnosis = {"kernel": target, "shape": slowest, "patterns": patterns, "sol_patterns": sol_patterns,
                          "symptoms": symptoms.group(1) if symptoms else None, "bound": deep["kernels"][0].get("bound")}

        # planning
        self.trace("phase-start", "planning")
        plan = (f"# Episode 1 plan\n\nEvidence: {deep_dir}/summary.txt: {target} on shape {slowest}: {diagnosis}; "
                f"SYMPTOMS {self.diagnosis['symptoms']}.\n\n"
                "1. One block per row, float4 (coalesced) loads, warp-shuffle reductions, row held in registers.\n"
                "   Expect: every SM busy and full sectors used; DRAM-bound on every shape.\n")
        (self.worktree / "plans").mkdir(exist_ok=True)
        (self.worktree / "plans" / "episode_1.md").write_text(plan, encoding="utf-8")
        self.trace("phase-end", "planning")

        # implementation: the one-block-per-row kernel, committed
        self.trace("phase-start", "implementation")
        shutil.copyfile(REPO / "examples" / "problems" / PROBLEM / "kernel_fast.py", self.worktree / "kernel.py")
        git(self.worktree, AGENT, "commit", "-q", "-am", "trial 1: one block per row, float4 loads, warp-shuffle reductions")
        trial = git(self.worktree, AGENT, "rev-parse", "HEAD")
        self.trace("phase-end", "implementation")

        correctness, bench = self.check_and_benchmark()

        # profile the new kernel against the old one on the same shape
        self.trace("phase-start", "profile")
        trial_dir = f"{P}/trial1/sol/shape-{slowest}"
        (trial_profile,) = self.profile_jobs([(trial_dir, self.profile_cmd(
            "sol", slowest, trial_dir, "--launch-count", "1", "--diff", f"{P}/sol/shape-{slowest}", regex="^row_softmax"))]).values()
        self.trace("phase-end", "profile")
        trial_summary = self.read("workspace", f"{trial_dir}/summary.txt")
        trial_patterns = re.findall(r"^\s+Pattern (\S+) \[(\w+)\]: (.+)$", trial_summary, re.M)
        self.trial_diagnosis = {"kernel": trial_profile["dominant_kernel"], "patterns": trial_patterns,
                                "bound": trial_profile["kernels"][0].get("bound")}

        passed = correctness["all_pass"] and bench["all_pass"]
        self.experiments.append({
            "name": "block-per-row-registers",
            "hypothesis": f"{target} ({deep_dir}/summary.txt): {diagnosis}; one coalesced block per row should use every SM "
                          "and whole sectors",
            "change": "one block per row, float4 loads into registers, warp-shuffle max and sum (kernel.py)",
            "evidence": [f"{deep_dir}/summary.txt", f"{trial_dir}/summary.txt",
                         f"evaluations.jsonl eval_id={correctness['eval_id']}", f"evaluations.jsonl eval_id={bench['eval_id']}"],
            "result": (f"geomean {self.baseline_result['latency_us_geomean']} -> {bench['latency_us_geomean']} us, "
                       f"all_pass={passed}; new kernel {self.trial_diagnosis['kernel']}: "
                       + (", ".join(label for _, _, label in trial_patterns) or "no pattern")),
            "decision": "continue" if passed else "revert", "timestamp": now(),
        })
        self.save_journal()
        if not passed:
            fail("the new kernel did not pass correctness and benchmark")

        deep = self.diagnosis
        self.profile_evidence = {
            "tool_used": "ncu", "bottleneck_type": f"{deep['bound']}-bound: " + ", ".join(label for _, _, label in deep["patterns"]),
            "evidence_summary": f"{deep['kernel']} on shape {deep['shape']}: SYMPTOMS {deep['symptoms']}",
            "evidence_chain": [f"{P}/survey/shape-{slowest}/gateway_profile.json", f"{P}/sol/shape-{slowest}/summary.txt",
                               f"{deep_dir}/summary.txt", f"{trial_dir}/summary.txt"]}
        self.hand_off(trial, {"summary": f"one block per row with float4 loads; {target} -> {self.trial_diagnosis['kernel']}",
                              "next_directions": ["several rows per block for rows of 512 floats",
                                                  "persistent blocks for shapes with few rows"]})

    def agent_episode2(self) -> None:
        """Ask the timeline where a block of the incumbent spends its time, try the change that
        answer suggests, and hand it off for the supervisor's verdict."""
        self.open_journal()
        P = f"profiles/episode_{self.n}"
        T = f"profiles/timeline/e{self.n:04d}"
        self.trace("source-read", "workspace", "definition.json")
        self.read("workspace", f"memory/v{self.incumbent_version}.json")
        clean = self.read("workspace", "kernel.py")
        case = next(c for c in self.cases if (c.axes["rows"], c.axes["cols"]) == TIMELINE_SHAPE)
        rows, cols = TIMELINE_SHAPE
        question = (f"On {rows}x{cols} (the most bytes per row), how does one block of row_softmax_regs split its time "
                    "between loading its row, the two block reductions with the exponentials, and the store?")

        # profile: a probe-instrumented capture of the incumbent, one writer (thread 0) per block
        self.trace("phase-start", "profile")
        log(f"profile: timeline capture of the incumbent on shape {case.index} ({rows}x{cols})")
        (self.worktree / T).mkdir(parents=True, exist_ok=True)
        (self.worktree / T / "clean_kernel.py").write_text(clean, encoding="utf-8")
        (self.worktree / T / "kernel_probe.cu").write_text(instrument_regs(clean), encoding="utf-8")
        atomic_write_json(self.worktree / T / "events.json", TIMELINE_EVENTS)
        shutil.copyfile(CAPTURE_SCRIPT, self.worktree / T / "capture.py")
        proc = run([sys.executable, "tools/sandbox.py", "--kind", "dev", "--timeout", "240",
                    "--input", "skills/autonomous-gpu-kernel-timeline/backends", "--sync", T, "--",
                    "python3", f"{T}/capture.py", "--rows", str(rows), "--cols", str(cols), "--dir", T],
                   self.worktree, self.env)
        probe = last_json(proc.stdout, CAPTURE_PREFIX)
        if proc.returncode != 0 or probe is None:
            fail(f"the timeline capture job failed (exit {proc.returncode})")
        decoded = run([sys.executable, "skills/autonomous-gpu-kernel-timeline/scripts/timeline.py", "capture",
                       "--raw", f"{T}/capture.bin", "--manifest", f"{T}/manifest.json", "--dictionary", f"{T}/events.json",
                       "--clean-source", f"{T}/clean_kernel.py", "--instrumented-source", f"{T}/kernel_probe.cu",
                       "--workload-identity", f"shape={rows}x{cols} seed=0", "--correctness", probe["correctness"],
                       "--stage", "exploration", "--interval", "load -> store", "--output-dir", T],
                      self.worktree, self.env)
        if decoded.returncode != 0:
            fail(f"the timeline capture was rejected (exit {decoded.returncode})")
        self.trace("phase-end", "profile")

        # research: what the capture says
        self.trace("phase-start", "research")
        summary = json.loads(self.read("workspace", f"{T}/trace.summary.json"))
        receipt = json.loads(self.read("workspace", f"{T}/receipt.json"))
        self.read("workspace", "skills/autonomous-gpu-kernel-timeline/SKILL.md")
        self.trace("phase-end", "research")
        spans = site_means(summary)
        self.timeline = {"question": question, "kernel": probe["kernel"], "correctness": probe["correctness"],
                         "evidence_class": receipt.get("evidence_class"), "mean_us_per_block": spans,
                         "screen_us": probe["screen_us"]}
        log(f"timeline: {probe['kernel']} mean per block {spans} us; screen {probe['screen_us']}; "
            f"class {receipt.get('evidence_class')}")
        answer = ", ".join(f"{site} {us:.2f} us" for site, us in spans.items())

        self.trace("phase-start", "planning")
        (self.worktree / "plans").mkdir(exist_ok=True)
        (self.worktree / "plans" / f"episode_{self.n}.md").write_text(
            f"# Episode {self.n} plan\n\nQuestion: {question}\nAnswer ({T}/trace.summary.json, mean per block): {answer}.\n\n"
            "1. Stream every row through the online kernel instead of holding it in registers: far fewer registers\n"
            "   per thread, so more blocks per SM to keep loads in flight. Expect: shorter load phase per block;\n"
            "   risk: the row is read twice and the loads are scalar.\n", encoding="utf-8")
        self.trace("phase-end", "planning")

        self.trace("phase-start", "implementation")
        (self.worktree / "kernel.py").write_text(stream_every_row(clean), encoding="utf-8")
        git(self.worktree, AGENT, "commit", "-q", "-am", f"trial {self.n}: every row through the online kernel, no row in registers")
        trial = git(self.worktree, AGENT, "rev-parse", "HEAD")
        self.trace("phase-end", "implementation")

        correctness, bench = self.check_and_benchmark()

        # profile the trial where the capture was taken: sol, then deep with source counters
        self.trace("phase-start", "profile")
        sol_dir, deep_dir = f"{P}/trial{self.n}/sol/shape-{case.index}", f"{P}/trial{self.n}/deep/shape-{case.index}"
        regex = "^row_softmax_online$"
        self.profile_jobs([(sol_dir, self.profile_cmd("sol", case.index, sol_dir, "--launch-count", "1", regex=regex))])
        (deep,) = self.profile_jobs([(deep_dir, self.profile_cmd("deep", case.index, deep_dir, "--launch-count", "1",
                                                                 "--source", regex=regex))]).values()
        self.trace("phase-end", "profile")
        deep_summary = self.read("workspace", f"{deep_dir}/summary.txt")
        localize = re.search(r"^LOCALIZE: (.*)$", deep_summary, re.M)
        for rel in (localize.group(1).split(", ") if localize else []):
            if rel.startswith("analysis/") and (self.worktree / deep_dir / rel).is_file():
                self.read("workspace", f"{deep_dir}/{rel}")
        patterns = re.findall(r"^\s+Pattern (\S+) \[(\w+)\]: (.+)$", deep_summary, re.M)
        symptoms = re.search(r"^SYMPTOMS: (.*)$", deep_summary, re.M)
        self.trial_diagnosis = {"kernel": deep["dominant_kernel"], "shape": case.index, "patterns": patterns,
                                "symptoms": symptoms.group(1) if symptoms else None,
                                "localize": localize.group(1) if localize else None, "bound": deep["kernels"][0].get("bound")}

        passed = correctness["all_pass"] and bench["all_pass"]
        before, after = self.incumbent_result["latency_us_geomean"], bench["latency_us_geomean"]
        self.experiments.append({
            "name": "stream-rows-online",
            "hypothesis": f"{T}/trace.summary.json: {answer}; a kernel that keeps no row in registers fits more "
                          "blocks per SM and should shorten the load phase",
            "change": "every row through row_softmax_online (two scalar passes over the row) instead of row_softmax_regs",
            "evidence": [f"{T}/receipt.json", f"{deep_dir}/summary.txt",
                         f"evaluations.jsonl eval_id={correctness['eval_id']}", f"evaluations.jsonl eval_id={bench['eval_id']}"],
            "result": (f"geomean {before} -> {after} us on one benchmark run, all_pass={passed}; "
                       f"{deep_dir}: " + (", ".join(label for _, _, label in patterns) or "no pattern")
                       + "; handed off for the supervisor's ABBA check"),
            "decision": "continue" if passed else "revert", "timestamp": now(),
        })
        self.save_journal()
        if not passed:
            fail("the trial kernel did not pass correctness and benchmark")
        self.profile_evidence = None
        self.hand_off(trial, {"summary": f"every row through row_softmax_online; one benchmark run {before} -> {after} us",
                              "next_directions": ["several rows per block for rows of 512 floats",
                                                  "persistent blocks for shapes with few rows"]})

    # -- supervisor: verification, promotion, records -------------------------------------

    def check_handoff(self) -> None:
        handoff = json.loads((self.worktree / RUNTIME / "handoff.json").read_text())
        cand = handoff.get("candidate_commit")
        head = git(self.worktree, SUPERVISOR, "rev-parse", "HEAD")
        changed = git(self.worktree, SUPERVISOR, "diff", "--name-only", self.base_commit, cand).split()
        dirty = git(self.worktree, SUPERVISOR, "status", "--porcelain", "--untracked-files=no")
        ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", self.base_commit, cand], cwd=self.worktree).returncode
        if handoff.get("status") != "candidate_ready" or cand != head or dirty or changed != ["kernel.py"] or ancestor != 0:
            fail(f"invalid handoff: {handoff} head={head} changed={changed} dirty={dirty!r}")
        self.changed_paths = changed

    def verify(self) -> None:
        """ABBA in the worktree's verification_artifacts/ (FORMATS §7), then the directory moves
        under the episode's record, episodes/eNNNN/verification_runtime/<uuid>/, where AKA's
        supervisor leaves it (it copies it there and later removes the worktree; this recording
        keeps the worktree, so the directory is moved) and where the verdict names it."""
        self.active["phase"] = "verifying"
        atomic_write_json(self.campaign / RUNTIME / "active_episode.json", self.active)
        output = self.worktree / "verification_artifacts"
        log(f"episode {self.n}: ABBA verification (I C C I) in this one allocation")
        proc = run([sys.executable, "tools/abba.py", "--incumbent-commit", self.base_commit, "--candidate-commit", self.candidate,
                    "--repeats", "2", "--min-improvement-pct", str(MIN_IMPROVEMENT_PCT), "--output-dir", str(output),
                    "--", "python3", "test_kernel.py"], self.campaign, self.supervisor_env())
        line = next((l for l in reversed(proc.stdout.splitlines()) if l.startswith(gpu_side.ABBA_PREFIX)), None)
        if line is None:
            fail("tools/abba.py printed no verdict")
        self.verdict = json.loads(line[len(gpu_side.ABBA_PREFIX):])
        live = output / ".atrex_long_horizon_verify"
        (verification,) = live.iterdir()
        archived = self.episode_dir / "verification_runtime" / verification.name
        archived.parent.mkdir(parents=True, exist_ok=True)
        verification.rename(archived)
        live.rmdir()
        output.rmdir()
        self.verdict["artifact"] = archived.relative_to(self.campaign).as_posix()
        log(f"episode {self.n}: ABBA {self.verdict['gate']}: incumbent {self.verdict['incumbent_latency_us']:.3f} us, "
            f"candidate {self.verdict['candidate_latency_us']:.3f} us, improvement {self.verdict['improvement_pct']:.2f}%")

    def promote(self) -> None:
        """Promote a PASS as the next memory version; a FAIL leaves the incumbent where it is."""
        accepted = self.verdict["gate"] == "PASS"
        self.active["phase"] = "promoting" if accepted else "recording"
        atomic_write_json(self.campaign / RUNTIME / "active_episode.json", self.active)
        promotion = None
        if accepted:
            version = self.incumbent_version + 1
            runs = self.verdict["runs"]
            cand_runs = [r["result"] for r in runs if r["revision"] == "candidate"]
            by_shape = {sid: round(geomean([r["latency_us_by_shape"][sid] for r in cand_runs]), 3)
                        for sid in cand_runs[0]["latency_us_by_shape"]}
            speedups = [r.get("speedup_vs_ref_geomean") for r in cand_runs]
            candidate_result = {
                "latency_us_geomean": round(self.verdict["candidate_latency_us"], 3), "latency_us_by_shape": by_shape,
                "latency_us_arith_mean": round(sum(by_shape.values()) / len(by_shape), 3),
                "speedup_vs_ref_geomean": round(geomean(speedups), 4) if all(speedups) else None,
            }
            record = self.memory_record(
                version, candidate_result,
                performance={"measurement_subject": "candidate", "measurement_source": "abba_verification",
                             "comparison_method": "same_allocation_abba", "carried_from_version": None,
                             "authoritative_improvement_pct": round(self.verdict["improvement_pct"], 3)},
                correctness=self.correctness,
                optimization={"action_category": "memory_access", "summary": self.outcome["summary"]},
                profile_evidence=self.profile_evidence,
                experience={"experiment_count": len(self.experiments), "recorded_experiment_count": len(self.experiments),
                            "experiments": [{"index": i, **e, "details": None} for i, e in enumerate(self.experiments)]},
                open_directions=self.outcome["next_directions"][:3], git_commit_hash=self.candidate,
                long_horizon={"status": "candidate_ready", "mode": "full", "verification": "abba"})
            git(self.campaign, SUPERVISOR, "checkout", "-q", self.candidate, "--", "kernel.py")
            atomic_write_json(self.campaign / "memory" / f"v{version}.json", record)
            git(self.campaign, SUPERVISOR, "add", "kernel.py", f"memory/v{version}.json")
            git(self.campaign, SUPERVISOR, "commit", "-q", "-m", f"long-horizon: promote episode {self.n} (v{version})")
            promotion = git(self.campaign, SUPERVISOR, "rev-parse", "HEAD")
            self.active.update(phase="promoted", terminal_status="candidate_ready", promotion_commit=promotion)
            atomic_write_json(self.campaign / RUNTIME / "active_episode.json", self.active)
            self.incumbent_version = version
            self.incumbent_result = candidate_result
        self.record(accepted, promotion)

    def record(self, accepted: bool, promotion: str | None) -> None:
        telemetry = [json.loads(l) for l in (self.worktree / RUNTIME / "telemetry.jsonl").read_text().splitlines() if l]
        phases = {}
        for name in ("profile", "research", "planning", "implementation", "correctness", "benchmark", "recording"):
            count = sum(1 for r in telemetry if r.get("phase") == name and r["event"] == "phase_started")
            phases[name] = {"usage": None, "interval_count": count, "measurement": "unavailable", "reason": "no_token_source"}
        summary_rel = f"{RUNTIME}/episodes/e{self.n:04d}/telemetry.summary.json"
        version = f"v{self.incumbent_version}" if accepted else None
        atomic_write_json(self.campaign / summary_rel, {
            "schema_version": "atrex_long_horizon_episode_telemetry_v1", "episode": self.n, "version": version,
            "status": "candidate_ready", "accepted": accepted, "control_tokens": None, "resume_count": 0,
            "invocation_count": 1,
            "phase_tokens": {"terminal_usage": None, "phases": phases, "orchestration": None, "unattributed": None,
                             "coverage": None, "reconciliation_status": None, "measurement": "unavailable",
                             "reason_codes": ["no_token_source"]},
            "measurement": "unavailable"})
        (self.episode_dir / "telemetry.brief.md").write_text(
            f"# Episode {self.n} telemetry\n\nTokens: unknown (a scripted episode has no token source)\n"
            + "".join(f"- {p}: {v['interval_count']} interval(s)\n" for p, v in phases.items()), encoding="utf-8")
        attempt = {
            "episode": self.n, "version": version, "mode": "full", "fast_trials": 0, "status": "candidate_ready",
            "accepted": accepted, "violation": None, "base_commit": self.base_commit, "episode_branch": self.branch,
            "episode_head": self.candidate, "candidate_commit": self.candidate, "changed_paths": self.changed_paths,
            "session_id": None, "resume_count": 0, "tokens": None, "summary": self.outcome["summary"],
            "next_directions": self.outcome["next_directions"], "verification": self.verdict,
            "telemetry": {"summary": summary_rel, "measurement": "unavailable", "reason_codes": ["no_token_source"]},
            ("promotion_commit" if accepted else "outcome_commit"): promotion or self.candidate,
        }
        atomic_write_json(self.episode_dir / "attempt.json", attempt)
        # AKA's layout for a finished episode: the worktree's runtime files under
        # episode_runtime/, the git facts of the hand-off under archive/. They are copied, not
        # moved: the worktree stays in the recording so that a reviewer sees its profiles.
        runtime = self.episode_dir / "episode_runtime"
        runtime.mkdir(parents=True, exist_ok=True)
        for name in ("journal.json", "handoff.json", "telemetry.jsonl", "evaluations.jsonl"):
            shutil.copyfile(self.worktree / RUNTIME / name, runtime / name)
        atomic_write_json(self.episode_dir / "archive" / "git.json", {
            "episode": self.n, "base_commit": self.base_commit, "branch": self.branch,
            "head": self.candidate,
            "dirty_paths": [line[3:] for line in git(self.worktree, AGENT, "status", "--porcelain").splitlines()]})
        state = json.loads((self.campaign / RUNTIME / "state.json").read_text())
        state.update(episodes=self.n, accepted=state["accepted"] + int(accepted), rejected=state["rejected"] + int(not accepted),
                     consecutive_without_promotion=0 if accepted else state["consecutive_without_promotion"] + 1,
                     attempts=[*state["attempts"], attempt])
        atomic_write_json(self.campaign / RUNTIME / "state.json", state)
        if accepted:
            self.write_live("promoted", "candidate_ready", f"memory/{version}.json", True)
        else:
            self.write_live("rejected", "candidate_ready", None, False)
        with open(self.campaign / RUNTIME / "supervisor.log", "a", encoding="utf-8") as fh:
            fh.write(f"[long-horizon] episode={self.n} mode=full status=candidate_ready accepted={accepted} version={version} "
                     f"tokens=unknown commit={promotion or self.candidate}\n")
        (self.campaign / RUNTIME / "active_episode.json").unlink()
        self.state = state
        log(f"episode {self.n} recorded: accepted={accepted} promotion={promotion}")

    def stop(self) -> None:
        with open(self.campaign / RUNTIME / "supervisor.log", "a", encoding="utf-8") as fh:
            fh.write(f"[long-horizon] STOP max_episodes; episodes={self.state['episodes']} accepted={self.state['accepted']}\n")


def pack(out: Path, name: str, archive: Path) -> None:
    """One tar.gz of the campaign and its worktrees: regular files and directories only, no
    raw profiler reports, no caches."""
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        base = os.path.basename(info.name)
        if base == "__pycache__" or base.endswith((".ncu-rep", ".pyc")):
            return None
        if not (info.isfile() or info.isdir()):
            fail(f"refusing to pack {info.name}: not a regular file or directory")
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with atomic_replacement(archive) as fresh, tarfile.open(fresh, "w:gz", compresslevel=9) as tar:
        tar.add(out / name, arcname=name, filter=keep)
        tar.add(out / WORKTREES / name, arcname=f"{WORKTREES}/{name}", filter=keep)
    log(f"packed {archive} ({archive.stat().st_size} bytes)")


def phase_seconds(trace: Path) -> dict:
    """Wall seconds per phase, from the marker pairs (for the log)."""
    open_at, total = {}, {}
    for line in trace.read_text().splitlines():
        r = json.loads(line)
        if r["event"] == "phase_started":
            open_at[r["phase"]] = r["monotonic_seconds"]
        elif r["event"] == "phase_completed" and r["phase"] in open_at:
            total[r["phase"]] = round(total.get(r["phase"], 0.0) + r["monotonic_seconds"] - open_at.pop(r["phase"]), 3)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record real episodes on this machine's GPU.")
    parser.add_argument("out_dir", help="directory to record into (must not hold the campaign yet)")
    parser.add_argument("--name", default=PROBLEM, help=f"campaign name (default {PROBLEM})")
    parser.add_argument("--archive", help="also pack the campaign and worktrees into this .tar.gz")
    args = parser.parse_args(argv)
    out = Path(args.out_dir).expanduser().absolute()
    if (out / args.name).exists() or (out / WORKTREES / args.name).exists():
        fail(f"{out / args.name} (or its worktrees) already exists")
    for tool in ("git", "ncu"):
        if shutil.which(tool) is None and not (tool == "ncu" and os.environ.get("NCU")):
            fail(f"{tool} is not on PATH")
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, args.name)
    rec.make_campaign()
    rec.baseline()
    summary: dict = {"v0_us": rec.baseline_result["latency_us_geomean"], "episodes": []}
    for n, agent in ((1, rec.agent_episode1), (2, rec.agent_episode2)):
        rec.start_episode(n)
        agent()
        rec.check_handoff()
        rec.verify()
        rec.promote()
        summary["episodes"].append({
            "episode": n, "phases_s": phase_seconds(rec.worktree / RUNTIME / "telemetry.jsonl"),
            "diagnosis": getattr(rec, "diagnosis", None) if n == 1 else rec.timeline,
            "diagnosis_trial": rec.trial_diagnosis,
            "abba": {k: rec.verdict[k] for k in ("gate", "incumbent_latency_us", "candidate_latency_us", "improvement_pct")}})
    rec.stop()
    summary["elapsed_s"] = round(time.monotonic() - _T0, 1)
    print("RECORD_SUMMARY=" + json.dumps(summary, sort_keys=True), flush=True)
    if args.archive:
        pack(out, args.name, Path(args.archive).expanduser().absolute())
    gates = [e["abba"]["gate"] for e in summary["episodes"]]
    if gates != ["PASS", "FAIL"]:
        log(f"ABBA gates {gates}: the recording should hold one promotion, then one rejection")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
