"""Finding the campaign and the episode worktree from whatever path the operator gives.

The operator may point at a campaign root or at an episode worktree. From a worktree, the
git common directory (what ``git rev-parse --git-common-dir`` prints) leads back to the
campaign's ``.git``; from a campaign, episode worktrees live under
``<parent>/.atrex_long_horizon_worktrees/<campaign>/``.

The repository is found with GitPython, through ``git_repo`` like every other git use. A
packed episode (``.tar.gz``) is opened as the copy ``archive`` made of it, whose layout is
known: git is not asked where that campaign is, and the worktree shown is one of the copy's.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from console.formats import jsonio
from console.formats.problems import Unreadable

from .archive import ArchiveError, open_archive
from .git_repo import find_repo
from .locations import RUNTIME_DIR, WORKTREES_DIR

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


class WorkspaceError(Exception):
    """The path is not something episcope can show (message is one line)."""


class Workspace(msgspec.Struct, frozen=True):
    campaign_root: Path
    worktree: Path | None  # the episode worktree shown (active, else newest), if any
    worktrees: tuple[Path, ...]  # every episode worktree of the campaign
    archive: Path | None = None  # the packed episode this is an unpacked copy of (shown read-only)
    # What choosing the worktree ignored, reported with the document that said it (an
    # active_episode.json naming a directory that is not one of the campaign's worktrees).
    problems: tuple[Unreadable, ...] = ()

    @property
    def name(self) -> str:
        return self.campaign_root.name

    @property
    def roots(self) -> tuple[Path, ...]:
        """Directories whose files belong to this episode (campaign first)."""
        if self.worktree is None or self.worktree == self.campaign_root:
            return (self.campaign_root,)
        return (self.campaign_root, self.worktree)

    @property
    def episode_root(self) -> Path:
        """Where the agent works: the worktree when there is one, else the campaign."""
        return self.worktree or self.campaign_root


def list_worktrees(campaign_root: Path) -> tuple[Path, ...]:
    """The campaign's episode worktrees: the directories (not links, which could lead
    anywhere) holding a ``.git`` under ``<parent>/.atrex_long_horizon_worktrees/<campaign>/``."""
    base = campaign_root.parent / WORKTREES_DIR / campaign_root.name
    try:
        entries = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink() and (p / ".git").exists()]
    except OSError:
        return ()
    return tuple(sorted(entries))


def _active_episode_path(campaign_root: Path) -> Path:
    return campaign_root / RUNTIME_DIR / "active_episode.json"


def _active_worktree(campaign_root: Path) -> Path | None:
    """The worktree ``active_episode.json`` names, as it was written (it may not exist here)."""
    result = jsonio.read_json_document(
        _active_episode_path(campaign_root), lambda obj: obj if isinstance(obj, dict) else None
    )
    worktree = result.value.get("worktree") if result.value else None
    return Path(worktree) if isinstance(worktree, str) and worktree else None


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a packed episode: a regular file (a directory is a workspace
    whatever its name) called ``*.tar.gz`` or ``*.tgz``."""
    return str(path).endswith(ARCHIVE_SUFFIXES) and Path(path).expanduser().is_file()


def resolve_workspace(path: str | os.PathLike[str] | None = None) -> Workspace:
    if path is not None and is_archive(path):
        # A packed episode: unpacked once into the user cache, then opened as its campaign.
        try:
            unpacked = open_archive(path)
        except ArchiveError as exc:
            raise WorkspaceError(str(exc)) from None
        return msgspec.structs.replace(_unpacked_workspace(unpacked), archive=Path(path).expanduser().resolve())
    start = Path(path or ".").expanduser()
    if not start.exists():
        raise WorkspaceError(f"{start}: no such directory")
    if start.is_file():
        raise WorkspaceError(f"{start} is a file, not a workspace or a .tar.gz archive")
    if not start.is_dir():  # a FIFO, a socket, a device: never opened
        raise WorkspaceError(f"{start}: not a directory or a .tar.gz archive")
    start = start.resolve()
    paths = find_repo(start)
    if paths is None:
        # Not a git repo: still show what the files say (an archive copy, a fixture).
        if (start / RUNTIME_DIR).is_dir() or (start / "memory").is_dir() or (start / "kernel.py").exists():
            return Workspace(start, None, ())
        raise WorkspaceError(f"{start}: not an episode workspace (no git repo, no {RUNTIME_DIR}/, no memory/)")
    top, common = paths.top, paths.common_dir
    campaign_root = common.parent if common.name == ".git" else top
    if top != campaign_root:
        return Workspace(campaign_root, top, tuple(sorted(set(list_worktrees(campaign_root)) | {top})))
    return _campaign_workspace(campaign_root)


def _campaign_workspace(campaign_root: Path) -> Workspace:
    """A campaign root and the episode worktree to show: the active one, else the newest.

    The active one is taken only where it is one of the campaign's own worktrees (or the
    campaign itself): ``active_episode.json`` is written in the workspace, and every file of
    the directory it names would be read, git run there and the console's actions aimed at
    it (``/`` takes the whole filesystem). Any other directory is ignored, and reported as
    a problem of that file."""
    worktrees = list_worktrees(campaign_root)
    recorded = _active_worktree(campaign_root)
    worktree: Path | None = None
    problems: tuple[Unreadable, ...] = ()
    if recorded is not None and recorded.is_dir():
        known = {w.resolve(): w for w in (campaign_root, *worktrees)}
        worktree = known.get(recorded.resolve())
        if worktree is None:
            path = str(_active_episode_path(campaign_root))
            problems = (Unreadable(path, None, f"worktree {recorded} is not one of this campaign's worktrees "
                                               f"(under {WORKTREES_DIR}/{campaign_root.name}/): ignored"),)
    if worktree is None and worktrees:
        worktree = worktrees[-1]  # eNNNN-<hex> names sort by episode number
    return Workspace(campaign_root, worktree, worktrees, problems=problems)


def _unpacked_workspace(campaign_root: Path) -> Workspace:
    """The campaign of an unpacked archive. The unpacker leaves it holding its own
    repository, if any (a ``.git`` directory leading nowhere else), so git need not be asked
    where that is, and no repository around the user cache is ever taken for it.

    ``active_episode.json`` names the active worktree where the episode ran; in the copy
    that is the copy's worktree of the same name, never the recorded path itself (which may
    exist on this machine: the original worktree, or any directory the archive names)."""
    if not (campaign_root / ".git").is_dir():
        return Workspace(campaign_root, None, ())
    worktrees = list_worktrees(campaign_root)
    recorded = _active_worktree(campaign_root)
    worktree = next((w for w in worktrees if recorded is not None and w.name == recorded.name), None)
    if worktree is None and worktrees:
        worktree = worktrees[-1]
    return Workspace(campaign_root, worktree, worktrees)
