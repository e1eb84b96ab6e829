"""tools/sandbox.py end to end: real workspaces, real subprocesses, no orjson."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.episode import events as ev
from console.episode.replay import Replay, episode_events
from console.formats.job_record import list_job_records, read_job_record
from console.jobs.local import group_members

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "sandbox.py"
FIXTURES = REPO / "tests" / "fixtures" / "jobs"
PY = sys.executable
NO_ORJSON = "import runpy, sys; sys.modules['orjson'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "EPISCOPE_", "PROFILE_", "FAKE_")) and k != "PYTHONPATH"}
    env.update(extra)
    return env


def sandbox_argv(*args: str) -> list[str]:
    return [PY, "-c", NO_ORJSON, str(TOOL), *args]


def sandbox(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(sandbox_argv(*args), cwd=ws, env=clean_env(**env), capture_output=True, text=True, timeout=60)


def only_record(ws: Path):
    records, problems = list_job_records(ws)
    assert problems == () and len(records) == 1
    return records[0]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel in ("memory", "plans", "skills/s", ".git", ".atrex_long_horizon", "profiles/prev"):
        (root / rel).mkdir(parents=True)
    (root / "kernel.py").write_text("KERNEL = 1\n")
    shutil.copy(FIXTURES / "evaluator.py", root / "test_kernel.py")
    shutil.copy(FIXTURES / "probe.py", root / "probe.py")
    (root / "memory" / "v1.json").write_text("{}")
    (root / "plans" / "plan.md").write_text("plan")
    (root / "skills" / "s" / "SKILL.md").write_text("skill")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".atrex_long_horizon" / "state.json").write_text("{}")
    (root / "profiles" / "prev" / "summary.txt").write_text("old summary")
    (root / "profiles" / "prev" / "ncu.ncu-rep").write_bytes(b"raw")
    (root / "big.bin").write_bytes(b"b" * (2 * 1024 * 1024))
    (root / "alias.py").symlink_to(root / "kernel.py")
    return root


def probe_of(stdout: str) -> dict:
    return next(json.loads(l[len("PROBE="):]) for l in stdout.splitlines() if l.startswith("PROBE="))


def test_dry_run_prints_the_request(ws):
    proc = sandbox(ws, "--dry-run", "--timeout", "30", "--sync", "profiles/episode_1", "--", PY, "test_kernel.py")
    assert proc.returncode == 0, proc.stderr
    request = json.loads(proc.stdout)
    assert request["kind"] == "run" and request["argv"] == [PY, "test_kernel.py"]
    assert (request["timeout"], request["sync"], request["workspace"]) == (30.0, ["profiles/episode_1"], str(ws))
    assert not (ws / ".atrex_long_horizon" / "sandbox").exists()


def test_evaluator_run_records_result_telemetry_and_evaluation(ws, tmp_path):
    telemetry = tmp_path / "telemetry.jsonl"
    proc = sandbox(ws, "--", PY, "test_kernel.py", "--multi-seed", ATREX_TELEMETRY_TRACE=str(telemetry), ATREX_TELEMETRY_ITERATION_ID="episode-0002")
    assert proc.returncode == 0, proc.stderr
    result_lines = [l for l in proc.stdout.splitlines() if l.startswith("[test_kernel] RESULT_JSON=")]
    assert len(result_lines) == 1 and json.loads(result_lines[0].split("=", 1)[1])["all_pass"] is True
    record = only_record(ws)
    assert (record.state, record.kind, record.backend, record.exit_code, record.result_code) == ("succeeded", "run", "local", 0, 0)
    assert record.argv == (PY, "test_kernel.py", "--multi-seed") and record.category == "correctness"
    assert record.pgid == record.pid and record.launcher == "sandbox" and record.sync == ("profiles",)
    assert record.created_at <= record.started_at <= record.finished_at
    job = ws / ".atrex_long_horizon" / "sandbox" / record.job_id
    assert "evaluating kernel.py" in (job / "stdout.log").read_text()
    assert not (job / "stage").exists()
    (evaluation,) = [json.loads(l) for l in (ws / ".atrex_long_horizon" / "evaluations.jsonl").read_text().splitlines()]
    assert evaluation["schema_version"] == 2 and evaluation["gateway_kind"] == "run" and evaluation["job_id"] == record.job_id
    assert evaluation["kernel_sha256"] == hashlib.sha256((ws / "kernel.py").read_bytes()).hexdigest()
    assert evaluation["result"]["latency_us_geomean"] == 12.5
    started, completed = [json.loads(l) for l in telemetry.read_text().splitlines()]
    assert (started["event"], completed["event"]) == ("sandbox_operation_started", "sandbox_operation_completed")
    assert started["operation_id"] == completed["operation_id"] == record.operation_id
    assert started["operation_id"].startswith("sandbox-")
    assert (started["source"], started["measurement"], started["category"], started["iteration_id"]) == ("sandbox", "exact", "correctness", "episode-0002")
    assert (completed["status"], completed["exit_status"]) == ("succeeded", 0)
    assert round(completed["duration_seconds"], 6) == completed["duration_seconds"] >= 0


@pytest.mark.parametrize(("mode", "code", "state"), [("fail", 1, "failed"), ("garbage", 2, "failed"), ("none", 2, "failed")])
def test_evaluator_exit_codes(ws, mode, code, state):
    proc = sandbox(ws, "--kind", "run", "--", PY, "test_kernel.py", FAKE_RESULT=mode)
    assert proc.returncode == code, proc.stderr
    record = only_record(ws)
    assert (record.state, record.result_code) == (state, code) and record.message


def test_dev_status_passes_through_and_missing_program_fails(ws):
    proc = sandbox(ws, "--", PY, "-c", "import sys; print('dev out'); sys.exit(3)")
    assert proc.returncode == 3 and "dev out" in proc.stdout
    assert only_record(ws).state == "failed"
    missing = sandbox(ws, "--", "no-such-program-here")
    assert missing.returncode == 1 and "cannot start" in missing.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--sync", "/tmp/out"),
        ("--sync", "../elsewhere"),
        ("--sync", "memory"),
        ("--sync", "memory/v2.json"),
        ("--sync", "."),
        ("--input", "/etc/hosts"),
        ("--input", "plans/../../x"),
        ("--timeout", "0"),
        ("--timeout", "601"),
        ("--profile-level", "deep"),
        ("--profile-level", "deep", "--kernel-regex", "gemm"),
        ("-e", "NOEQUALS"),
        ("--bogus",),
        ("--address", "http://127.0.0.1:8265"),
        ("--max-log-mb", "0"),
        ("--max-log-mb", "inf"),
        (),
    ],
)
def test_refused_requests_exit_1_before_anything_runs(ws, args):
    command = () if args == () else ("--", PY, "probe.py")
    proc = sandbox(ws, *args, *command)
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("sandbox: ")
    assert not (ws / ".atrex_long_horizon" / "sandbox").exists()


def test_staging_leaves_out_protected_and_bulky_parts(ws):
    (ws / "plans" / "inputs.json").write_text("{}")
    proc = sandbox(ws, "--max-input-file-mb", "1", "--input", "plans/inputs.json", "--", PY, "probe.py")
    assert proc.returncode == 0, proc.stderr
    files = set(probe_of(proc.stdout)["files"])
    # memory/, plans/ (but the requested input), .git and the supervisor's state stay out; the
    # skills travel, read-only.
    assert files == {"kernel.py", "test_kernel.py", "probe.py", "profiles/prev/summary.txt", "plans/inputs.json",
                     "skills/s/SKILL.md"}
    assert "not staged: big.bin" in proc.stderr and "not staged: alias.py (symbolic link)" in proc.stderr


def test_staged_skills_are_read_only_and_never_synced_back(ws):
    writer = ("import os, stat; path = 'skills/s/SKILL.md'; print('MODE=' + oct(stat.S_IMODE(os.stat(path).st_mode)));"
              " os.chmod(path, 0o644); open(path, 'w').write('job'); open('skills/s/new.md', 'w').write('job');"
              " os.makedirs('profiles', exist_ok=True); open('profiles/new.txt', 'w').write('job')")
    proc = sandbox(ws, "--sync", "skills", "--sync", "profiles", "--", PY, "-c", writer)
    assert proc.returncode == 0, proc.stderr
    assert "MODE=0o444" in proc.stdout
    assert (ws / "skills" / "s" / "SKILL.md").read_text() == "skill" and not (ws / "skills" / "s" / "new.md").exists()
    record = only_record(ws)
    assert record.synced == ("profiles/new.txt",)
    assert record.refused == ({"path": "skills", "reason": "read-only in a job"},)
    assert "not synced: skills (read-only in a job)" in proc.stderr


@pytest.mark.parametrize(("flag", "reason"), [("alias.py", "symbolic link"), ("big.bin", "over --max-input-file-mb")])
def test_refused_inputs_fail_the_job(ws, flag, reason):
    proc = sandbox(ws, "--max-input-file-mb", "1", "--input", flag, "--", PY, "probe.py")
    assert proc.returncode == 1 and reason in proc.stderr
    record = only_record(ws)
    assert record.state == "failed" and reason in record.message and record.started_at is None


def test_sync_back_copies_only_new_safe_outputs(ws):
    args = ["out:profiles/new/summary.txt:10", "out:profiles/big.bin:1100000", "link:profiles/escape:/etc/passwd",
            "out:profiles/new/ncu.ncu-rep:5", "out:kernel.py:3", "out:elsewhere/x.txt:3"]
    proc = sandbox(ws, "--max-output-file-mb", "1", "--", PY, "probe.py", *args)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "profiles" / "new" / "summary.txt").read_bytes() == b"x" * 10
    assert not (ws / "profiles" / "big.bin").exists() and not os.path.lexists(ws / "profiles" / "escape")
    assert not (ws / "profiles" / "new" / "ncu.ncu-rep").exists() and not (ws / "elsewhere").exists()
    assert (ws / "kernel.py").read_text() == "KERNEL = 1\n"
    record = only_record(ws)
    assert record.synced == ("profiles/new/summary.txt",)
    reasons = {r["path"]: r["reason"] for r in record.refused}
    assert set(reasons) == {"profiles/big.bin", "profiles/escape", "profiles/new/ncu.ncu-rep"}
    assert "symbolic link" in reasons["profiles/escape"] and "max-output" in reasons["profiles/big.bin"]
    raw = sandbox(ws, "--include-raw-profile", "--", PY, "probe.py", "out:profiles/r/ncu.ncu-rep:5")
    assert raw.returncode == 0 and (ws / "profiles" / "r" / "ncu.ncu-rep").exists()


def test_profile_kind_env_profile_json_and_harness(ws):
    harness = ws / "plans" / "pdir" / "harness"
    harness.mkdir(parents=True)
    (harness / "helper.py").write_text("VALUE = 7\n")
    (harness / "driver.py").write_text(
        "import json, os, sys\nsys.path.insert(0, os.path.dirname(__file__))\nimport helper\n"
        "os.makedirs('profiles', exist_ok=True)\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('PROFILE_')}\n"
        "json.dump({'profiler': 'ncu', 'level': env['PROFILE_LEVEL'], 'kernels': [], 'env': env, 'helper': helper.VALUE},"
        " open('profiles/gateway_profile.json', 'w'))\n"
    )
    proc = sandbox(ws, "--kind", "profile", "--profile-level", "deep", "--kernel-regex", "^gemm_kernel$", "--top-kernels", "3",
                   "--", PY, "plans/pdir/harness/driver.py", PROFILE_ITERS="5", PROFILE_UNRELATED="x")
    assert proc.returncode == 0, proc.stderr
    (line,) = [l for l in proc.stdout.splitlines() if l.startswith("[sandbox] PROFILE_JSON=")]
    profile = json.loads(line.split("=", 1)[1])
    assert profile["helper"] == 7 and profile["level"] == "deep"
    assert profile["env"]["PROFILE_ITERS"] == "5" and profile["env"]["PROFILE_KERNEL_REGEX"] == "^gemm_kernel$"
    assert profile["env"]["PROFILE_TOP_KERNELS"] == "3" and profile["env"]["PROFILE_PROFILER"] == "ncu"
    # The synced copy is the job's record, as AKA's sandbox writes it; the line carries the bare profile.
    record = json.loads((ws / "profiles" / "gateway_profile.json").read_text())
    assert record == {"job_id": record["job_id"], "kind": "profile", "status": "succeeded", "result": profile, "error": None}
    assert (ws / ".atrex_long_horizon" / "sandbox" / record["job_id"] / "job.json").is_file()


def test_hidden_shape_reaches_only_the_job(ws, tmp_path):
    table = tmp_path / "operator" / "shapes.json"
    table.parent.mkdir()
    table.write_text(json.dumps({"s-7f3a": {"m": 4096, "n": 1024}, "s-0b21": {"m": 77777, "n": 3}}))
    proc = sandbox(ws, "--kind", "profile", "--", PY, "probe.py", EPISCOPE_PRIVATE_SHAPES=str(table), PROFILE_SHAPE_ID="s-7f3a")
    assert proc.returncode == 0, proc.stderr
    probe = probe_of(proc.stdout)
    assert probe["case"] == {"m": 4096, "n": 1024}
    assert "EPISCOPE_PRIVATE_SHAPES" not in probe["env"] and probe["env"]["PROFILE_SHAPE_ID"] == "s-7f3a"
    assert ".atrex_private_profile_case.json" in probe["files"] and "shapes.json" not in " ".join(probe["files"])
    for path in ws.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert b"77777" not in path.read_bytes() and b"s-0b21" not in path.read_bytes(), path
    unknown = sandbox(ws, "--kind", "profile", "--", PY, "probe.py", EPISCOPE_PRIVATE_SHAPES=str(table), PROFILE_SHAPE_ID="s-nope")
    assert unknown.returncode == 1 and "s-nope" in unknown.stderr and "s-7f3a" not in unknown.stderr


def wait_for(predicate, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_at_most_four_jobs_run_at_once(ws, tmp_path):
    release = tmp_path / "release"
    procs = [subprocess.Popen(sandbox_argv("--", PY, str(FIXTURES / "wait_release.py"), str(release)), cwd=ws,
                              env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(5)]
    try:
        def four_running_one_queued():
            records, _ = list_job_records(ws)
            states = sorted(r.state for r in records)
            assert states.count("running") <= 4
            return states == ["queued", "running", "running", "running", "running"] and records
        records = wait_for(four_running_one_queued)
        time.sleep(0.5)  # the queued job keeps waiting while the four hold their slots
        assert sorted(r.state for r in list_job_records(ws)[0]) == ["queued"] + ["running"] * 4
        assert sorted(r.slot for r in records if r.state == "running") == [0, 1, 2, 3]
        release.touch()
        outs = [p.communicate(timeout=30) for p in procs]
        assert [p.returncode for p in procs] == [0] * 5, outs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    records, _ = list_job_records(ws)
    assert all(r.state == "succeeded" for r in records)
    waited = max(records, key=lambda r: r.started_at)  # the job that was queued started last
    assert waited.started_at >= min(r.finished_at for r in records if r is not waited)
    # Replayed on the episode's own clock, every job goes queued -> running -> succeeded and
    # the four that held slots are seen running at once.
    workspace, events = episode_events(ws)
    replay = Replay(events, campaign_root=str(workspace.campaign_root), campaign=workspace.name,
                    worktree=str(workspace.worktree))
    jobs = [e for e in replay.events if e.kind == ev.JOB]
    states = {path: [e.data.state for e in jobs if e.path == path] for path in {e.path for e in jobs}}
    assert len(states) == 5 and all(seq == ["queued", "running", "succeeded"] for seq in states.values()), states
    most_running = 0
    for index in range(replay.total + 1):
        replay.seek_index(index)
        running = [j for j in replay.state().jobs if j.state == "running"]
        most_running = max(most_running, len(running))
        assert all(j.finished_at is None and j.exit_code is None for j in running)
    assert most_running == 4


def process_alive(pid: int) -> bool:
    """A process that exists and is not a zombie (its state in /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] not in (b"Z", b"X")


