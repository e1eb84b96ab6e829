"""Nothing a repository's config or hooks name ever runs, and reading never writes.

Each case plants commands (see hostile_git.py) in a real repository, proves with a plain
``git`` that the plant is live, then runs episcope's reading paths against it as real
subprocesses (``status --json``, ``events``, ``replay``) and in-process (the console's
session engine), and checks that no marker file appeared and ``.git/index`` kept its bytes
and mtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from hostile_git import fired, plain_git, plant

from console.episode.git_repo import head_commit, run_git
from console.episode.replay import episode_events
from console.episode.session import Session
from spine_helpers import git, make_campaign

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def env(tmp_path, monkeypatch):
    """The caches of this test's subprocesses and of the in-process engine alike."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state"),
            "PYTHONPATH": str(ROOT)}


def index_state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def read_everything(target: Path, env: dict) -> dict:
    """status --json and events as the operator runs them; then the console's engine and the
    replay of an episode never watched (which reads the git log)."""
    status = cli("status", str(target), "--json", env=env)
    assert status.returncode == 0, status.stderr
    events = cli("events", str(target), env=env)
    assert events.returncode == 0, events.stderr
    _, replayed = episode_events(target)
    assert replayed
    session = Session(target)
    state = session.scan()
    session.refresh()
    assert state.git is not None and state.git.head is not None, state.git
    return json.loads(status.stdout)


def test_planted_live_workspace_runs_nothing_and_keeps_its_index(tmp_path, env):
    campaign, worktree, _ = make_campaign(tmp_path / "ws")
    markers = tmp_path / "markers"
    plant(campaign, worktree, markers)
    gitdir = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    indexes = [campaign / ".git" / "index", gitdir / "index"]
    before = [index_state(p) for p in indexes]

    doc = read_everything(campaign, env)
    assert doc["git"]["error"] is None and "kernel.py" in doc["git"]["dirty_paths"]
    assert head_commit(worktree) == doc["git"]["head"]
    assert fired(markers) == []
    assert [index_state(p) for p in indexes] == before

    # the same repository under a plain git: the plant is live, so the checks above could fail
    plain_git(worktree, "status", "--porcelain")
    assert {"fsmonitor", "filter-clean"} <= set(fired(markers))
    assert [index_state(p) for p in indexes] != before  # and plain git status rewrites the index


def test_a_config_git_cannot_read_fails_fast_without_gitpython_reading_it(tmp_path, env):
    """``include.path = /dev/zero``: GitPython's own config parser would read it forever;
    git refuses it at once, and episcope asks git first."""
    campaign, worktree, _ = make_campaign(tmp_path / "ws")
    subprocess.run(["git", "config", "--file", str(campaign / ".git" / "config"), "include.path", "/dev/zero"], check=True)
    started = time.monotonic()
    status = cli("status", str(worktree), "--json", env=env)
    assert time.monotonic() - started < 30
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["git"] is None or doc["git"]["error"]


def test_hostile_archive_runs_nothing_and_touches_no_other_repository(tmp_path, env):
    campaign, worktree, _ = make_campaign(tmp_path / "origin")
    markers = tmp_path / "markers"
    plant(campaign, worktree, markers)
    (campaign / ".git" / "config").write_text((campaign / ".git" / "config").read_text()
                                              + f"[include]\n\tpath = {tmp_path / 'included'}\n[core]\n\tworktree = {tmp_path}\n")
    (tmp_path / "included").write_text(f"[core]\n\tfsmonitor = touch {markers / 'included'}\n")
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    other, _, _ = make_campaign(tmp_path / "other")  # a repository the copy must never lead into
    (admin / "commondir").write_text(f"{other / '.git'}\n")
    (campaign / ".git" / "objects" / "info" / "alternates").write_text(f"{other / '.git' / 'objects'}\n")
    archive = tmp_path / "hostile.tar.gz"
    worktrees = worktree.parent
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(campaign, arcname=campaign.name)
        tar.add(worktrees, arcname=f".atrex_long_horizon_worktrees/{campaign.name}")
    # The archive's worktree links name the original repository on this disk: the one a
    # `git worktree repair` from the copy would rewrite.
    (admin / "commondir").write_text("../..\n")
    (campaign / ".git" / "objects" / "info" / "alternates").unlink()
    link = worktree / ".git"
    originals = {p: p.read_bytes() for p in (link, admin / "gitdir", campaign / ".git" / "config")}

    doc = read_everything(archive, env)
    assert doc["git"]["error"] is None and doc["git"]["head"] == git(worktree, "rev-parse", "HEAD")
    assert fired(markers) == []
    assert {p: p.read_bytes() for p in originals} == originals
    assert git(tmp_path / "origin" / campaign.name, "worktree", "list", "--porcelain").count("prunable") == 0

    (copy,) = (tmp_path / "cache" / "episcope" / "archives").iterdir()
    config = run_git(copy, "config", "--file", str(copy / campaign.name / ".git" / "config"), "--list").stdout.decode()
    assert sorted(line.split("=")[0] for line in config.splitlines()) == [
        "core.bare", "core.filemode", "core.logallrefupdates", "core.repositoryformatversion"]
    assert not (copy / campaign.name / ".git" / "hooks").exists()
    assert not (copy / campaign.name / ".git" / "objects" / "info" / "alternates").exists()
    assert (copy / campaign.name / ".git" / "worktrees" / worktree.name / "commondir").read_text() == "../..\n"
    copied_link = (copy / ".atrex_long_horizon_worktrees" / campaign.name / worktree.name / ".git").read_text()
    assert copied_link.startswith(f"gitdir: {copy}/")
    # a user's own git in the copy sees the copy's links only, and runs nothing either
    assert str(copy) in plain_git(copy / campaign.name, "worktree", "list").stdout
    plain_git(copy / ".atrex_long_horizon_worktrees" / campaign.name / worktree.name, "status")
    assert fired(markers) == []
