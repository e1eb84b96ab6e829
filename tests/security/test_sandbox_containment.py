"""A sandbox job cannot outlive its sandbox: every escape a process can try, replayed for real.

Each case starts ``tools/sandbox.py`` as the agent would, with a command that leaves a
stubborn process behind (it ignores SIGTERM) by ``setsid``, by a double fork or by
``setpgid``, and ends the job by its own exit, by its timeout or by ``episcope jobs cancel``.
Afterwards the process table must hold nothing of the job. Every containment this machine
allows is tried (``pidns`` needs root, ``cgroup`` a writable cgroup v2 hierarchy; the
``subreaper`` works on any Linux).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.formats.job_record import MAX_SANDBOX_JOBS, list_job_records, read_job_record
from console.jobs.local import CONTAINMENT_ENV, group_members
from console.jobs.slots import try_acquire

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "sandbox.py"
PY = sys.executable

# The process a job leaves behind: it ignores SIGTERM, so only SIGKILL (or its namespace's
# end) stops it. Its command line carries a marker the test finds it by on the host.
ESCAPE = r'''
import os, signal, subprocess, sys, time
how, marker, hold, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[2], 'w').close(); time.sleep(300)"
stay = [sys.executable, "-c", code, marker + "-stay", ready]
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if how == "setsid":
    subprocess.Popen(stay, start_new_session=True, **quiet)
elif how == "setpgid":
    subprocess.Popen(stay, process_group=0, **quiet)
elif how == "double_fork":
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, stay)  # keeps the job's stdout: the log pipe stays open
        os._exit(0)
    os.waitpid(middle, 0)
while not os.path.exists(ready):
    time.sleep(0.01)
print("left one behind", flush=True)
time.sleep(hold)
'''


def available_modes() -> list[str]:
    modes = ["subreaper"]
    if os.geteuid() == 0:
        modes.insert(0, "pidns")
    if _cgroup_writable():
        modes.insert(-1, "cgroup")
    return modes


def _cgroup_writable() -> bool:
    try:
        own = next(l[3:].strip() for l in Path("/proc/self/cgroup").read_text().splitlines() if l.startswith("0::"))
        mount = next(
            l.split(" - ")[0].split()[4] for l in Path("/proc/self/mountinfo").read_text().splitlines()
            if l.split(" - ")[1].startswith("cgroup2 ")
        )
    except (OSError, StopIteration, IndexError):
        return False
    return os.access(mount + own.rstrip("/"), os.W_OK)


MODES = available_modes()


def process_alive(pid: int) -> bool:
    """A process that exists and is not a zombie (its state in /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "EPISCOPE_", "PROFILE_")) and k != "PYTHONPATH"}
    env.update(extra)
    return env


def sandbox_argv(*args: str) -> list[str]:
    return [PY, str(TOOL), *args]


