"""An archive's workspace comes from the copy the unpacker made, whatever repository happens
to hold the user cache: git is never asked where the copy's campaign is."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile

import pytest

from console.episode import archive as archive_module
from console.episode.archive import ArchiveError, open_archive
from console.episode.workspace import WorkspaceError, resolve_workspace
from spine_helpers import git, make_campaign


def add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_a_campaign_without_git_is_not_taken_for_the_repository_around_the_cache(tmp_path, monkeypatch):
    home = tmp_path / "home"  # a home directory under git, its cache inside it
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(home)], check=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    archive_module._opened.clear()
    packed = tmp_path / "plain.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        add_file(tar, "camp/.atrex_long_horizon/active_episode.json", b"{}")
        add_file(tar, "camp/kernel.py", b"print('k')\n")

    workspace = resolve_workspace(packed)

    assert workspace.campaign_root.name == "camp" and workspace.campaign_root.is_relative_to(home / ".cache")
    assert workspace.worktree is None and workspace.worktrees == ()
    assert workspace.archive == packed.resolve()


def test_the_active_worktree_of_a_copy_is_the_copys_own(tmp_path, monkeypatch):
    """``active_episode.json`` names the original worktree, which still exists on this disk:
    the copy shows its own worktree of that name (not the newest, not the original)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    campaign, worktree, _ = make_campaign(tmp_path / "origin")  # active: e0001-abcdef12
    git(campaign, "worktree", "add", "-q", "-b", "atrex/long-e0002-00000000", str(worktree.parent / "e0002-00000000"))
    packed = tmp_path / "campaign.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(campaign, arcname=campaign.name)
        tar.add(worktree.parent, arcname=f".atrex_long_horizon_worktrees/{campaign.name}")

    workspace = resolve_workspace(packed)

    copies = tmp_path / "cache" / "episcope" / "archives"
    assert [w.name for w in workspace.worktrees] == ["e0001-abcdef12", "e0002-00000000"]
    assert all(w.is_relative_to(copies) for w in workspace.worktrees)
    assert workspace.worktree == workspace.worktrees[0]
    assert resolve_workspace(campaign).worktree == worktree  # the live campaign: the recorded path


def add_directory(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    tar.addfile(info)


@pytest.mark.parametrize(("members", "why"), [
    ([("camp/kernel.py", b"a"), ("camp/kernel.py", b"b")], "duplicate archive member 'camp/kernel.py'"),
    ([("camp/kernel.py", b"a"), ("camp/./kernel.py", b"b")], "duplicate archive member 'camp/kernel.py'"),
    ([("camp/kernel.py", b"a"), ("camp/kernel.py/inner", b"b")],
     "archive member 'camp/kernel.py/inner' is inside 'camp/kernel.py', a file"),
    ([("camp/kernel.py/inner", b"b"), ("camp/kernel.py", b"a")],
     "archive member 'camp/kernel.py' is both a file and a directory"),
    ([("camp/x", None), ("camp/x", b"a")], "archive member 'camp/x' is both a file and a directory"),
])
def test_a_path_named_twice_is_refused_in_one_line_naming_the_member(tmp_path, monkeypatch, members, why):
    """``tar`` lets a later member replace an earlier one; the copy refuses such an archive
    and says which member, not which staging file (already deleted) could not be made."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    packed = tmp_path / "dup.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        add_file(tar, "camp/.atrex_long_horizon/active_episode.json", b"{}")
        for name, data in members:
            if data is None:
                add_directory(tar, name)
            else:
                add_file(tar, name, data)

    with pytest.raises(ArchiveError) as refused:
        open_archive(packed)

    assert str(refused.value) == f"{packed}: {why}"
    copies = tmp_path / "cache" / "episcope" / "archives"
    assert list(copies.iterdir()) == []  # nothing unpacked, no staging directory left


def test_a_directory_named_twice_is_no_duplicate(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    packed = tmp_path / "dirs.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        add_directory(tar, "camp")
        add_directory(tar, "camp/")
        add_file(tar, "camp/.atrex_long_horizon/active_episode.json", b"{}")

    assert open_archive(packed).name == "camp"


def test_status_of_an_archive_with_a_duplicate_member_is_one_line(tmp_path):
    packed = tmp_path / "dup.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        add_file(tar, "c/kernel.py", b"a")
        add_file(tar, "c/kernel.py", b"b")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", str(packed)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"episcope: {packed}: duplicate archive member 'c/kernel.py'\n"


def test_a_path_inside_a_copy_is_the_archive_whatever_it_holds(tmp_path, monkeypatch):
    """Any directory of an unpacked copy (campaign, worktree, a directory in them) is the
    archive, shown read-only; the worktree is the one the path is in. What says so is where
    the copy lies (episcope's archive cache, its marker written by the unpacker), never a
    file in the workspace: a live campaign holding a marker of its own stays live."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    campaign, worktree, _ = make_campaign(tmp_path / "origin")
    git(campaign, "worktree", "add", "-q", "-b", "atrex/long-e0002-00000000", str(worktree.parent / "e0002-00000000"))
    (worktree / "profiles").mkdir()
    packed = tmp_path / "campaign.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(campaign, arcname=campaign.name)
        tar.add(worktree.parent, arcname=f".atrex_long_horizon_worktrees/{campaign.name}")
    opened = resolve_workspace(packed)
    copy = opened.campaign_root.parent
    first, second = opened.worktrees

    for path, shown in [(copy, first), (opened.campaign_root, first), (opened.campaign_root / "memory", first),
                        (copy / ".atrex_long_horizon_worktrees", first), (second, second), (first / "profiles", first)]:
        workspace = resolve_workspace(path)
        assert workspace.archive == copy.resolve(), path
        assert (workspace.campaign_root, workspace.worktree, workspace.worktrees) == \
            (opened.campaign_root.resolve(), shown.resolve(), tuple(w.resolve() for w in opened.worktrees)), path

    # A marker planted in a live workspace (its campaign, its worktree, the directory above)
    # is only a file: the workspace stays live, found through git as before.
    for directory in (campaign, worktree, campaign.parent):
        (directory / archive_module.DONE_MARKER).write_text(archive_module.COPY_FORMAT, encoding="utf-8")
    assert resolve_workspace(campaign).archive is None and resolve_workspace(worktree).archive is None
    assert resolve_workspace(worktree).worktree == worktree


@pytest.mark.parametrize("damage", ["staging", "no marker", "older copy"])
def test_a_path_in_the_archive_cache_outside_a_complete_copy_is_refused(tmp_path, monkeypatch, damage):
    """Archive content that no finished unpack made safe (a staging directory, a copy whose
    marker is gone or was written by an older unpacker) is never opened, live or not."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    packed = tmp_path / "plain.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        add_file(tar, "camp/.atrex_long_horizon/active_episode.json", b"{}")
    copy = resolve_workspace(packed).campaign_root.parent
    marker = copy / archive_module.DONE_MARKER
    if damage == "staging":
        target = copy.parent / ".unpack-abc" / "camp"
        (target / ".atrex_long_horizon").mkdir(parents=True)
    else:
        target = copy / "camp"
        if damage == "no marker":
            marker.unlink()
        else:
            marker.write_text("episcope archive copy 1\n", encoding="utf-8")
    with pytest.raises(WorkspaceError, match="inside episcope's archive cache but in no complete unpacked copy"):
        resolve_workspace(target)
