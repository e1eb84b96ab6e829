"""Opening a packed episode (``.tar.gz`` / ``.tgz``) as if it were a campaign on disk.

A recorded campaign is a git repository with an episode worktree beside it, which cannot be
committed as files, so it travels as one archive (``examples/record_episode.py --archive``).
Here it is unpacked once into the user cache, ``$XDG_CACHE_HOME/episcope/archives/<sha256
prefix>/``, and reused while that copy is complete.

An archive may come from anyone, so before anything is written ``formats.tar_check`` walks it
whole (gzip checksum to the end, bounded headers, members and bytes), and only regular files
and directories with safe relative names are unpacked: links, devices, absolute paths,
``..`` or a path named by two members refuse the archive as a whole. The copy is then made inert before it is used:

- every git config file in it (``.git/config``, ``config.worktree``, submodule configs) is
  rewritten keeping only ``KEPT_CONFIG``: the repository's format and layout, and remote and
  branch names. Nothing else survives (``core.fsmonitor``, ``core.worktree``, hooks paths,
  filter drivers, includes ...);
- hook directories are not unpacked;
- worktree links are written by hand inside the copy: each episode worktree's ``.git`` file
  and the matching ``.git/worktrees/<id>/gitdir`` point at each other, ``commondir`` at its
  campaign, and administrative entries with no worktree in the copy are dropped. ``git
  worktree repair`` is not run: it follows the links as it finds them, and those the archive
  brings may name another repository's worktree, which it would rewrite.

All of this happens in a staging directory that is renamed into place only when complete
(marker written); a refused or failed unpack leaves nothing in the cache. ``tarfile`` and the
check are imported only then: opening a copy already made (every run after the first) needs
neither.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

from console.formats.bounded_read import open_regular_file
from console.formats.plainjson import atomic_replacement
from console.formats.problems import FormatError
from console.paths import user_cache_dir

from .git_repo import GitUnavailable, config_file
from .locations import WORKTREES_DIR

if TYPE_CHECKING:
    import tarfile

    from console.formats.tar_check import TarLimits

DONE_MARKER = ".episcope-unpacked"
COPY_FORMAT = "episcope archive copy 2\n"  # a copy made by an older unpacker is made again
_KEY_CHARS = 16

# Config keys kept in an unpacked copy (git's lower-case spelling; <name> is any subsection).
KEPT_CONFIG = re.compile(
    r"core\.(repositoryformatversion|bare|filemode|symlinks|ignorecase|precomposeunicode|logallrefupdates)"
    r"|extensions\.(objectformat|compatobjectformat|refstorage|worktreeconfig)"
    r"|remote\.[^\n]+\.(url|fetch)"
    r"|branch\.[^\n]+\.(remote|merge)"
)
CONFIG_NAMES = frozenset({"config", "config.worktree"})

# (cache root, path, size, mtime_ns) -> campaign root, so a session re-resolving hashes
# nothing; the cache root is part of the key because it follows XDG_CACHE_HOME.
_opened: dict[tuple[str, str, int, int], Path] = {}


class ArchiveError(Exception):
    """The archive cannot be opened (message is one line)."""


def cache_root() -> Path:
    return user_cache_dir("archives")


def _check_member(member: tarfile.TarInfo) -> None:
    name = member.name
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or "\\" in name:
        raise ArchiveError(f"unsafe path in archive: {name!r}")
    if not (member.isfile() or member.isdir()):
        raise ArchiveError(f"archive member {name!r} is not a regular file or directory")


def _check_layout(members: list[tarfile.TarInfo]) -> None:
    """Each path in the archive names one thing: no member twice, none inside a file.

    ``tar`` lets a later member replace an earlier one of the same name; the copy refuses
    instead (every file is created, never overwritten), and says which member it is."""
    is_file: dict[tuple[str, ...], bool] = {}  # path parts -> a file (else a directory)
    for member in members:
        parts = PurePosixPath(member.name).parts
        for depth in range(1, len(parts)):
            if is_file.setdefault(parts[:depth], False):
                raise ArchiveError(f"archive member {member.name!r} is inside {'/'.join(parts[:depth])!r}, a file")
        known = is_file.get(parts)
        if known is None:
            is_file[parts] = member.isfile()
        elif known and member.isfile():
            raise ArchiveError(f"duplicate archive member {'/'.join(parts)!r}")
        elif known or member.isfile():
            raise ArchiveError(f"archive member {'/'.join(parts)!r} is both a file and a directory")


def _is_hook(parts: tuple[str, ...]) -> bool:
    """``<repo>/.git/hooks/...`` or a submodule's ``.git/modules/<name>/hooks/...``."""
    if ".git" not in parts:
        return False
    inside = parts[parts.index(".git") + 1:]
    if inside[:1] == ("hooks",):
        return True
    return inside[:1] == ("modules",) and "hooks" in inside[2:]


