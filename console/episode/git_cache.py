"""Git facts remembered across runs, so a cold ``episcope status`` can skip GitPython.

Importing GitPython and asking git costs more than everything else a ``status`` of a small
episode does. The facts depend only on the refs, the index and the files git looks at, so
they are cached under the user's cache directory with a stamp of exactly those: HEAD and
the branch ref it names, the index, and (path, size, mtime, inode) of every file of the
worktree except the runtime directories episcope itself reads (.atrex_long_horizon/,
profiles/), which a workspace keeps out of git. Cached facts are used only while the stamp
still matches in full.

One file per worktree directory, named by its device and inode; it repeats the worktree's
path and the base and candidate commits the facts were read for, and holds facts only for
the stamp it records. Nothing here is hashed: loading hashlib's OpenSSL alone would cost
more than the whole cached lookup.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.formats.plainjson import atomic_write_json

from .git_facts import GitFacts, read_git_facts
from .workspace import common_dir, git_dir, user_cache_dir

UNSTAMPED_DIRS = frozenset({".git", ".atrex_long_horizon", "profiles", "__pycache__", ".venv", "node_modules"})


def cache_dir() -> Path:
    return user_cache_dir("git-facts")


def _stat(path: Path) -> list | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def refs_stamp(root: Path) -> list | None:
    """HEAD, the ref it names, packed refs and the index: what moves when git state moves."""
    gitdir = git_dir(root)
    if gitdir is None:
        return None
    try:
        head = (gitdir / "HEAD").read_text().strip()
    except OSError:
        return None
    common = common_dir(gitdir)
    stamp = [head, _stat(gitdir / "index"), _stat(common / "packed-refs")]
    if head.startswith("ref:"):
        stamp.append(_stat(common / head[4:].strip()))
    return stamp


def tree_stamp(root: Path) -> list:
    """[path, size, mtime, inode] of every file git may look at, paths relative to ``root``."""
    prefix = len(str(root)) + 1
    entries = []
    stack = [str(root)]
    while stack:
        directory = stack.pop()
        try:
            found = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in found:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in UNSTAMPED_DIRS:
                    stack.append(entry.path)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            entries.append([entry.path[prefix:], st.st_size, st.st_mtime_ns, st.st_ino])
    return entries


def _file_name(root: Path) -> str | None:
    try:
        st = root.stat()
    except OSError:
        return None
    return f"{st.st_dev:x}-{st.st_ino:x}.json"


def cached_git_facts(root: Path, *, base_commit: str | None, candidate_commit: str | None) -> GitFacts:
    refs = refs_stamp(root)
    name = None if refs is None else _file_name(root)
    if name is None:
        return read_git_facts(root, base_commit=base_commit, candidate_commit=candidate_commit)
    subject = [str(root), base_commit, candidate_commit]
    stamp = [refs, tree_stamp(root)]
    path = cache_dir() / name
    try:
        cached = json.loads(path.read_bytes())
        if cached["subject"] == subject and cached["stamp"] == stamp:
            return from_json(cached["facts"])
    except (OSError, ValueError, TypeError, KeyError):
        pass
    facts = read_git_facts(root, base_commit=base_commit, candidate_commit=candidate_commit)
    if facts.error is None:
        after = refs_stamp(root)
        if after is not None and after[:1] + after[2:] == refs[:1] + refs[2:] and tree_stamp(root) == stamp[1]:
            # git status refreshes the index's stat cache as it looks, which moves the index
            # stamp; nothing else moved meanwhile, so the facts are kept under the stamp as
            # it is now (else the next run would ask git once more).
            stamp = [after, stamp[1]]
        try:
            atomic_write_json(path, {"subject": subject, "stamp": stamp, "facts": facts.to_json()}, indent=False)
        except OSError:
            pass  # a read-only home is no reason to fail; the next run asks git again
    return facts


def from_json(data: dict) -> GitFacts:
    fields = dict(data)
    for name in ("dirty_paths", "untracked_paths"):
        fields[name] = tuple(fields.get(name) or ())
    if fields.get("candidate_changes") is not None:
        fields["candidate_changes"] = tuple(fields["candidate_changes"])
    return GitFacts(**fields)
