"""A real git repository made hostile the way an agent or an archive author could: config
that names commands (fsmonitor, filter and diff drivers, pager, gpg), hooks for every event a
reading git could fire, and a tracked file whose stat no longer matches the index, so a
``git status`` that honours any of it would run it. Every command writes a marker file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HOOKS = ("post-index-change", "post-checkout", "pre-commit", "reference-transaction", "fsmonitor-watchman",
         "pre-auto-gc", "post-rewrite")


def touch(markers: Path, name: str) -> str:
    return f"touch {markers / name}"


def plain_git(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """git as a user would run it (nothing turned off), to prove the plant is live."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(cwd), *argv], capture_output=True, text=True, env=env, timeout=60)


def plant(repo: Path, worktree: Path, markers: Path) -> None:
    """Make ``repo`` (whose common config ``worktree`` shares) hostile; markers go to ``markers``."""
    markers.mkdir(parents=True, exist_ok=True)
    settings = {
        "core.fsmonitor": f"{touch(markers, 'fsmonitor')}; false",
        "core.pager": f"{touch(markers, 'pager')}; cat",
        "core.editor": touch(markers, "editor"),
        "filter.evil.clean": f"{touch(markers, 'filter-clean')}; cat",
        "filter.evil.smudge": f"{touch(markers, 'filter-smudge')}; cat",
        "diff.evil.textconv": f"sh -c '{touch(markers, 'textconv')}; cat \"$0\"'",
        "diff.external": touch(markers, "external-diff"),
        "gpg.program": touch(markers, "gpg"),
        "log.showSignature": "true",
        "core.sshCommand": touch(markers, "ssh"),
    }
    for key, value in settings.items():
        subprocess.run(["git", "config", "--file", str(repo / ".git" / "config"), key, value], check=True)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\n{touch(markers, 'hook-' + name)}\n")
        hook.chmod(0o755)
    for tree in {repo, worktree}:
        (tree / ".gitattributes").write_text("* filter=evil diff=evil\n")
        stale(tree / "kernel.py")


def stale(path: Path) -> None:
    """Same size, new content, old mtime: git must read the file (through any clean filter)
    to know whether it changed."""
    data = path.read_bytes()
    path.write_bytes(data[:-2] + b"#\n" if data.endswith(b"\n") else data[:-1] + b"#")
    os.utime(path, (1_000_000_000, 1_000_000_000))


def fired(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir()) if markers.is_dir() else []
