"""Git facts remembered across runs, so a cold ``episcope status`` can skip GitPython.

Importing GitPython and asking git costs more than everything else a ``status`` of a small
episode does. The facts depend only on the refs, the index and the files git looks at, so
they are cached under the user's cache directory keyed by a stamp of exactly those: HEAD
and the branch ref it names, the index, and (path, size, mtime, inode) of every file of
the worktree except the runtime directories episcope itself reads (.atrex_long_horizon/,
profiles/), which a workspace keeps out of git. Any change to those makes a new key.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from console.formats.plainjson import atomic_write_json

from .git_facts import GitFacts, read_git_facts
from .workspace import user_cache_dir

UNSTAMPED_DIRS = frozenset({".git", ".atrex_long_horizon", "profiles", "__pycache__", ".venv", "node_modules"})


def cache_dir() -> Path:
    return user_cache_dir("git-facts")


def _gitdir(root: Path) -> Path | None:
    dotgit = root / ".git"
    if dotgit.is_dir():
        return dotgit
    try:
        text = dotgit.read_text().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text.split(":", 1)[1].strip())
    return gitdir if gitdir.is_absolute() else (root / gitdir).resolve()


def _stat(path: Path) -> list | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def refs_stamp(root: Path) -> list | None:
    """HEAD, the ref it names, packed refs and the index: what moves when git state moves."""
    gitdir = _gitdir(root)
    if gitdir is None:
        return None
    try:
        head = (gitdir / "HEAD").read_text().strip()
    except OSError:
        return None
    common = gitdir
    try:
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    except OSError:
        pass
    stamp = [head, _stat(gitdir / "index"), _stat(common / "packed-refs")]
    if head.startswith("ref:"):
        stamp.append(_stat(common / head[4:].strip()))
    return stamp


def tree_stamp(root: Path) -> str:
    digest = hashlib.sha256()
    stack = [str(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in UNSTAMPED_DIRS:
                    stack.append(entry.path)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            digest.update(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    return digest.hexdigest()


def cached_git_facts(root: Path, *, base_commit: str | None, candidate_commit: str | None) -> GitFacts:
    refs = refs_stamp(root)
    if refs is None:
        return read_git_facts(root, base_commit=base_commit, candidate_commit=candidate_commit)
    key_source = json.dumps([str(root), base_commit, candidate_commit, refs, tree_stamp(root)])
    path = cache_dir() / (hashlib.sha256(key_source.encode()).hexdigest()[:40] + ".json")
    try:
        return from_json(json.loads(path.read_bytes()))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    facts = read_git_facts(root, base_commit=base_commit, candidate_commit=candidate_commit)
    if facts.error is None:
        try:
            atomic_write_json(path, facts.to_json())
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
