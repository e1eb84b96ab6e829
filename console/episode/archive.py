"""Opening a packed episode (``.tar.gz`` / ``.tgz``) as if it were a campaign on disk.

A recorded campaign is a git repository with an episode worktree beside it, which cannot be
committed as files, so it travels as one archive (``examples/record_episode.py --archive``).
Here it is unpacked once into the user cache, ``$XDG_CACHE_HOME/episcope/archives/<sha256
prefix>/`` (reused while present), and ``git worktree repair`` points the worktree links
at that copy. Only regular files and directories with safe relative names are unpacked:
an archive holding links, devices, absolute paths or ``..`` is refused as a whole.

``archives/stamps.json`` remembers which copy an archive file (path, size, mtime, inode)
unpacked to, so opening it again hashes nothing: loading hashlib's OpenSSL and reading the
whole archive would cost more than the rest of a ``status``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from console.formats.plainjson import atomic_write_json

from .workspace import user_cache_dir

if TYPE_CHECKING:
    import tarfile

# hashlib, shutil, subprocess, tarfile and tempfile are imported where an archive is first
# unpacked: opening it again needs none of them.

WORKTREES_DIR = ".atrex_long_horizon_worktrees"
DONE_MARKER = ".episcope-unpacked"
STAMPS = "stamps.json"
_KEY_CHARS = 16

# (path, size, mtime_ns) -> campaign root, so a session re-resolving hashes nothing
_opened: dict[tuple[str, int, int], Path] = {}


class ArchiveError(Exception):
    """The archive cannot be opened (message is one line)."""


def cache_root() -> Path:
    return user_cache_dir("archives")


def _digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _copy_name(archive: Path, st: os.stat_result) -> str:
    """The unpacked copy's directory name: a prefix of the archive's sha256, remembered in
    ``stamps.json`` by the archive's stamp."""
    index_path = cache_root() / STAMPS
    stamp = f"{st.st_size} {st.st_mtime_ns} {st.st_ino} {archive}"
    try:
        index = json.loads(index_path.read_bytes())
    except (OSError, ValueError):
        index = {}
    if not isinstance(index, dict):
        index = {}
    name = index.get(stamp)
    if isinstance(name, str) and len(name) == _KEY_CHARS:
        return name
    name = index[stamp] = _digest(archive)[:_KEY_CHARS]
    try:
        atomic_write_json(index_path, index)
    except OSError:
        pass  # a read-only cache: the next open hashes again
    return name


def _check_member(member: tarfile.TarInfo) -> None:
    name = member.name
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or "\\" in name:
        raise ArchiveError(f"unsafe path in archive: {name!r}")
    if not (member.isfile() or member.isdir()):
        raise ArchiveError(f"archive member {name!r} is not a regular file or directory")


def _unpack(archive: Path, target: Path) -> None:
    import shutil
    import tarfile
    import tempfile

    if target.exists():
        shutil.rmtree(target)  # a half-made copy from an interrupted unpack
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                members = tar.getmembers()
                for member in members:
                    _check_member(member)
                for member in members:
                    dest = staging.joinpath(*PurePosixPath(member.name).parts)
                    if member.isdir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    with source, open(dest, "wb") as out:
                        shutil.copyfileobj(source, out)
                    os.chmod(dest, 0o755 if member.mode & 0o111 else 0o644)
                    os.utime(dest, (member.mtime, member.mtime))
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ArchiveError(f"{archive}: cannot unpack: {exc}") from None
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / DONE_MARKER).is_file():  # nobody else finished it first
                raise
            return
        _repair(target)
        (target / DONE_MARKER).write_text(str(archive) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _campaigns(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != WORKTREES_DIR and not p.name.startswith(".unpack-"))


def open_archive(path: str | os.PathLike) -> Path:
    """Unpack ``path`` (once) and return the campaign root inside the unpacked copy."""
    archive = Path(path).expanduser().resolve()
    try:
        st = archive.stat()
    except OSError as exc:
        raise ArchiveError(f"{archive}: {exc.strerror or exc}") from None
    key = (str(archive), st.st_size, st.st_mtime_ns)
    known = _opened.get(key)
    if known is not None and known.is_dir():
        return known
    target = cache_root() / _copy_name(archive, st)
    if not (target / DONE_MARKER).is_file():
        _unpack(archive, target)
    campaigns = [c for c in _campaigns(target) if (c / ".git").is_dir() or (c / ".atrex_long_horizon").is_dir()]
    if len(campaigns) != 1:
        raise ArchiveError(f"{archive}: expected one campaign directory, found {len(campaigns)}")
    _opened[key] = campaigns[0]
    return campaigns[0]


def _repair(target: Path) -> None:
    """``git worktree repair`` from each campaign, naming its worktrees in this copy, so the
    links in both directions (worktree .git file, campaign .git/worktrees/*/gitdir) lead here."""
    import subprocess

    for campaign in _campaigns(target):
        worktrees = target / WORKTREES_DIR / campaign.name
        if not (campaign / ".git").is_dir() or not worktrees.is_dir():
            continue
        paths = [str(p) for p in sorted(worktrees.iterdir()) if (p / ".git").is_file()]
        if paths:
            subprocess.run(["git", "-C", str(campaign), "worktree", "repair", *paths], capture_output=True, timeout=60)