def _extract(archive: BinaryIO, staging: Path) -> None:
    """Unpack the checked archive (an open file, read from its start) into ``staging``."""
    import tarfile

    archive.seek(0)
    with tarfile.open(fileobj=archive, mode="r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            _check_member(member)
        _check_layout(members)
        for member in members:
            parts = PurePosixPath(member.name).parts
            if _is_hook(parts):
                continue
            dest = staging.joinpath(*parts)
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                raise ArchiveError(f"archive member {member.name!r} has no data")
            with source, open(dest, "xb") as out:
                shutil.copyfileobj(source, out)
            os.chmod(dest, 0o755 if member.mode & 0o111 else 0o644)
            os.utime(dest, (member.mtime, member.mtime))


def _git_configs(staging: Path) -> list[Path]:
    """Config files of every git directory (one holding ``HEAD``) in the copy."""
    return sorted(path for path in staging.rglob("config*")
                  if path.name in CONFIG_NAMES and path.is_file() and (path.parent / "HEAD").is_file())


def _keep_safe_config(path: Path) -> None:
    """Rewrite one git config file of the copy with only the keys of KEPT_CONFIG (git reads
    the old file and writes the new one: values keep git's own quoting)."""
    status, listed, _ = config_file(path, "--no-includes", "--list", "-z")
    kept = []
    if status == 0:  # a file git cannot parse keeps nothing
        for entry in listed.split(b"\0"):
            key, newline, value = entry.decode("utf-8", "surrogateescape").partition("\n")
            if newline and KEPT_CONFIG.fullmatch(key):
                kept.append((key, value))
    with atomic_replacement(path) as fresh:
        for key, value in kept:
            status, _, err = config_file(fresh, "--add", key, value)
            if status != 0:
                raise ArchiveError(f"cannot keep {key} of {path.name}: {' '.join(err.split())}")


def _campaigns(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != WORKTREES_DIR and not p.name.startswith(".unpack-"))


def _link_worktrees(staging: Path, target: Path) -> None:
    """Point each campaign's worktree links at the copy (``target`` once renamed): see the
    module docstring."""
    for campaign in _campaigns(staging):
        dotgit = campaign / ".git"
        if dotgit.is_file():
            dotgit.unlink()  # a campaign's repository is its own, never one elsewhere
            continue
        for elsewhere in ("commondir", "objects/info/alternates", "objects/info/http-alternates"):
            (dotgit / elsewhere).unlink(missing_ok=True)  # would lead git into another repository
        admin_root = dotgit / "worktrees"
        admins = {p.name: p for p in admin_root.iterdir() if p.is_dir()} if admin_root.is_dir() else {}
        linked = set()
        worktrees = staging / WORKTREES_DIR / campaign.name
        for worktree in sorted(worktrees.iterdir()) if worktrees.is_dir() else ():
            link = worktree / ".git"
            if not link.is_file():
                continue
            named = _linked_admin_name(link)
            if named not in admins or named in linked:
                link.unlink()  # links to nothing in this copy: a plain directory then
                continue
            linked.add(named)
            final_campaign = target / campaign.name
            final_worktree = target / WORKTREES_DIR / campaign.name / worktree.name
            link.write_text(f"gitdir: {final_campaign / '.git' / 'worktrees' / named}\n", encoding="utf-8")
            (admins[named] / "gitdir").write_text(f"{final_worktree / '.git'}\n", encoding="utf-8")
            (admins[named] / "commondir").write_text("../..\n", encoding="utf-8")
        for name, admin in admins.items():
            if name not in linked:
                shutil.rmtree(admin)


def _linked_admin_name(link: Path) -> str | None:
    """The ``.git/worktrees/<id>`` name a worktree's ``.git`` file names (as GitPython reads
    the file), whatever directory it was recorded under."""
    from git.repo.fun import find_worktree_git_dir

    named = find_worktree_git_dir(link)
    return PurePosixPath(named).name if named else None


def _unpack(archive: Path, handle: BinaryIO, target: Path, limits: TarLimits | None) -> None:
    """Unpack ``archive``, read through ``handle`` (the file opened once, so a file swapped in
    under its name meanwhile is never read), into ``target``."""
    import tarfile

    from console.formats.tar_check import TarLimits, TarRefused, check_tar_gz

    if target.exists():
        shutil.rmtree(target)  # a copy without its marker: an unpack that never finished
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    try:
        try:
            handle.seek(0)
            check_tar_gz(handle, limits or TarLimits())
            _extract(handle, staging)
            if os.path.lexists(staging / DONE_MARKER):
                raise ArchiveError(f"member {DONE_MARKER} is the name of episcope's own mark of a finished copy")
            for config in _git_configs(staging):
                _keep_safe_config(config)
            _link_worktrees(staging, target)
        except TarRefused as exc:
            raise ArchiveError(f"{archive}: refused: {exc}") from None
        except ArchiveError as exc:  # a member the copy refuses: named with the archive
            raise ArchiveError(f"{archive}: {exc}") from None
        except GitUnavailable as exc:
            raise ArchiveError(f"{archive}: cannot make the copy safe: {exc}") from None
        except (tarfile.TarError, EOFError, OSError, ValueError, OverflowError) as exc:
            raise ArchiveError(f"{archive}: cannot unpack: {' '.join(str(exc).split())}") from None
        (staging / DONE_MARKER).write_text(COPY_FORMAT, encoding="utf-8")
        try:
            os.rename(staging, target)
        except OSError as exc:
            if not _complete(target):  # else another process finished the same copy first
                raise ArchiveError(f"{target}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _complete(copy: Path) -> bool:
    try:
        return (copy / DONE_MARKER).read_text(encoding="utf-8") == COPY_FORMAT
    except OSError:
        return False


def open_archive(path: str | os.PathLike[str], limits: TarLimits | None = None) -> Path:
    """Unpack ``path`` (once) and return the campaign root inside the unpacked copy.

    ``limits`` bound what unpacking may read (default: ``tar_check``'s). Only a regular
    file is an archive: a FIFO or device under the name is refused unread (never waited on)."""
    archive = Path(path).expanduser().resolve()
    try:
        handle = open_regular_file(archive)
    except FormatError as exc:
        raise ArchiveError(f"{archive}: {exc}") from None
    except OSError as exc:
        raise ArchiveError(f"{archive}: {exc.strerror or exc}") from None
    with handle:
        try:
            st = os.fstat(handle.fileno())
            key = (str(cache_root()), str(archive), st.st_size, st.st_mtime_ns)
            known = _opened.get(key)
            if known is not None and known.is_dir():
                return known
            name = hashlib.file_digest(handle, "sha256").hexdigest()[:_KEY_CHARS]
        except OSError as exc:
            raise ArchiveError(f"{archive}: {exc.strerror or exc}") from None
        target = cache_root() / name
        if not _complete(target):
            _unpack(archive, handle, target, limits)
    campaigns = [c for c in _campaigns(target) if (c / ".git").is_dir() or (c / ".atrex_long_horizon").is_dir()]
    if len(campaigns) != 1:
        raise ArchiveError(f"{archive}: expected one campaign directory, found {len(campaigns)}")
    _opened[key] = campaigns[0]
    return campaigns[0]