def marked(marker: str) -> list[int]:
    """Live processes on the host left behind by escape.py run with ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"{marker}-stay".encode() in args and process_alive(int(entry)):
                found.append(int(entry))
    return found


def wait_for(predicate, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".atrex_long_horizon").mkdir(parents=True)
    (root / "kernel.py").write_text("KERNEL = 1\n")
    (root / "escape.py").write_text(ESCAPE)
    return root


@pytest.fixture
def marker(request):
    """A unique marker; whatever still carries it at teardown is killed (a failed test)."""
    value = f"escapee-{os.getpid()}-{time.time_ns()}"
    yield value
    for pid in marked(value):
        os.kill(pid, signal.SIGKILL)


def only_record(ws: Path):
    records, problems = list_job_records(ws)
    assert problems == () and len(records) == 1
    return records[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["setsid", "double_fork", "setpgid"])
@pytest.mark.parametrize("end", ["exit", "timeout", "cancel"])
def test_nothing_the_job_started_survives_its_end(ws, tmp_path, marker, mode, how, end):
    hold = {"exit": "0", "timeout": "60", "cancel": "60"}[end]
    timeout = "3" if end == "timeout" else "60"
    ready = tmp_path / "ready"  # written by the escapee once it runs
    argv = sandbox_argv("--timeout", timeout, "--", PY, "escape.py", how, marker, hold, str(ready))
    runner = subprocess.Popen(argv, cwd=ws, env=clean_env(**{CONTAINMENT_ENV: mode}), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if end == "cancel":
            wait_for(lambda: marked(marker))
            record = wait_for(lambda: (r := list_job_records(ws)[0]) and r[0].state == "running" and r[0])
            cancel = subprocess.run([PY, "-m", "console.cli", "jobs", "cancel", record.job_id, "--workspace", str(ws)],
                                    cwd=REPO, capture_output=True, text=True, timeout=60)
            assert cancel.returncode == 0, cancel.stderr
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert ready.exists(), err
    assert marked(marker) == [], "a process of the job outlived it"
    record = only_record(ws)
    assert record.state == {"exit": "succeeded", "timeout": "timed_out", "cancel": "cancelled"}[end], err
    assert record.raw["containment"] == mode
    assert group_members(record.pgid) == []
    assert b"left one behind" in out


def test_escaped_daemons_never_let_more_than_four_jobs_run(ws, marker, tmp_path):
    # Each job leaves a daemon and waits for a release file; a sixth and seventh job wait
    # for a slot. At no time may more than four jobs' daemons be alive.
    release = tmp_path / "release"
    wait_release = f"import os, sys, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)\n"
    (ws / "wait.py").write_text(wait_release)
    command = f"{PY} escape.py setsid {marker} 0 ready && {PY} wait.py"
    runners = [subprocess.Popen(sandbox_argv("--", "sh", "-c", command), cwd=ws, env=clean_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(6)]
    try:
        wait_for(lambda: len(marked(marker)) == 4)
        peak = 0
        for _ in range(20):
            peak = max(peak, len(marked(marker)))
            time.sleep(0.05)
        assert peak == 4
        release.touch()
        # Released, each job ends and takes its daemon: the queued ones get slots, one by one.
        for runner in runners:
            runner.wait(timeout=60)
            assert len(marked(marker)) <= 4
    finally:
        release.touch()
        for runner in runners:
            if runner.poll() is None:
                runner.kill()
    assert marked(marker) == []
    assert [r.state for r in list_job_records(ws)[0]] == ["succeeded"] * 6


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_client_takes_its_daemons_along_frees_its_slot_and_reads_lost(ws, marker, mode):
    runner = subprocess.Popen(sandbox_argv("--", PY, "escape.py", "double_fork", marker, "60", str(ws.parent / "ready")), cwd=ws,
                              env=clean_env(**{CONTAINMENT_ENV: mode}), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: marked(marker))
    record = wait_for(lambda: (r := list_job_records(ws)[0]) and r[0].state == "running" and r[0])
    runner.kill()
    runner.wait()
    path = ws / ".atrex_long_horizon" / "sandbox" / record.job_id / "job.json"
    assert read_job_record(path).value.state == "lost"
    wait_for(lambda: not marked(marker) and not group_members(record.pgid))
    assert json.loads(path.read_text())["state"] == "lost"  # written down by the supervisor
    slots = [try_acquire(ws) for _ in range(MAX_SANDBOX_JOBS)]
    assert all(slots), "a lost job still holds a slot"
    for slot in slots:
        slot.release()


def test_records_of_dead_runners_read_lost_and_block_nothing(ws, tmp_path):
    # Four records say "running" but name runners that are gone (or a pid now used by
    # another process): they read lost, raise no concurrency alert, and a job still runs.
    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    for index, (pid, started) in enumerate([(dead.pid, None), (dead.pid, 1), (os.getpid(), 1), (1, 0)]):
        directory = ws / ".atrex_long_horizon" / "sandbox" / f"20260101T00000{index}Z-dead0{index}"
        directory.mkdir(parents=True)
        (directory / "job.json").write_text(json.dumps({
            "schema": "episcope-sandbox-job/v1", "job_id": directory.name, "state": "running",
            "created_at": f"2026-01-01T00:00:0{index}+00:00", "sandbox_pid": pid, "sandbox_started": started,
        }))
    records, problems = list_job_records(ws)
    assert problems == () and [r.state for r in records] == ["lost"] * 4
    status = subprocess.run([PY, "-m", "console.cli", "status", str(ws), "--json"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert "sandbox_concurrency" not in json.dumps(document.get("alerts"))
    job = subprocess.run(sandbox_argv("--", PY, "-c", "print('ran')"), cwd=ws, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert job.returncode == 0 and "ran" in job.stdout, job.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs root")
def test_a_profiler_job_is_held_without_a_pid_namespace(tmp_path):
    """Concurrent Nsight Compute instances coordinate by host pid (four surveys at once hung
    inside PID namespaces on the H200), so a profile job is held by the next containment and
    sees host pids; any other job still gets the namespace."""
    from console.jobs.local import run_process

    def held(host_pids: bool):
        job = tmp_path / f"job-{host_pids}"
        job.mkdir()
        outcome = run_process(
            [PY, "-c", "import os; print(os.getpid())"], cwd=job, env=clean_env(), timeout=30,
            stdout_log=job / "stdout.log", stderr_log=job / "stderr.log", job_dir=job, job_id=job.name,
            host_pids=host_pids,
        )
        return outcome.containment, int((job / "stdout.log").read_text()), outcome.notes

    containment, pid, notes = held(host_pids=True)
    assert containment in ("cgroup", "subreaper") and pid > 2
    assert any("profiler" in note for note in notes)
    assert held(host_pids=False)[:2] == ("pidns", 2)  # the namespace's init runs the command as its child