@pytest.fixture
def leftovers():
    """Pids a test started indirectly; killed at teardown should the code under test fail."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def pids_with(marker: str) -> list[int]:
    """Host pids of spawn_tree.py's live processes that carry ``marker`` in their command line."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            args = cmdline.split(b"\0")
            ours = len(args) > 2 and (args[1].endswith(b"spawn_tree.py") or b"time.sleep(60)" in args[2])
            if ours and marker.encode() in args and process_alive(int(entry)):
                found.append(int(entry))
    return found


def tree_pids(path: Path, leftovers: list[int]) -> list[int]:
    """Host pids of the job's running tree (two processes), recorded for the teardown."""
    wait_for(lambda: path.exists() and path.read_text().split())
    pids = wait_for(lambda: len(found := pids_with(str(path))) == 2 and found)
    leftovers.extend(pids)
    return pids


def assert_all_gone(record, pids, marker: Path):
    assert record.pgid is not None and group_members(record.pgid) == []
    assert not any(process_alive(pid) for pid in pids)
    assert pids_with(str(marker)) == []


def test_timeout_kills_the_whole_group_even_if_it_ignores_sigterm(ws, tmp_path, leftovers):
    pids_file = tmp_path / "pids"
    start = time.monotonic()
    proc = sandbox(ws, "--timeout", "1", "--", PY, str(FIXTURES / "spawn_tree.py"), str(pids_file), "stubborn")
    assert proc.returncode == 1 and time.monotonic() - start < 20
    record = only_record(ws)
    assert record.state == "timed_out" and "timed out" in record.message
    assert len(pids_file.read_text().split()) == 2  # the tree had started
    assert_all_gone(record, [], pids_file)


