"""Per-job overhead of the Ray backend against the local executor, printed as JSON.

    python benchmarks/ray_overhead.py [--runs 5] [--address http://HOST:8265]

The same trivial job (write one file under profiles/, print a line, sync profiles back)
runs alternately on both backends, after one warm-up run of each:

- ``sandbox``: the whole ``run_job`` path (record, slot, staging, run, sync-back), local
  against ``--backend ray``;
- ``executor``: only the step that differs, on one staged copy: ``local.run_process``
  against ``ray_backend.run_on_ray`` (which also brings the output file back).

Medians of ``--runs`` runs, their ratio and difference, and for Ray the median time to the
first line of output (submission, package upload, runtime environment, job start). Without
``--address`` (or EPISCOPE_RAY_ADDRESS) a single-node head with four fake GPUs is started
on loopback for the run and stopped afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console.jobs import ray_backend  # noqa: E402
from console.jobs.local import run_process  # noqa: E402
from console.jobs.request import parse_request  # noqa: E402
from console.jobs.runner import run_job  # noqa: E402

SCRIPT = "mkdir -p profiles && echo ok > profiles/out.txt && echo done"
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalHead:
    """A throw-away single-node Ray head on loopback."""

    def __init__(self) -> None:
        self.command = str(Path(sys.executable).parent / "ray")
        if not Path(self.command).exists():
            self.command = shutil.which("ray") or "ray"
        self.temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.env = dict(os.environ, **RAY_ENV)
        self.port = _free_port()

    def __enter__(self) -> str:
        subprocess.run(
            [self.command, "start", "--head", "--num-gpus=4", "--node-ip-address=127.0.0.1", f"--port={_free_port()}",
             "--dashboard-host=127.0.0.1", f"--dashboard-port={self.port}", "--include-dashboard=true",
             "--disable-usage-stats", f"--temp-dir={self.temp_dir}", "--object-store-memory=100000000"],
            env=self.env, check=True, capture_output=True, timeout=180,
        )
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        subprocess.run([self.command, "stop", "--force"], env=self.env, capture_output=True, timeout=120)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _workspace(root: Path) -> Path:
    workspace = root / "workspace"
    (workspace / "profiles").mkdir(parents=True)
    (workspace / "kernel.py").write_text("KERNEL = 1\n")
    return workspace


def sandbox_run(workspace: Path, backend: str) -> float:
    request, _ = parse_request(["--workspace", str(workspace), "--backend", backend, "--sync", "profiles",
                                "--", "bash", "-c", SCRIPT])
    started = time.perf_counter()
    outcome = run_job(request, None, launcher="benchmark")
    elapsed = time.perf_counter() - started
    if outcome.state != "succeeded":
        raise SystemExit(f"{backend} job failed: {outcome.message}")
    (workspace / "profiles" / "out.txt").unlink()
    return elapsed


def executor_local(stage: Path, logs: Path) -> float:
    started = time.perf_counter()
    result = run_process(["bash", "-c", SCRIPT], cwd=stage, env=dict(os.environ), timeout=60,
                         stdout_log=logs / "stdout.log", stderr_log=logs / "stderr.log")
    elapsed = time.perf_counter() - started
    if result.state != "succeeded":
        raise SystemExit(f"local run failed: {result.message}")
    (stage / "profiles" / "out.txt").unlink()
    return elapsed


def executor_ray(stage: Path, address: str, index: int) -> tuple[float, float]:
    first: list[float] = []
    started = time.perf_counter()
    outcome = ray_backend.run_on_ray(
        stage_dir=stage, argv=["bash", "-c", SCRIPT], env={}, sync_paths=["profiles"], timeout=60,
        job_id=f"bench-{os.getpid()}-{index}", episode_id=None, address=address,
        on_stdout=lambda data: first.append(time.perf_counter()) if not first else None,
        on_stderr=lambda data: None, should_cancel=lambda: False, max_output_bytes=8 * 1024 * 1024,
    )
    elapsed = time.perf_counter() - started
    if outcome.state != "succeeded" or outcome.archive_members != ["profiles/out.txt"]:
        raise SystemExit(f"ray run failed: {outcome}")
    (stage / "profiles" / "out.txt").unlink()
    return elapsed, first[0] - started


def _summary(local: list[float], ray: list[float]) -> dict:
    local_median, ray_median = statistics.median(local), statistics.median(ray)
    return {
        "local_median_s": round(local_median, 4),
        "ray_median_s": round(ray_median, 4),
        "ratio": round(ray_median / local_median, 1),
        "overhead_median_s": round(ray_median - local_median, 3),
        "local_s": [round(x, 4) for x in local],
        "ray_s": [round(x, 3) for x in ray],
    }


def measure(address: str, runs: int) -> dict:
    os.environ[ray_backend.ADDRESS_ENV] = address  # the sandbox's --backend ray reads it
    with tempfile.TemporaryDirectory(prefix="episcope-ray-bench-") as tmp:
        root = Path(tmp)
        workspace = _workspace(root)
        stage = root / "stage"
        shutil.copytree(workspace, stage)
        logs = root / "logs"
        logs.mkdir()
        sandbox_run(workspace, "local")
        sandbox_run(workspace, "ray")
        executor_local(stage, logs)
        executor_ray(stage, address, -1)
        sandbox = {"local": [], "ray": []}
        executor = {"local": [], "ray": [], "first_output": []}
        for index in range(runs):
            sandbox["local"].append(sandbox_run(workspace, "local"))
            sandbox["ray"].append(sandbox_run(workspace, "ray"))
            executor["local"].append(executor_local(stage, logs))
            elapsed, first = executor_ray(stage, address, index)
            executor["ray"].append(elapsed)
            executor["first_output"].append(first)
    result = {
        "sandbox": _summary(sandbox["local"], sandbox["ray"]),
        "executor": _summary(executor["local"], executor["ray"]),
    }
    result["executor"]["ray_first_output_median_s"] = round(statistics.median(executor["first_output"]), 3)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--address", default=os.environ.get(ray_backend.ADDRESS_ENV))
    args = parser.parse_args()
    import ray

    report = {"ray_version": ray.__version__, "runs": args.runs, "cpus": os.cpu_count()}
    if args.address:
        report["cluster"] = args.address
        report.update(measure(args.address, args.runs))
    else:
        report["cluster"] = "single-node head on loopback, 4 fake GPUs, started for this run"
        with LocalHead() as address:
            report.update(measure(address, args.runs))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
