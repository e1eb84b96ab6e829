"""A live-looking path that really leads into an unpacked archive copy opens as that archive,
read-only: what decides is where the places the resolution followed really lie (their real
paths), never what a file in the workspace says."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

from console.episode import archive as archive_module
from console.episode.workspace import resolve_workspace
from spine_helpers import git, make_campaign


def _unpacked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    campaign, worktree, _ = make_campaign(tmp_path / "origin")
    git(campaign, "worktree", "add", "-q", "-b", "atrex/long-e0002-00000000", str(worktree.parent / "e0002-00000000"))
    packed = tmp_path / "campaign.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(campaign, arcname=campaign.name)
        tar.add(worktree.parent, arcname=f".atrex_long_horizon_worktrees/{campaign.name}")
    return resolve_workspace(packed)


def test_a_worktree_copied_out_of_the_copy_opens_as_the_archive(tmp_path, monkeypatch):
    """``cp -a`` of the unpacked copy: the copied worktree's ``.git`` file still names the
    copy's git directory, so its campaign is the copy's; the worktree shown is the copy's
    worktree of the name given."""
    opened = _unpacked(tmp_path, monkeypatch)
    copy = opened.campaign_root.parent
    out = tmp_path / "copied"
    shutil.copytree(copy, out, symlinks=True)
    (out / archive_module.DONE_MARKER).unlink()
    first = out / ".atrex_long_horizon_worktrees" / opened.name / "e0001-abcdef12"

    workspace = resolve_workspace(first)

    assert workspace.archive == copy.resolve()
    assert workspace.campaign_root == opened.campaign_root.resolve()
    assert workspace.worktree == copy.resolve() / ".atrex_long_horizon_worktrees" / opened.name / "e0001-abcdef12"
    assert all(w.is_relative_to(copy.resolve()) for w in workspace.worktrees)


def test_a_live_campaign_whose_worktrees_directory_links_into_the_copy_is_the_archive(tmp_path, monkeypatch):
    opened = _unpacked(tmp_path, monkeypatch)
    copy = opened.campaign_root.parent
    live, _, _ = make_campaign(tmp_path / "live", name=opened.name)
    worktrees = live.parent / ".atrex_long_horizon_worktrees" / opened.name
    shutil.rmtree(worktrees)
    worktrees.symlink_to(copy / ".atrex_long_horizon_worktrees" / opened.name)

    workspace = resolve_workspace(live)

    assert workspace.archive == copy.resolve()
    assert workspace.campaign_root == opened.campaign_root.resolve()
    assert workspace.worktree is not None and workspace.worktree.is_relative_to(copy.resolve())
    # The same campaign with a worktrees directory of its own stays live.
    worktrees.unlink()
    assert resolve_workspace(live).archive is None


def test_a_live_campaign_whose_worktrees_root_links_into_the_copy_is_the_archive(tmp_path, monkeypatch):
    opened = _unpacked(tmp_path, monkeypatch)
    copy = opened.campaign_root.parent
    live, _, _ = make_campaign(tmp_path / "live", name=opened.name)
    root = live.parent / ".atrex_long_horizon_worktrees"
    shutil.rmtree(root)
    root.symlink_to(copy / ".atrex_long_horizon_worktrees")

    assert resolve_workspace(live).archive == copy.resolve()


def test_jobs_cancel_refuses_a_live_path_that_leads_into_the_copy(tmp_path, monkeypatch):
    opened = _unpacked(tmp_path, monkeypatch)
    copy = opened.campaign_root.parent
    out = tmp_path / "copied"
    shutil.copytree(copy, out, symlinks=True)
    first = out / ".atrex_long_horizon_worktrees" / opened.name / "e0001-abcdef12"
    done = subprocess.run([sys.executable, "-c", "from console.cli import main; raise SystemExit(main())", "jobs", "cancel", "x",
                           "--workspace", str(first)], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert done.returncode != 0 and "read-only" in done.stderr and done.stderr.count("\n") == 1, done.stderr
