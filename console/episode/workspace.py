"""Finding the campaign and the episode worktree from whatever path the operator gives.

The operator may point at a campaign root or at an episode worktree. From a worktree, the
git common directory (what ``git rev-parse --git-common-dir`` prints) leads back to the
campaign's ``.git``; from a campaign, episode worktrees live under
``<parent>/.atrex_long_horizon_worktrees/<campaign>/``.

The repository is found with GitPython, through ``git_repo`` like every other git use. A
packed episode (``.tar.gz``) is opened as the copy ``archive`` made of it, whose layout is
known: git is not asked where that campaign is, and the worktree shown is one of the copy's.

A path inside such a copy (its campaign, a worktree, any directory under them) is an archive
too, shown read-only like the ``.tar.gz``. What says so is where the path is, never what it
holds: a copy is a directory directly under episcope's own archive cache (``archive.cache_root``,
the user cache directory platformdirs names) holding the marker the unpacker writes last
(``archive.DONE_MARKER``, reading ``archive.COPY_FORMAT``). Everything below that directory
came out of the archive, and a file of the marker's name anywhere else (planted in a
workspace, or packed into an archive) counts for nothing: no workspace can make itself read-only, or
live, by its content.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from console.formats import jsonio
from console.formats.problems import Unreadable

from .archive import COPY_FORMAT, DONE_MARKER, ArchiveError, cache_root, open_archive
from .git_repo import find_repo
from .locations import EPISODE_WORKTREE_NAME, RUNTIME_DIR, WORKTREES_DIR

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


class WorkspaceError(Exception):
    """The path is not something episcope can show (message is one line)."""


class Workspace(msgspec.Struct, frozen=True):
    campaign_root: Path
    worktree: Path | None  # the episode worktree shown (active, else newest), if any
    worktrees: tuple[Path, ...]  # every episode worktree of the campaign
    # The packed episode this is an unpacked copy of (shown read-only): the .tar.gz it was
    # opened from, or the copy's directory when a path inside the copy was given.
    archive: Path | None = None
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


_EPISODE_WORKTREE = re.compile(EPISODE_WORKTREE_NAME)


def newest_worktree(worktrees: tuple[Path, ...]) -> Path:
    """The worktree of the newest episode: the highest number among those named after an
    episode; a worktree named otherwise (``scratch``) only when none is."""
    numbered = [(int(found.group(1)), worktree) for worktree in worktrees
                if (found := _EPISODE_WORKTREE.fullmatch(worktree.name))]
    return max(numbered)[1] if numbered else worktrees[-1]


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
    copy = archive_copy(start)
    if copy is not None:
        return msgspec.structs.replace(_workspace_in_copy(copy, start), archive=copy)
    paths = find_repo(start)
    laid_out = _layout_campaign(start) if paths is None and os.path.lexists(start / ".git") else None
    if laid_out is not None:
        # A worktree git is not let read (its config includes a device, a FIFO stands for a
        # file): its git facts say why (an alert), and the layout still names its campaign.
        layout = Workspace(laid_out, start, tuple(sorted(set(list_worktrees(laid_out)) | {start})))
        return _archive_reached(layout, ()) or layout
    if paths is None:
        # Not a git repo: still show what the files say (a fixture, a campaign copied without git).
        if (start / RUNTIME_DIR).is_dir() or (start / "memory").is_dir() or (start / "kernel.py").exists():
            return Workspace(start, None, ())
        raise WorkspaceError(f"{start}: not an episode workspace (no git repo, no {RUNTIME_DIR}/, no memory/)")
    top, common = paths.top, paths.common_dir
    campaign_root = common.parent if common.name == ".git" else top
    if top != campaign_root:
        workspace = Workspace(campaign_root, top, tuple(sorted(set(list_worktrees(campaign_root)) | {top})))
    else:
        workspace = _campaign_workspace(campaign_root)
    return _archive_reached(workspace, (paths.git_dir, common)) or workspace


def _layout_campaign(top: Path) -> Path | None:
    """The campaign ``<parent>/<campaign>`` of a directory under
    ``<parent>/.atrex_long_horizon_worktrees/<campaign>/``, where that directory exists."""
    campaign_root = top.parent.parent.parent / top.parent.name
    if top.parent.parent.name == WORKTREES_DIR and campaign_root.is_dir() and not campaign_root.is_symlink():
        return campaign_root
    return None


def _archive_reached(workspace: Workspace, git_dirs: tuple[Path, ...]) -> Workspace | None:
    """The archive a workspace found by git really lies in, opened as ``_workspace_in_copy``
    opens a path inside it; None when it lies in none.

    A path given outside the copy can still lead into it: a worktree copied out of it keeps
    the ``.git`` file naming the copy's git directory, and a campaign's worktrees directory
    may be a link to the copy's. Every place the resolution followed is judged by its real
    path (links resolved), never by what its files say."""
    base = workspace.campaign_root.parent / WORKTREES_DIR / workspace.campaign_root.name
    followed = (workspace.campaign_root, *git_dirs, base, *workspace.worktrees)
    for place in followed:
        real = Path(os.path.realpath(place))
        copy = archive_copy(real)
        if copy is None:
            continue
        reached = _workspace_in_copy(copy, real)
        named = copy / WORKTREES_DIR / reached.name / workspace.episode_root.name
        if workspace.worktree is not None and named in reached.worktrees:
            reached = msgspec.structs.replace(reached, worktree=named)  # the worktree of the name given
        return msgspec.structs.replace(reached, archive=copy)
    return None


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
        worktree = newest_worktree(worktrees)
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
        worktree = newest_worktree(worktrees)
    return Workspace(campaign_root, worktree, worktrees)


def archive_copy(path: Path) -> Path | None:
    """The unpacked archive copy that ``path`` (resolved) lies in, if any (see the module
    docstring). A path in the archive cache that is in no complete copy of this episcope's
    making (a staging directory, an unpack cut short, a copy an older unpacker made) is
    refused: it is an archive's content that nobody has made safe to open."""
    root = cache_root().resolve()
    if not path.is_relative_to(root) or path == root:
        return None
    copy = root / path.relative_to(root).parts[0]
    marker = copy / DONE_MARKER
    try:
        complete = marker.is_file() and marker.read_text(encoding="utf-8") == COPY_FORMAT
    except (OSError, UnicodeDecodeError):
        complete = False
    if not complete:
        raise WorkspaceError(f"{path}: inside episcope's archive cache but in no complete unpacked copy; "
                             "open the .tar.gz archive itself")
    return copy