@pytest.mark.parametrize("how", ["jobs-cancel", "sigterm", "sigint"])
def test_cancel_kills_the_whole_group(ws, tmp_path, how, leftovers):
    pids_file = tmp_path / "pids"
    runner = subprocess.Popen(sandbox_argv("--", PY, str(FIXTURES / "spawn_tree.py"), str(pids_file)), cwd=ws,
                              env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pids = tree_pids(pids_file, leftovers)
        record = wait_for(lambda: (r := list_job_records(ws)[0]) and r[0].state == "running" and r[0].pgid and r[0])
        if how == "jobs-cancel":
            cancel = subprocess.run([PY, "-m", "console.cli", "jobs", "cancel", record.job_id, "--workspace", str(ws)],
                                    cwd=REPO, capture_output=True, text=True, timeout=30)
            assert cancel.returncode == 0, cancel.stderr
            assert cancel.stdout.split() == [record.job_id, "cancelled"]
        else:
            runner.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        runner.communicate(timeout=30)
        assert runner.returncode == 1
    finally:
        if runner.poll() is None:
            runner.kill()
    final = only_record(ws)
    assert final.state == "cancelled" and final.finished_at is not None
    assert final.exit_code == -signal.SIGTERM  # the command's own end, as its supervisor saw it
    assert_all_gone(final, pids, pids_file)


def test_a_runner_killed_outright_takes_its_job_with_it_and_the_record_says_lost(ws, tmp_path, leftovers):
    # The job used to run on, orphaned, with a record saying "running" forever; now the
    # supervisor sees its starter gone, ends the tree and marks the record lost.
    pids_file = tmp_path / "pids"
    runner = subprocess.Popen(sandbox_argv("--", PY, str(FIXTURES / "spawn_tree.py"), str(pids_file)), cwd=ws,
                              env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = tree_pids(pids_file, leftovers)
    record = wait_for(lambda: (r := list_job_records(ws)[0]) and r[0].pgid and r[0])
    runner.kill()
    runner.wait()
    path = ws / ".atrex_long_horizon" / "sandbox" / record.job_id / "job.json"
    assert read_job_record(path).value.state == "lost"  # at once, from the runner's absence
    wait_for(lambda: json.loads(path.read_text())["state"] == "lost")  # then written by the supervisor
    final = read_job_record(path).value
    assert final.terminal and final.finished_at is not None and "died" in final.message
    wait_for(lambda: not group_members(final.pgid), 5)  # the supervisor exits once the tree is gone
    assert_all_gone(final, pids, pids_file)
    assert not Path(final.raw["stage"]).exists()
    cancel = subprocess.run([PY, "-m", "console.cli", "jobs", "cancel", record.job_id, "--workspace", str(ws)],
                            cwd=REPO, capture_output=True, text=True, timeout=30)
    assert cancel.returncode == 1 and "already lost" in cancel.stderr


def test_ray_backend_without_ray_is_a_clear_error(ws):
    code = "import sys; sys.modules['ray'] = None; " + NO_ORJSON
    proc = subprocess.run([PY, "-c", code, str(TOOL), "--backend", "ray", "--", PY, "probe.py"], cwd=ws,
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "ray backend needs episcope-console[ray]" in proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs episcope-console[ray]")
def test_ray_backend_unreachable_cluster_means_retry_later(ws):
    proc = sandbox(ws, "--backend", "ray", "--", PY, "test_kernel.py", EPISCOPE_RAY_ADDRESS="http://127.0.0.1:9")
    assert proc.returncode == 75, proc.stderr
    record = only_record(ws)
    assert (record.state, record.backend, record.result_code, record.exit_code) == ("failed", "ray", 75, None)
    assert "127.0.0.1:9" in record.message


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs episcope[ray]")
def test_ray_backend_takes_the_address_flag_over_the_environment(ws):
    proc = sandbox(ws, "--backend", "ray", "--address", "http://127.0.0.1:10", "--", PY, "test_kernel.py",
                   EPISCOPE_RAY_ADDRESS="http://127.0.0.1:9")
    assert proc.returncode == 75, proc.stderr
    assert "127.0.0.1:10" in only_record(ws).message
