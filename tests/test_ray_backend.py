"""Sandbox jobs on a real single-node Ray cluster.

One head for the whole session, on loopback, with four fake GPUs (Ray only counts them and
sets CUDA_VISIBLE_DEVICES): ``ray start --head --num-gpus=4`` on free ports and its own
temporary directory, stopped with ``ray stop --force`` at the end. The jobs are trivial
shell commands; the machine running the tests is the worker too.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from console.jobs import ray_backend
from console.jobs.ray_backend import RayOutcome, run_on_ray
from console.jobs.slots import acquire_slot

try:
    from ray.job_submission import JobStatus, JobSubmissionClient
except ImportError:
    JobSubmissionClient = None

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
# Ray's own websocket client warns about an aiohttp deprecation on every log tail.
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_head():
    if JobSubmissionClient is None:
        pytest.skip("ray is not importable (install the episcope-console[ray] extra)")
    ray_cli = Path(sys.executable).parent / "ray"
    command = str(ray_cli) if ray_cli.exists() else shutil.which("ray")
    # Ray's socket paths live under its temp dir and must stay short (107 bytes at most).
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp" if os.path.isdir("/tmp") else None)
    env = dict(os.environ, **RAY_ENV)
    dashboard = free_port()
    start = [
        command, "start", "--head", "--num-gpus=4", "--num-cpus=2", "--node-ip-address=127.0.0.1",
        f"--port={free_port()}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        "--include-dashboard=true", "--disable-usage-stats", f"--temp-dir={temp_dir}",
        "--object-store-memory=100000000",
    ]
    started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=180)
    try:
        assert started.returncode == 0, f"ray start failed:\n{started.stdout[-3000:]}\n{started.stderr[-3000:]}"
        yield f"http://127.0.0.1:{dashboard}"
    finally:
        subprocess.run([command, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def stage(tmp_path) -> Path:
    directory = tmp_path / "stage"
    (directory / "profiles").mkdir(parents=True)
    (directory / "profiles" / "staged.txt").write_text("staged input\n")
    (directory / "kernel.py").write_text("KERNEL = 1\n")
    (directory / "data" / "empty").mkdir(parents=True)
    return directory


class Job:
    """One run_on_ray call with its output kept, and hooks called on each chunk."""

    def __init__(self, address: str, stage: Path, argv: list[str], **options) -> None:
        self.address = address
        self.stage = stage
        self.argv = argv
        self.options = options
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.cancel = threading.Event()
        self.on_chunk = None

    def _out(self, data: bytes) -> None:
        self.stdout.extend(data)
        if self.on_chunk is not None:
            self.on_chunk(bytes(self.stdout))

    def run(self) -> RayOutcome:
        options = {"env": {}, "sync_paths": ["profiles"], "timeout": 60.0, "job_id": "test", "episode_id": "e0001",
                   "max_output_bytes": 8 * MB}
        options.update(self.options)
        return run_on_ray(
            stage_dir=self.stage, argv=self.argv, address=self.address, on_stdout=self._out,
            on_stderr=self.stderr.extend, should_cancel=self.cancel.is_set, **options,
        )


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["log", "shared"])
def test_outputs_are_synced_back(ray_head, stage, tmp_path, monkeypatch, transport):
    shared = tmp_path / "shared"
    if transport == "shared":
        shared.mkdir()
        monkeypatch.setenv(ray_backend.SHARED_DIR_ENV, str(shared))
    staged_mtime = (stage / "profiles" / "staged.txt").stat().st_mtime_ns
    script = (
        "test -f kernel.py && test -d data/empty && mkdir -p profiles/shape-0 && echo \"$EXTRA\" > profiles/shape-0/out.txt"
        " && head -c 300000 /dev/urandom > profiles/blob.bin && head -c 500000 /dev/zero > profiles/huge.bin"
        " && echo done"
    )
    job = Job(ray_head, stage, ["bash", "-c", script], env={"EXTRA": "from the request"}, job_id=f"sync-{transport}",
              max_output_bytes=400_000)
    outcome = job.run()

    assert outcome.state == "succeeded" and outcome.exit_code == 0 and outcome.error is None
    assert sorted(outcome.archive_members) == ["profiles/blob.bin", "profiles/shape-0/out.txt"]
    assert (stage / "profiles" / "shape-0" / "out.txt").read_text() == "from the request\n"
    assert (stage / "profiles" / "blob.bin").stat().st_size == 300000
    assert (stage / "profiles" / "staged.txt").stat().st_mtime_ns == staged_mtime  # not sent back
    assert [item["path"] for item in outcome.refused] == ["profiles/huge.bin"]
    assert not (stage / "profiles" / "huge.bin").exists()
    assert bytes(job.stdout) == b"done\n"  # no Ray preamble, no frame
    assert outcome.submission_id.startswith("episcope-sync-")
    client = JobSubmissionClient(ray_head)
    info = client.get_job_info(outcome.submission_id)
    assert info.metadata["episcope_job_id"] == f"sync-{transport}" and info.metadata["episode_id"] == "e0001"
    assert f'"transport":"{transport}"' in client.get_job_logs(outcome.submission_id)
    if transport == "shared":
        assert list(shared.iterdir()) == []  # the archive is removed once unpacked


@pytest.mark.slow
def test_a_failing_job_reports_its_exit_code(ray_head, stage):
    outcome = Job(ray_head, stage, ["bash", "-c", "echo failing >&2; exit 7"], job_id="fails").run()
    assert outcome.state == "failed" and outcome.exit_code == 7
    assert JobSubmissionClient(ray_head).get_job_status(outcome.submission_id) == JobStatus.FAILED


@pytest.mark.slow
def test_logs_stream_while_the_job_runs(ray_head, stage, tmp_path):
    # The job waits for a file the test writes only once it has seen the first line:
    # without streaming the job would never finish before its timeout.
    go = tmp_path / "go"
    script = f"echo first; while [ ! -e {go} ]; do sleep 0.1; done; echo second"
    job = Job(ray_head, stage, ["bash", "-c", script], timeout=40.0, job_id="streams")
    job.on_chunk = lambda out: go.touch() if b"first\n" in out else None
    outcome = job.run()
    assert outcome.state == "succeeded", (outcome, bytes(job.stderr))
    assert bytes(job.stdout) == b"first\nsecond\n"


@pytest.mark.slow
def test_cancel_stops_a_running_job(ray_head, stage):
    marker = f"episcope-cancel-{os.getpid()}-{time.time_ns()}"
    script = f"mkdir -p profiles; echo kept > profiles/kept.txt; echo ready; exec -a {marker} sleep 300"
    job = Job(ray_head, stage, ["bash", "-c", script], job_id="cancels")
    job.on_chunk = lambda out: job.cancel.set() if b"ready\n" in out else None
    started = time.monotonic()
    outcome = job.run()
    assert outcome.state == "cancelled"
    assert time.monotonic() - started < 45
    assert JobSubmissionClient(ray_head).get_job_status(outcome.submission_id) == JobStatus.STOPPED
    assert not processes_named(marker)


@pytest.mark.slow
def test_cancel_of_a_pending_job_holds_on_until_ray_stops_it(ray_head, stage):
    # Ray cannot take back a pending job: it runs once a GPU frees, and only then does the
    # stop reach it. The cancelled job must not be reported gone before that.
    client = JobSubmissionClient(ray_head)
    blockers = [client.submit_job(entrypoint="sleep 120", entrypoint_num_gpus=1) for _ in range(4)]
    deadline = time.monotonic() + 90
    while not all(client.get_job_status(b) == JobStatus.RUNNING for b in blockers):
        assert time.monotonic() < deadline, "the four blocking jobs did not start"
        time.sleep(0.5)
    seen = {}

    def release() -> None:
        [mine] = [j for j in client.list_jobs() if (j.submission_id or "").startswith("episcope-pending-")]
        seen["at_cancel"] = mine.status
        job.cancel.set()
        time.sleep(2)
        for blocker in blockers:
            client.stop_job(blocker)

    job = Job(ray_head, stage, ["bash", "-c", "echo started; sleep 300"], job_id="pending")
    timer = threading.Timer(3.0, release)
    timer.start()
    outcome = job.run()
    timer.join()
    assert seen["at_cancel"] == JobStatus.PENDING
    assert outcome.state == "cancelled"
    assert client.get_job_status(outcome.submission_id).is_terminal()


@pytest.mark.slow
def test_timeout_stops_the_command_and_keeps_its_outputs(ray_head, stage):
    script = "mkdir -p profiles; echo partial > profiles/partial.txt; echo slow; sleep 300"
    started = time.monotonic()
    outcome = Job(ray_head, stage, ["bash", "-c", script], timeout=2.0, job_id="times-out").run()
    assert outcome.state == "timed_out"
    assert outcome.archive_members == ["profiles/partial.txt"]
    assert time.monotonic() - started < 45


@pytest.mark.slow
def test_at_most_four_run_at_once_each_on_its_own_gpu(ray_head, tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    client = JobSubmissionClient(ray_head)
    prefix = f"four-{time.time_ns()}"
    live_counts = []
    done = threading.Event()

    def watch() -> None:
        # What Ray holds at any moment: never more than the four slots let through.
        while not done.is_set():
            jobs = [j for j in client.list_jobs() if (j.submission_id or "").startswith(f"episcope-{prefix}")]
            live_counts.append(sum(1 for j in jobs if not j.status.is_terminal()))
            time.sleep(0.2)

    def one(index: int, results: dict) -> None:
        stage = tmp_path / f"stage-{index}"
        stage.mkdir()
        script = (
            f"date +%s.%N > {marks}/{index}.start; echo gpu=$CUDA_VISIBLE_DEVICES;"
            f" echo $CUDA_VISIBLE_DEVICES > {marks}/{index}.gpu; sleep 2; date +%s.%N > {marks}/{index}.end"
        )
        with acquire_slot(workspace) as slot:
            assert slot is not None
            results[index] = Job(ray_head, stage, ["bash", "-c", script], job_id=f"{prefix}-{index}").run()

    results: dict = {}
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    threads = [threading.Thread(target=one, args=(i, results)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=150)
    done.set()
    watcher.join()

    assert sorted(results) == list(range(6))
    assert all(o.state == "succeeded" for o in results.values()), results
    spans = {i: (float((marks / f"{i}.start").read_text()), float((marks / f"{i}.end").read_text())) for i in range(6)}
    gpus = {i: (marks / f"{i}.gpu").read_text().strip() for i in range(6)}
    assert set(gpus.values()) <= {"0", "1", "2", "3"}
    most = max(sum(1 for s, e in spans.values() if s <= t < e) for t, _ in spans.values())
    assert 2 <= most <= 4
    for i in spans:
        for j in spans:
            if i < j and spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1]:
                assert gpus[i] != gpus[j], f"jobs {i} and {j} ran at once on GPU {gpus[i]}"
    assert max(live_counts) <= 4


@pytest.mark.slow
def test_sandbox_command_line_runs_a_job_on_ray(ray_head, tmp_path):
    # The whole path: tools/sandbox.py --backend ray, the live record, outputs in the workspace.
    workspace = tmp_path / "workspace"
    (workspace / "profiles").mkdir(parents=True)
    (workspace / "kernel.py").write_text("KERNEL = 1\n")
    env = dict(os.environ, **RAY_ENV, EPISCOPE_RAY_ADDRESS=ray_head)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "sandbox.py"), "--workspace", str(workspace), "--backend", "ray",
         "--sync", "profiles", "--", "bash", "-c", "echo on ray; mkdir -p profiles; echo result > profiles/r.txt; exit 4"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout == "on ray\n"
    assert (workspace / "profiles" / "r.txt").read_text() == "result\n"
    [record_path] = (workspace / ".atrex_long_horizon" / "sandbox").glob("*/job.json")
    record = json.loads(record_path.read_text())
    assert record["backend"] == "ray" and record["state"] == "failed" and record["exit_code"] == 4
    assert record["synced"] == ["profiles/r.txt"]
    assert (record_path.parent / "stdout.log").read_text() == "on ray\n"


def test_without_ray_the_backend_fails_with_one_clear_line(tmp_path):
    # Block the import as an environment without the extra would; the module itself must
    # not import Ray at all until a job is run.
    code = f"""
import sys
sys.modules["ray"] = None
from pathlib import Path
from console.jobs import ray_backend
assert "ray" not in [m for m in sys.modules if sys.modules[m] is not None and m.split('.')[0] == 'ray']
try:
    ray_backend.run_on_ray(stage_dir=Path({str(tmp_path)!r}), argv=["true"], env={{}}, sync_paths=[], timeout=5,
        job_id="x", episode_id=None, address="http://127.0.0.1:9", on_stdout=print, on_stderr=print,
        should_cancel=lambda: False, max_output_bytes=1)
except ray_backend.RayUnavailable as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and "episcope-console[ray]" in lines[0] and "ray[default]==" in lines[0]


def test_an_unreachable_cluster_is_a_job_never_submitted(stage):
    if JobSubmissionClient is None:
        pytest.skip("ray is not importable (install the episcope-console[ray] extra)")
    outcome = Job(f"http://127.0.0.1:{free_port()}", stage, ["true"]).run()
    assert outcome.state == "failed" and outcome.submission_id is None
    assert outcome.error.startswith("Ray at http://127.0.0.1:") and "\n" not in outcome.error


def processes_named(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state not in (b"Z", b"X"):
                found.append(int(entry))
    return found
