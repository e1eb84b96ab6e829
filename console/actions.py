"""What the operator can launch from the console, as ``tools/sandbox.py`` command lines.

Every action is one sandbox job in the episode's workspace, started exactly as the agent
would start it: ``python tools/sandbox.py <flags> -- <command>``, in its own process group.
The sandbox writes the job record and logs that the console then reads like any other job,
so a job launched here and one launched by the agent look the same. The console only keeps
the process handles it started, to end their groups if it exits first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from console.formats.job_record import MAX_SANDBOX_JOBS
from console.kit import kit_path

SANDBOX_SCRIPT = kit_path("tools") / "sandbox.py"
PROFILE_SCRIPT = kit_path("tools") / "profile_nvidia.sh"
TIMELINE_SCRIPT = kit_path("skills") / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
ABBA_SCRIPT = kit_path("tools") / "abba.py"
EVALUATOR = ("python", "test_kernel.py")
# The timeline skill's own measure recipe: clean_kernel.py is the kernel before the probe
# went in, bench.py prints one sample line per process (``--probe`` runs the instrumented one).
TIMELINE_BASELINE_SOURCE = "clean_kernel.py"
TIMELINE_BENCH = "bench.py"
TIMELINE_MEASURE_FLAGS = ("--min-blocks", "3", "--max-blocks", "10", "--ci-width", "1.0", "--target-percent", "10")
EXIT_GRACE_SECONDS = 3.0


class ActionRefused(Exception):
    """An action that cannot run now; the message is one line for the operator."""


@dataclass(frozen=True, slots=True)
class OperatorAction:
    name: str  # the Textual action name, e.g. "profile_survey"
    key: str
    title: str
    description: str
    label: str  # the footer's short name
    needs_kernel: bool = False  # targets the kernel selected in the profile funnel
    profiler: bool = False  # runs Nsight Compute (ncu must be on PATH); every action needs a GPU and cupy


ACTIONS: tuple[OperatorAction, ...] = (
    OperatorAction("profile_survey", "s", "Profile: survey", "time every kernel (ncu gpu__time_duration)", "survey",
                   profiler=True),
    OperatorAction("profile_sol", "o", "Profile: sol", "speed-of-light throughput of the top kernels", "sol",
                   profiler=True),
    OperatorAction("profile_deep", "d", "Profile: deep", "ncu --set full on the kernel selected in the funnel", "deep",
                   needs_kernel=True, profiler=True),
    OperatorAction("profile_source", "S", "Profile: --source", "source-line evidence for the selected kernel", "source",
                   needs_kernel=True, profiler=True),
    OperatorAction("correctness_run", "c", "Correctness run", "test_kernel.py --multi-seed 3", "correct"),
    OperatorAction("benchmark_run", "b", "Benchmark run", "test_kernel.py latency per shape", "bench"),
    OperatorAction("timeline_measure", "m", "Timeline measure",
                   "probe overhead: clean_kernel.py vs kernel.py via bench.py", "measure"),
    OperatorAction("abba_compare", "a", "ABBA compare", "incumbent (base commit) vs worktree HEAD, I C C I on one GPU",
                   "ABBA"),
)
ACTIONS_BY_NAME = {a.name: a for a in ACTIONS}


def profile_dir(episode: object, level: str) -> str:
    number = episode if isinstance(episode, int) else None
    base = f"profiles/episode_{number}" if number is not None else "profiles/console"
    return f"{base}/{level}"


def sandbox_flags(name: str, *, episode: object = None, kernel: str | None = None, workspace: str = ".",
                  incumbent: str | None = None, candidate: str | None = None, stamp: str | None = None) -> list[str]:
    """The sandbox flags and command for one action (FORMATS §7, §8, §9, §10).

    ``incumbent``/``candidate`` are the commits an ABBA compare runs: the job runs on a
    staged copy without ``.git``, so tools/abba.py reads both commits from the workspace's
    repository (``--repo``, read only, with episcope's safe git settings); ``stamp`` names a
    timeline measurement (default: now, UTC)."""
    if name in ("profile_survey", "profile_sol", "profile_deep"):
        level = name.removeprefix("profile_")
        flags = ["--kind", "profile", "--workspace", workspace, "--profile-level", level]
        output = profile_dir(episode, level)
        command = ["bash", str(PROFILE_SCRIPT), "profile_driver.py", "--output-dir", output]
        if level == "deep":
            if not kernel:
                raise ActionRefused("deep profile needs a kernel: select one in the profile funnel")
            flags += ["--kernel-regex", f"^{kernel}$"]
            command += ["--kernel-name", kernel]
        return flags + ["--sync", output, "--", *command]
    if name == "profile_source":
        if not kernel:
            raise ActionRefused("--source profile needs a kernel: select one in the profile funnel")
        output = profile_dir(episode, "source")
        return [
            "--kind", "profile", "--workspace", workspace, "--profile-level", "deep",
            "--kernel-regex", f"^{kernel}$", "--sync", output, "--",
            "bash", str(PROFILE_SCRIPT), "profile_driver.py", "--output-dir", output, "--kernel-name", kernel, "--source",
        ]
    if name == "correctness_run":
        return ["--kind", "run", "--workspace", workspace, "--no-sync", "--", "python", "test_kernel.py", "--multi-seed", "3"]
    if name == "benchmark_run":
        return ["--kind", "run", "--workspace", workspace, "--no-sync", "--", "python", "test_kernel.py"]
    if name == "timeline_measure":
        # "measurement" in the name makes the spine read it; its .runs.jsonl feeds the pane live.
        output = f"timeline/measurement-{stamp or time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
        return ["--kind", "dev", "--workspace", workspace, "--sync", "timeline", "--",
                "python", str(TIMELINE_SCRIPT), "measure",
                "--baseline-command", json.dumps(["python", TIMELINE_BENCH]),
                "--instrumented-command", json.dumps(["python", TIMELINE_BENCH, "--probe"]),
                "--baseline-source", TIMELINE_BASELINE_SOURCE, "--instrumented-source", "kernel.py",
                *TIMELINE_MEASURE_FLAGS, "--output", output]
    if name == "abba_compare":
        if not incumbent or not candidate:
            raise ActionRefused("ABBA compare needs the incumbent commit and the worktree HEAD")
        return ["--kind", "dev", "--workspace", workspace, "--sync", "verification_artifacts", "--",
                "python", str(ABBA_SCRIPT), "--incumbent-commit", incumbent, "--candidate-commit", candidate,
                "--output-dir", "verification_artifacts", "--repo", str(Path(workspace).resolve()), "--", *EVALUATOR]
    raise ActionRefused(f"unknown action {name!r}")


@dataclass(slots=True)
class LaunchedJob:
    action: str
    argv: list[str]
    process: subprocess.Popen
    started: float

    @property
    def running(self) -> bool:
        return self.process.poll() is None


class JobLauncher:
    """Starts sandbox jobs for one workspace and ends their groups when the console exits."""

    def __init__(self, workspace: str | os.PathLike, *, sandbox: str | os.PathLike = SANDBOX_SCRIPT,
                 extra_flags: tuple[str, ...] = (), log_dir: str | os.PathLike | None = None) -> None:
        self.workspace = str(workspace)
        self.sandbox = str(sandbox)
        self.extra_flags = tuple(extra_flags)  # e.g. ("--dry-run",) or ("--backend", "ray")
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.launched: list[LaunchedJob] = []

    @property
    def runs_here(self) -> bool:
        """Whether the jobs run on this host (not on a Ray cluster): this host's GPU preflight
        then decides what can run."""
        flags = list(self.extra_flags)
        return not ("--backend" in flags and flags[flags.index("--backend") + 1:][:1] == ["ray"])

    def running(self) -> list[LaunchedJob]:
        return [job for job in self.launched if job.running]

    def argv_for(self, name: str, *, episode: object = None, kernel: str | None = None, **commits: str | None) -> list[str]:
        flags = sandbox_flags(name, episode=episode, kernel=kernel, workspace=self.workspace, **commits)
        split = flags.index("--")
        return [sys.executable, self.sandbox, *flags[:split], *self.extra_flags, *flags[split:]]

    def launch(self, name: str, *, episode: object = None, kernel: str | None = None, busy: int = 0,
               **commits: str | None) -> LaunchedJob:
        """Start one action; ``busy`` is the number of jobs the workspace already runs;
        ``commits`` are the incumbent and candidate of an ABBA compare."""
        if not Path(self.sandbox).is_file():
            raise ActionRefused(f"sandbox not found: {self.sandbox}")
        in_flight = max(busy, len(self.running()))
        if in_flight >= MAX_SANDBOX_JOBS:
            raise ActionRefused(f"{in_flight} jobs already running (limit {MAX_SANDBOX_JOBS}); wait or cancel one")
        argv = self.argv_for(name, episode=episode, kernel=kernel, **commits)
        output = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            output = open(self.log_dir / f"{name}-{time.time_ns()}.log", "wb")
        try:
            # The sandbox reports through its job record and logs; a session of its own
            # keeps the console's terminal out of its way and lets us end the whole group.
            process = subprocess.Popen(argv, cwd=self.workspace, stdin=subprocess.DEVNULL, stdout=output,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise ActionRefused(f"could not start the sandbox: {exc}") from None
        finally:
            if output is not subprocess.DEVNULL:
                output.close()
        job = LaunchedJob(name, argv, process, time.time())
        self.launched.append(job)
        return job

    def shutdown(self, grace: float = EXIT_GRACE_SECONDS) -> None:
        """End every group this console started: SIGTERM, a grace period, then SIGKILL."""
        alive = [job for job in self.launched if job.running]
        for job in alive:
            _signal_group(job.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for job in alive:
            try:
                job.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        from console.formats.job_record import list_job_records
        from console.jobs.local import group_members
        from console.jobs.runner import stop_supervisor

        for job in self.launched:
            # The group may outlive its leader (a grandchild); kill what is left of it.
            if group_members(job.process.pid):
                _signal_group(job.process.pid, signal.SIGKILL)
            try:
                job.process.wait(1.0)
            except subprocess.TimeoutExpired:
                pass
        # A sandbox that died leaves its job to the job's supervisor, which ends the tree; ask
        # it directly too (it is checked to be that job's supervisor, never a recorded group).
        ours = {job.process.pid for job in self.launched}
        records, _ = list_job_records(self.workspace)
        for record in records:
            if record.sandbox_pid in ours and record.state in ("running", "lost"):
                stop_supervisor(record)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cancel(workspace: str, job_id: str):
    """Cancel a job through the same code ``episcope jobs cancel`` uses; returns its record."""
    from console.formats.job_record import job_record_from_obj
    from console.jobs.runner import cancel_job

    return job_record_from_obj(cancel_job(workspace, job_id))