def _workspace_in_copy(copy: Path, path: Path) -> Workspace:
    """The workspace of ``path`` inside the unpacked copy ``copy``, read from the copy's
    layout (``<campaign>/...`` or ``.atrex_long_horizon_worktrees/<campaign>/<worktree>/...``)
    as ``_unpacked_workspace`` reads it: the worktree ``path`` is in, else the one the
    campaign shows."""
    parts = path.relative_to(copy).parts
    in_worktrees = parts[:1] == (WORKTREES_DIR,)
    if in_worktrees:
        parts = parts[1:]
    if not parts:  # the copy itself, or its worktrees directory: the copy's one campaign
        campaigns = [c for c in copy.iterdir() if c.name != WORKTREES_DIR and c.is_dir() and not c.is_symlink()
                     and ((c / ".git").is_dir() or (c / RUNTIME_DIR).is_dir())]
        if len(campaigns) != 1:
            raise WorkspaceError(f"{path}: expected one campaign directory in the unpacked copy, found {len(campaigns)}")
        return _unpacked_workspace(campaigns[0])
    if not (copy / parts[0]).is_dir():  # a worktrees directory naming no campaign of the copy
        raise WorkspaceError(f"{path}: the unpacked copy has no campaign {parts[0]!r}")
    workspace = _unpacked_workspace(copy / parts[0])
    if in_worktrees and len(parts) > 1:
        named = copy / WORKTREES_DIR / parts[0] / parts[1]
        if named in workspace.worktrees:
            return msgspec.structs.replace(workspace, worktree=named)
    return workspace
