"""What a sandbox job can reach: the workspace, the private shapes table, other processes.

Threat model: a job's command is written by an untrusted agent and runs as the operator's
user. Closed everywhere: the stage lies outside the workspace, so ``../`` paths from the
stage (``../../../../kernel.py``) name nothing of it; the private shapes table's path is in
no environment a job can read; a record the job forges never makes ``jobs cancel`` signal
a process that is not the job's. Closed where the machine allows a PID namespace (root):
the workspace is read-only to the job by any path, absolute included, and the job's /proc
shows its own processes only. A profile job (held by the cgroup or subreaper, as it must see
host pids) still gets a mount namespace as root, so the workspace is read-only to it too.
Without root, a job that knows the workspace's absolute path can still write there (the
README says so).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.job_record import JOB_SCHEMA, list_job_records
from console.jobs.local import CONTAINMENT_ENV, process_start

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "sandbox.py"
PY = sys.executable
MODES = ["subreaper"] + (["pidns"] if os.geteuid() == 0 else [])

# Tries every way up from the stage, then the absolute paths it is given.
WRITE_UP = r'''
import json, os, sys
done = {}
for levels in range(1, 13):
    path = "../" * levels + "kernel.py"
    try:
        with open(path, "a") as fh:
            fh.write("# planted\n")
        done[path] = "written"
    except OSError as exc:
        done[path] = type(exc).__name__
for path in sys.argv[1:]:
    try:
        with open(path, "a") as fh:
            fh.write("# planted\n")
        done[path] = "written"
    except OSError as exc:
        done[path] = exc.strerror
print("WRITES=" + json.dumps(done), flush=True)
'''

# Reads every environment and command line it can see, and says where the secret showed.
READ_ENVIRON = r'''
import json, os, sys, time
secrets = open("secrets.txt", "rb").read().split()
seen, leaks = 0, []
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{entry}/{name}", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        seen += 1
        leaks.extend(f"/proc/{entry}/{name}" for s in secrets if s in data)
parent = os.getppid()
print("ENVIRON=" + json.dumps({"seen": seen, "leaks": leaks, "ppid": parent}), flush=True)
time.sleep(float(os.environ.get("HOLD", "0")))
'''


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


def sandbox(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(TOOL), *args], cwd=ws, env=clean_env(**env), capture_output=True, text=True, timeout=60)


def line_of(stdout: str, prefix: str) -> dict:
    return next(json.loads(l[len(prefix):]) for l in stdout.splitlines() if l.startswith(prefix))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".atrex_long_horizon").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "kernel.py").write_text("KERNEL = 1\n")
    (root / "write_up.py").write_text(WRITE_UP)
    (root / "read_environ.py").write_text(READ_ENVIRON)
    return root


@pytest.mark.parametrize("mode", MODES)
def test_no_path_up_from_the_stage_reaches_the_workspace(ws, mode):
    proc = sandbox(ws, "--", PY, "write_up.py", **{CONTAINMENT_ENV: mode})
    assert proc.returncode == 0, proc.stderr
    writes = line_of(proc.stdout, "WRITES=")
    assert len(writes) == 12
    assert (ws / "kernel.py").read_text() == "KERNEL = 1\n"
    (record,) = list_job_records(ws)[0]
    stage = Path(record.raw["stage"])
    assert ws not in stage.parents and not stage.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID and mount namespace needs root")
def test_with_a_namespace_the_workspace_is_read_only_by_any_path(ws):
    record_glob = ws / ".atrex_long_horizon" / "sandbox"
    targets = [ws / "kernel.py", ws / ".git" / "config", ws / ".atrex_long_horizon" / "telemetry.jsonl"]
    proc = sandbox(ws, "--", PY, "write_up.py", *map(str, targets), **{CONTAINMENT_ENV: "pidns"})
    assert proc.returncode == 0, proc.stderr
    writes = line_of(proc.stdout, "WRITES=")
    assert all(writes[str(t)] == "Read-only file system" for t in targets), writes
    assert (ws / "kernel.py").read_text() == "KERNEL = 1\n" and (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".atrex_long_horizon" / "telemetry.jsonl").exists()
    (record,) = list_job_records(ws)[0]
    assert record.raw["containment"] == "pidns" and record.state == "succeeded"
    assert sorted(p.name for p in record_glob.iterdir()) == sorted(["slots", record.job_id])


# What a profiler needs: host pids and the host's /proc.
HOST_VIEW = r'''
print("HOST=" + json.dumps({"pid": os.getpid(), "sees_starter": os.path.exists("/proc/%d" % int(os.environ["STARTER"]))}))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root")
@pytest.mark.parametrize("mode", ["auto", "subreaper"])
def test_a_profile_job_without_a_pid_namespace_cannot_write_the_workspace_by_absolute_path(ws, tmp_path, monkeypatch, mode):
    from console.jobs.local import run_process

    stage = tmp_path / "stage"
    stage.mkdir()
    job = ws / ".atrex_long_horizon" / "sandbox" / "job-profile"
    job.mkdir(parents=True)
    targets = [ws / "kernel.py", ws / ".git" / "config", ws / "planted.py"]
    monkeypatch.setenv(CONTAINMENT_ENV, mode)  # run_process reads it from its own environment
    outcome = run_process(
        [PY, "-c", WRITE_UP + HOST_VIEW, *map(str, targets)], cwd=stage, env=clean_env(STARTER=str(os.getpid())),
        timeout=30, stdout_log=job / "stdout.log", stderr_log=job / "stderr.log", job_dir=job, job_id=job.name,
        host_pids=True, read_only=(str(ws),),
    )
    output = (job / "stdout.log").read_text()
    assert outcome.state == "succeeded", (job / "stderr.log").read_text()
    assert outcome.containment in ("cgroup", "subreaper") and outcome.containment != "pidns"
    assert not any("mount namespace" in note for note in outcome.notes), outcome.notes
    writes = line_of(output, "WRITES=")
    assert all(writes[str(t)] == "Read-only file system" for t in targets), writes
    assert (ws / "kernel.py").read_text() == "KERNEL = 1\n" and (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / "planted.py").exists()
    host = line_of(output, "HOST=")
    assert host["pid"] > 2 and host["sees_starter"], host  # host pids and the host's /proc stay


# A supervisor that may not make a mount namespace: run_process under setpriv, which drops
# CAP_SYS_ADMIN from the bounding set (root stays root, unshare(CLONE_NEWNS) is refused).
WITHOUT_MOUNTS = r'''
import json, sys
from pathlib import Path
from console.jobs.local import run_process
ws, stage, job = map(Path, sys.argv[1:4])
outcome = run_process([sys.executable, "-c", "open(%r, 'a').write('# planted\\n')" % str(ws / "kernel.py")], cwd=stage,
                      env={"PATH": "/usr/bin:/bin"}, timeout=30, stdout_log=job / "stdout.log",
                      stderr_log=job / "stderr.log", job_dir=job, job_id=job.name, host_pids=True, read_only=(str(ws),))
print(json.dumps({"state": outcome.state, "containment": outcome.containment, "notes": list(outcome.notes)}))
'''


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_where_the_mount_namespace_is_refused_the_profile_job_runs_and_a_note_says_so(ws, tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    job = ws / ".atrex_long_horizon" / "sandbox" / "job-profile"
    job.mkdir(parents=True)
    run = subprocess.run(["setpriv", "--bounding-set", "-sys_admin", PY, "-c", WITHOUT_MOUNTS, str(ws), str(stage), str(job)],
                         cwd=REPO, env=clean_env(PYTHONPATH=str(REPO), **{CONTAINMENT_ENV: "subreaper"}),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout)
    assert outcome["state"] == "succeeded" and outcome["containment"] == "subreaper", outcome
    assert outcome["notes"] == ["no mount namespace (unshare(CLONE_NEWNS): Operation not permitted): "
                                "the workspace stays writable"], outcome
    assert (ws / "kernel.py").read_text() == "KERNEL = 1\n# planted\n"  # the fallback, as the README says


@pytest.mark.parametrize("mode", MODES)
def test_the_private_shapes_table_is_in_no_environment_a_job_can_read(ws, tmp_path, mode):
    table = tmp_path / "operator" / "private-shapes-table.json"
    table.parent.mkdir()
    table.write_text(json.dumps({"s-7f3a": {"m": 4096}, "s-0b21": {"m": 77777}}))
    env = clean_env(**{CONTAINMENT_ENV: mode, "EPISCOPE_PRIVATE_SHAPES": str(table), "PROFILE_SHAPE_ID": "s-7f3a", "HOLD": "30"})
    (ws / "secrets.txt").write_text(f"{table}\n77777\n")  # what to look for, in no command line
    # A profile job is never held in a PID namespace (its profiler needs host pids): there the
    # job is a plain run, which gets no private case but the same environment.
    kind = "run" if mode == "pidns" else "profile"
    argv = [PY, str(TOOL), "--kind", kind, "--", PY, "read_environ.py"]
    runner = subprocess.Popen(argv, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = b""
        while not line.startswith(b"ENVIRON="):
            line = runner.stdout.readline()
            assert line, runner.stderr.read().decode()
        # As the host sees the sandbox process itself, while the job runs.
        assert str(table).encode() not in Path(f"/proc/{runner.pid}/environ").read_bytes()
        runner.send_signal(signal.SIGTERM)
        runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    seen = json.loads(line[len(b"ENVIRON="):])
    assert seen["seen"] > 0 and seen["leaks"] == [], seen
    if mode == "pidns":
        assert seen["ppid"] == 1  # its parent is the namespace's init: the sandbox is out of sight


def test_a_forged_pid_in_a_record_never_gets_an_unrelated_process_killed(ws):
    victim = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        directory = ws / ".atrex_long_horizon" / "sandbox" / "20260101T000000Z-f0f0f0"
        directory.mkdir(parents=True)
        # Everything a job could write: a live runner (this test), the victim as its group
        # and as its supervisor, even with the victim's true start time.
        (directory / "job.json").write_text(json.dumps({
            "schema": JOB_SCHEMA, "job_id": directory.name, "state": "running", "launcher": "console",
            "sandbox_pid": os.getpid(), "sandbox_started": process_start(os.getpid()),
            "pid": victim.pid, "pgid": victim.pid, "pid_started": process_start(victim.pid),
        }))
        cancel = subprocess.run([PY, "-m", "console.cli", "jobs", "cancel", directory.name, "--workspace", str(ws)],
                                cwd=REPO, capture_output=True, text=True, timeout=60)
        assert cancel.returncode == 1  # not cancelled: its runner (this test) never answered
        assert victim.poll() is None and process_alive(victim.pid)
    finally:
        victim.kill()
        victim.wait()


def test_a_record_pointing_at_another_jobs_supervisor_does_not_stop_that_job(ws):
    from console.formats.job_record import read_job_record
    from console.jobs.runner import cancel_job

    other = subprocess.Popen([PY, str(TOOL), "--", PY, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                             cwd=ws, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert other.stdout.readline() == b"up\n"
        (running,) = list_job_records(ws)[0]
        directory = ws / ".atrex_long_horizon" / "sandbox" / "20260101T000000Z-f1f1f1"
        directory.mkdir()
        forged = {**running.raw, "job_id": directory.name, "sandbox_pid": os.getpid(), "sandbox_started": process_start(os.getpid())}
        (directory / "job.json").write_text(json.dumps(forged))
        cancel_job(ws, directory.name, wait=0.5)
        path = ws / ".atrex_long_horizon" / "sandbox" / running.job_id / "job.json"
        assert read_job_record(path).value.state == "running" and other.poll() is None
        assert cancel_job(ws, running.job_id)["state"] == "cancelled"  # its own record does stop it
        other.communicate(timeout=30)
    finally:
        if other.poll() is None:
            other.kill()
