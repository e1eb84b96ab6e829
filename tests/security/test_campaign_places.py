"""The campaign view reads places beyond the workspace shown: the profiles and job records of
the campaign's other worktrees, and the profiles of ended episodes' archived files. Each is
reached only through real directories: a symbolic link at such a place (``profiles -> /``)
would have episcope walk and read a foreign tree, so it is not followed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from spine_helpers import init_with_worktrees

ROOT = Path(__file__).resolve().parents[2]
AKA = ROOT / "tests" / "fixtures" / "aka"
SUMMARY = ROOT / "tests" / "fixtures" / "profiling" / "strided" / "sol" / "summary.txt"


def status(target: Path, tmp_path: Path) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "console.cli", "status", str(target), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def foreign_profiles(tmp_path: Path) -> Path:
    """A directory outside the campaign holding a readable profile."""
    profile = tmp_path / "foreign" / "p"
    profile.mkdir(parents=True)
    (profile / "summary.txt").write_text(SUMMARY.read_text())
    return tmp_path / "foreign"


def test_an_ended_episodes_profiles_link_is_not_followed(tmp_path):
    with tarfile.open(AKA / "campaign_idle.tar.gz") as archive:
        archive.extractall(tmp_path / "aka", filter="data")
    campaign = tmp_path / "aka" / "kernel_opt_softmax"
    archived = campaign / ".atrex_long_horizon" / "episodes" / "e0001" / "archive" / "worktree_files" / "profiles"
    assert archived.is_dir()
    os.rename(archived, archived.with_name("profiles.moved"))
    archived.symlink_to(foreign_profiles(tmp_path))
    doc = status(campaign, tmp_path)
    assert doc["profiles"] and not any("foreign" in p["dir"] or "/profiles/p" in p["dir"] for p in doc["profiles"])


def test_another_worktrees_profiles_link_is_not_followed(tmp_path):
    worktrees = init_with_worktrees(tmp_path, "e0001-aaaaaaaa", "e0002-bbbbbbbb")
    (worktrees / "e0001-aaaaaaaa" / "profiles").symlink_to(foreign_profiles(tmp_path))
    doc = status(tmp_path / "ws", tmp_path)
    assert doc["episode"]["worktree"].endswith("e0002-bbbbbbbb")  # e0001 is another, not shown, worktree
    assert doc["profiles"] == []
