"""The repository files GitPython reads in this process, checked before it reads them.

git itself runs as a child process under a timeout (``git_repo``), but GitPython opens some
repository files with a plain ``open()`` in episcope's own process: the ``.git`` file of a
linked worktree, ``HEAD``, ``commondir``, the config, the loose ref ``HEAD`` leads to and
``packed-refs`` (the index and ``info/exclude``, which every ``git status`` reads, are
checked with them, so a FIFO there does not cost that timeout). A FIFO there blocks that
``open()`` forever, and ``/dev/zero`` or a 3 GB ``HEAD`` is read until memory runs out. So
before any ``Repo`` is opened each of them must be, by ``lstat``, a regular file of a sane
size, or absent where git allows that. A symbolic link is refused too: git never writes
one there, and GitPython would follow it out of the repository.

A check and the read that follows are two steps, so a file swapped in between is still
read; an agent racing its own repository gains nothing more than a wrong answer, since
every file read here is bounded by ``read_regular_file`` (never blocks, never reads past
its limit).

Standard library only, like ``git_repo``.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

from console.formats.bounded_read import kind_of, read_regular_file
from console.formats.problems import FormatError

# HEAD, commondir, a loose ref and a worktree's .git file each hold one line: a
# path or a ref name (at most a few hundred bytes), or an object id.
LINE_FILE_BYTES = 64 << 10
# An episode repository's config is a dozen lines; packed-refs lists each of its few
# dozen refs on one line.
CONFIG_BYTES = 1 << 20
PACKED_REFS_BYTES = 16 << 20
# The index lists every tracked file (about 100 bytes each); git status reads it, and
# info/exclude, every time.
INDEX_BYTES = 256 << 20
# git follows at most this many symbolic refs (refs/files-backend.c SYMREF_MAXDEPTH).
SYMREF_DEPTH = 5
# Where git and GitPython look up a ref given by a short name, in this order (git's
# ref_rev_parse_rules, GitPython's name_to_object); GitPython keeps the per-worktree ones in
# the work tree's own git directory, every other in the common one.
REF_LOOKUP = ("%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD")
PER_WORKTREE_REFS = frozenset({"HEAD", "ORIG_HEAD", "FETCH_HEAD"})
FULL_OBJECT_ID = re.compile(r"[0-9a-fA-F]{40}")
# Revision syntax past a plain name: a parent (^, ~), a reflog entry (@{…}), a path (:), a
# pattern; none is ever a commit an episode file should name.
REVISION_SYNTAX = re.compile(r"[\^~:@{}\\?*\[\s\x00-\x1f\x7f]|\.\.|^\.|/\.|^/")


class UnsafeRepository(Exception):
    """A repository file GitPython would read is not a bounded regular file (one line)."""


class GitDirs(NamedTuple):
    git_dir: Path  # the work tree's own git directory
    common_dir: Path  # the repository's shared one (the same for a main work tree)


def checked_git_dirs(top: str | os.PathLike[str], *, objects: bool = False) -> GitDirs | None:
    """The git directories of the work tree ``top``, once every file GitPython would read
    from them is a bounded regular file; None when ``top`` has no ``.git`` entry.
    ``objects``: the object store is checked too (:func:`_check_objects`), before git runs.

    Raises UnsafeRepository otherwise. Whether the result is a repository at all (objects,
    refs, a valid HEAD) is left to GitPython and git."""
    top = Path(top)
    dotgit = top / ".git"
    try:
        info = os.lstat(dotgit)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafeRepository(f".git: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        git_dir = dotgit
    elif stat.S_ISREG(info.st_mode):
        git_dir = _linked_git_dir(top, dotgit)
    else:
        raise UnsafeRepository(f".git is {kind_of(info.st_mode)}, not a directory or a regular file")
    if not git_dir.is_dir():
        raise UnsafeRepository(f".git names {_shown(git_dir, top)}, which is not a directory")
    head = _read_required(git_dir / "HEAD", top)
    common = _read_line_file(git_dir / "commondir", top)
    common_dir = git_dir if common is None else git_dir / os.fsdecode(common.rstrip(b"\r\n"))
    _check(common_dir / "config", CONFIG_BYTES, top)
    _check(common_dir / "packed-refs", PACKED_REFS_BYTES, top)
    _check(git_dir / "index", INDEX_BYTES, top)
    _check(common_dir / "info" / "exclude", CONFIG_BYTES, top)
    _check_ref_chain(head, common_dir, top)
    if objects:
        _check_objects(common_dir / "objects", top)
    return GitDirs(git_dir, common_dir)


def _check_objects(objects: Path, top: Path) -> None:
    """Raises UnsafeRepository when anything in the object store (loose objects, packs,
    ``info/``) is neither a directory nor a regular file. git opens these files to answer
    almost any question, and a FIFO among them blocks it: GitPython's long-lived
    ``cat-file`` and ``merge-base`` run without a timeout. The walk reads directory entries
    only (no stat per file: a repository holds thousands of loose objects), three levels
    deep, as deep as git writes (``info/commit-graphs/<file>``)."""
    pending = [(objects, 0)]
    while pending:
        directory, depth = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False) and depth < 2:
                        pending.append((Path(entry.path), depth + 1))
                    elif not entry.is_file(follow_symlinks=False):
                        kind = kind_of(entry.stat(follow_symlinks=False).st_mode)
                        raise UnsafeRepository(f"{_shown(Path(entry.path), top)} is {kind}, not a regular file")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UnsafeRepository(f"{_shown(directory, top)}: {exc.strerror}") from None


def check_revision(dirs: GitDirs, top: str | os.PathLike[str], name: str) -> None:
    """Raises UnsafeRepository unless resolving ``name``, a commit named by a workspace file,
    reads only bounded regular files.

    A full object id reads none. Any other name must be a plain ref name (a short id is one
    too: git and GitPython try it as a ref first), and every file it would be looked up in
    must be a bounded regular file, or absent, or a directory (skipped as git skips it)."""
    if FULL_OBJECT_ID.fullmatch(name):
        return
    if not name or REVISION_SYNTAX.search(name):
        raise UnsafeRepository(f"{name!r} is neither a commit id nor a ref name")
    top = Path(top)
    for rule in REF_LOOKUP:
        ref = rule % name
        path = (dirs.git_dir if ref in PER_WORKTREE_REFS else dirs.common_dir) / ref
        if path.is_dir() and not path.is_symlink():
            continue
        content = _read_line_file(path, top)
        if content is not None:
            _check_ref_chain(content, dirs.common_dir, top)


def _linked_git_dir(top: Path, dotgit: Path) -> Path:
    """Where a ``.git`` file (``gitdir: <path>``, a linked worktree's) points."""
    content = os.fsdecode(_read_required(dotgit, top)).rstrip("\r\n")
    if not content.startswith("gitdir: "):
        raise UnsafeRepository(".git is a file that does not name a git directory")
    return top / content.removeprefix("gitdir: ")


def _check_ref_chain(head: bytes, common_dir: Path, top: Path) -> None:
    """The loose refs GitPython reads to resolve HEAD (``ref: refs/heads/<b>``, and on if
    that one is symbolic too). GitPython refuses a ref name that leaves ``refs/`` itself;
    every one it reads lives in the common directory."""
    content = head
    for _ in range(SYMREF_DEPTH):
        if not content.startswith(b"ref:"):
            return
        name = os.fsdecode(content[4:].strip())
        if not name.startswith("refs/") or ".." in name.split("/"):
            return  # not a ref GitPython would open; it reports HEAD as invalid
        found = _read_line_file(common_dir / name, top)
        if found is None:
            return  # packed, or no commit yet: packed-refs is checked already
        content = found


def _read_line_file(path: Path, top: Path, *, required: bool = False) -> bytes | None:
    if not _check(path, LINE_FILE_BYTES, top, required=required):
        return None
    try:
        return read_regular_file(path, LINE_FILE_BYTES)
    except FileNotFoundError:
        return None
    except (FormatError, OSError) as exc:  # replaced since the check
        raise UnsafeRepository(f"{_shown(path, top)}: {exc}") from None


def _read_required(path: Path, top: Path) -> bytes:
    content = _read_line_file(path, top, required=True)
    if content is None:  # removed between the check and the read
        raise UnsafeRepository(f"{_shown(path, top)} is missing")
    return content


def _check(path: Path, limit: int, top: Path, *, required: bool = False) -> bool:
    """Whether ``path`` exists; raises UnsafeRepository unless it is a regular file of at
    most ``limit`` bytes (or absent, when not ``required``)."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        if required:
            raise UnsafeRepository(f"{_shown(path, top)} is missing") from None
        return False
    except OSError as exc:
        raise UnsafeRepository(f"{_shown(path, top)}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeRepository(f"{_shown(path, top)} is {kind_of(info.st_mode)}, not a regular file")
    if info.st_size > limit:
        raise UnsafeRepository(f"{_shown(path, top)} is {info.st_size} bytes, more than the {limit} allowed")
    return True


def _shown(path: Path, top: Path) -> str:
    """``path`` as the message names it: relative to the work tree where it lies within."""
    try:
        return os.fspath(Path(os.path.normpath(path)).relative_to(top))
    except ValueError:
        return os.path.normpath(path)
