"""The recorded H200 episode (examples/episodes/) opened straight from its archive, and the
sandbox -> profile_nvidia.sh -> funnel path the recorder drives (no GPU needed)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import bundled_example
from console.episode.archive import DONE_MARKER, open_archive
from console.episode.workspace import WorkspaceError, resolve_workspace

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"
FAKE_NCU = ROOT / "tests" / "fixtures" / "episode" / "fake_ncu.sh"


def cli(*argv: str, env: dict, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture()
def cache_env(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    return env


def test_archive_is_small_and_safe():
    assert ARCHIVE.stat().st_size < 3 * 1024 * 1024
    with tarfile.open(ARCHIVE) as tar:
        names = [m.name for m in tar.getmembers()]
        assert all(m.isfile() or m.isdir() for m in tar.getmembers())
    assert not any(n.endswith(".ncu-rep") or n.startswith("/") or ".." in n.split("/") for n in names)
    assert "row_softmax/.git/HEAD" in names


def test_verifications_are_archived_where_aka_archives_them():
    """Each episode's ABBA directory sits under its record, episodes/eNNNN/verification_runtime/<uuid>/,
    and the verdict in attempt.json names it."""
    with tarfile.open(ARCHIVE) as tar:
        names = set(tar.getnames())
        for number in (1, 2):
            record = f"row_softmax/.atrex_long_horizon/episodes/e{number:04d}"
            artifact = json.loads(tar.extractfile(f"{record}/attempt.json").read())["verification"]["artifact"]
            (verification,) = {n.split("/")[5] for n in names if n.startswith(f"{record}/verification_runtime/")}
            assert artifact == f".atrex_long_horizon/episodes/e{number:04d}/verification_runtime/{verification}"
            assert {f"row_softmax/{artifact}/{name}" for name in ("request-0001.json", "result.json", "runs.jsonl")} <= names
    assert not any("verification_artifacts" in name.split("/") for name in names)


def episode_worktree(number: int, env: dict) -> Path:
    """The worktree of episode ``number`` inside the copy the archive unpacks to."""
    return bundled_example.episode_worktree(Path(env["XDG_CACHE_HOME"]), number)


def test_status_of_the_recorded_episode(cache_env):
    """The archive opens on its last episode: a timeline question about the incumbent, a trial
    that ABBA rejected, every one of its profiles taken on the kernel that is there now."""
    proc = cli("status", "--json", str(ARCHIVE), env=cache_env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["unreadable"] == [] and doc["alerts"] == []
    phases = doc["phases"]
    assert set(phases) == {"profile", "research", "planning", "implementation", "correctness", "benchmark", "recording"}
    assert phases["profile"]["intervals"] == 2 and phases["profile"]["wall_seconds"] > 10
    profiles = {p["dir"].split("profiles/episode_2/")[1]: p for p in doc["profiles"] if p["current"]}
    assert set(profiles) == {"trial2/sol/shape-4", "trial2/deep/shape-4"}
    assert all(p["kernels"] == ["row_softmax_online"] and p["bottleneck"] == "memory" for p in profiles.values())
    assert profiles["trial2/deep/shape-4"]["localize"]
    (receipt,) = doc["timeline"]
    assert receipt["evidence_class"] == "exploration" and receipt["workload_identity"] == "shape=1024x32768 seed=0"
    # newest first: episode 2's rejected trial, then episode 1's promotion
    assert [(a["gate"], a["runs"]) for a in doc["abba"]] == [("FAIL", 4), ("PASS", 4)]
    assert doc["abba"][1]["improvement_pct"] > 90 and doc["abba"][0]["improvement_pct"] < 0
    versions = {v["version"]: v for v in doc["versions"]}
    assert set(versions) == {0, 1}  # the rejected trial made no version
    assert versions[0]["measurement_subject"] == "incumbent" and versions[1]["measurement_subject"] == "candidate"
    assert versions[1]["accepted"] is True and versions[1]["latency_us_geomean"] < versions[0]["latency_us_geomean"]
    assert doc["incumbent"]["version"] == 1
    assert doc["episode"]["number"] == 2 and doc["episode"]["handoff"] == "candidate_ready"
    assert doc["episode"]["head"] == doc["episode"]["candidate_commit"]
    assert doc["sandbox"]["failed"] == 0 and doc["sandbox"]["succeeded"] == 5
    # the campaign's history: both episodes read from where AKA archives them, nothing unknown but tokens
    history = {e["episode"]: e for e in doc["episodes"]}
    assert [(history[n]["source"], history[n]["gate"], history[n]["accepted"]) for n in (1, 2)] == [
        ("archived", "PASS", True), ("archived", "FAIL", False)]
    for record in history.values():
        assert record["telemetry_events"] > 0 and record["evaluations"] == 2 and record["handoff"] == "candidate_ready"
        assert record["unknown"] == {"tokens": "the attempt records no tokens"}
    assert history[1]["sandbox"]["succeeded"] == 16 and history[2]["sandbox"]["succeeded"] == 5


def test_status_of_the_first_episode_shows_the_whole_funnel(cache_env):
    """Episode 1 narrowed the naive kernel down the funnel: survey of every shape, sol of the
    two slowest, deep --source of the slowest with LOCALIZE hints; then the trial's sol. No
    input generator anywhere (the driver profiles only the kernel's own launches)."""
    proc = cli("status", "--json", str(episode_worktree(1, cache_env)), env=cache_env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["unreadable"] == [] and doc["episode"]["number"] == 1
    profiles = {p["dir"].split("profiles/episode_1/")[1]: p for p in doc["profiles"] if p["current"]}
    assert {k for k in profiles if k.startswith("survey/")} == {f"survey/shape-{i}" for i in range(10)}
    assert {k for k in profiles if k.startswith("sol/")} == {"sol/shape-4", "sol/shape-2"}
    assert {k for p in profiles.values() for k in p["kernels"]} == {"row_softmax_naive", "row_softmax_regs"}
    deep = profiles["deep/shape-4"]
    assert deep["kernels"] == ["row_softmax_naive"] and deep["bottleneck"] == "memory"
    assert "low-sm-utilization" in deep["symptoms"] and "analysis/source_metrics_line_run.txt" in deep["localize"]
    trial = profiles["trial1/sol/shape-4"]
    assert trial["kernels"] == ["row_softmax_regs"] and trial["symptoms"] == ["memory-bound"]
    # the naive kernel's funnel describes the kernel before the change: said once, as a warning
    (alert,) = doc["alerts"]
    assert alert["code"] == "stale_profile" and alert["message"].startswith("13 profiles were taken on kernel.py")
    assert doc["sandbox"]["failed"] == 0 and doc["sandbox"]["succeeded"] == 16


def test_jobs_of_the_recorded_episode(cache_env):
    """A reviewer lists the archive's sandbox jobs the way status reads it."""
    proc = cli("jobs", "--json", str(ARCHIVE), env=cache_env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    jobs = doc["jobs"]
    assert doc["unreadable"] == [] and len(jobs) == 5 and {job["state"] for job in jobs} == {"succeeded"}
    assert {job["kind"] for job in jobs} == {"dev", "profile", "run"}  # dev: the timeline capture
    first = json.loads(cli("jobs", "--json", str(episode_worktree(1, cache_env)), env=cache_env).stdout)["jobs"]
    assert len(first) == 16 and {job["state"] for job in first} == {"succeeded"}
    missing = cli("jobs", str(ARCHIVE.with_name("missing.tar.gz")), env=cache_env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_unpacked_once_and_worktree_linked(cache_env, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", cache_env["XDG_CACHE_HOME"])
    campaign = open_archive(ARCHIVE)
    marker = campaign.parent / DONE_MARKER
    stamp = marker.stat().st_mtime_ns
    listed = subprocess.run(["git", "-C", str(campaign), "worktree", "list", "--porcelain"], capture_output=True, text=True).stdout
    worktree = resolve_workspace(ARCHIVE).worktree
    assert worktree is not None and f"worktree {worktree}" in listed and "prunable" not in listed
    common = subprocess.run(["git", "-C", str(worktree), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            capture_output=True, text=True).stdout.strip()
    assert common == str(campaign / ".git")
    # a second process opens the same copy without unpacking again
    proc = cli("status", str(ARCHIVE), env=cache_env)
    assert proc.returncode == 0, proc.stderr
    assert marker.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("member", ["link", "../escape.txt", "/abs.txt"])
def test_unsafe_archives_are_refused(tmp_path, monkeypatch, member):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("camp/kernel.py")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x=1"))
        evil = tarfile.TarInfo(member if member != "link" else "camp/link")
        if member == "link":
            evil.type, evil.linkname = tarfile.SYMTYPE, "/etc/passwd"
        else:
            evil.size = 1
        tar.addfile(evil, None if member == "link" else io.BytesIO(b"x"))
    with pytest.raises(WorkspaceError, match="unsafe path|not a regular file"):
        resolve_workspace(bad)
    assert not any((tmp_path / "cache").rglob("kernel.py"))
    assert not (tmp_path / "escape.txt").exists()


def test_sandbox_profile_runs_the_funnel_and_syncs_outputs(tmp_path):
    from console.commands.init import create_workspace

    ws = create_workspace(tmp_path / "ws", "row_softmax")
    env = {**os.environ, "NCU": str(FAKE_NCU), "PYTHONPATH": ".", "PROFILE_ITERS": "1"}
    out = "profiles/episode_1/deep/shape-4"
    argv = [sys.executable, str(ROOT / "tools" / "sandbox.py"), "--workspace", str(ws), "--kind", "profile",
            "--profile-level", "deep", "--kernel-regex", "^row_softmax_naive$", "--",
            "bash", "tools/profile_nvidia.sh", "profile_driver.py", "--output-dir", out, "--launch-count", "1", "--source"]
    # run from the repository root: the relative PYTHONPATH must still find the console package
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("[sandbox] PROFILE_JSON="))
    profile = json.loads(line.split("=", 1)[1])
    assert profile["level"] == "deep" and profile["dominant_kernel"] == "row_softmax_naive"
    assert profile["kernel_sha256"] is not None
    # The synced copy is the job's record, as AKA's sandbox writes it; the line carries the bare profile.
    record = json.loads((ws / out / "gateway_profile.json").read_text())
    assert record == {"job_id": record["job_id"], "kind": "profile", "status": "succeeded", "result": profile, "error": None}
    assert (ws / ".atrex_long_horizon" / "sandbox" / record["job_id"] / "job.json").is_file()
    summary = (ws / out / "summary.txt").read_text()
    assert "Pattern C [high]: uncoalesced-loads" in summary and (ws / out / "analysis" / "source_metrics_line_run.txt").is_file()
    assert not (ws / out / "ncu.ncu-rep").exists() and not (ws / out / "ncu_source.ncu-rep").exists()
    assert "not synced: profiles/episode_1/deep/shape-4/ncu.ncu-rep" in proc.stderr


def test_each_cache_directory_gets_its_own_copy(tmp_path, monkeypatch):
    """Opening the same archive under another XDG_CACHE_HOME unpacks it there: a copy opened
    earlier in the process (which that cache's owner may have changed) is never handed out."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "one"))
    first = open_archive(ARCHIVE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "two"))
    second = open_archive(ARCHIVE)
    assert first.is_relative_to(tmp_path / "one") and second.is_relative_to(tmp_path / "two")
    assert open_archive(ARCHIVE) == second
