"""Git facts about an episode worktree, read with short-lived GitPython ``Repo`` objects.

A ``Repo`` holds file handles and caches; the console keeps running for hours, so each
refresh opens one, asks its questions and closes it again. Repositories are opened only
through ``git_repo.open_repo``: nothing the repository's config names ever runs, and no
question here writes to it (``.git/index`` included).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from msgspec.structs import replace

from console.formats.bounded_read import read_regular_file
from console.formats.problems import FormatError

from .git_repo import GIT_TIMEOUT_SECONDS, open_repo, read_errors
from .incumbent import candidate_base

if TYPE_CHECKING:
    import git

# kernel.py is one Python source file, tens of kilobytes; one larger than this is not read,
# on disk or in a commit (a 2 GB file, or /dev/zero behind a link, would be read to the end).
MAX_KERNEL_BYTES = 8 << 20

PROBE_MARKERS = (
    "atrex_timeline.cuh",
    "atrex::timeline::Recorder",
    "ATREX_TIMELINE_ENABLED",
    "cute.experimental.iket.",
)


def has_probe_marker(text: str) -> bool:
    return any(marker in text for marker in PROBE_MARKERS)


class GitFacts(msgspec.Struct, frozen=True):
    worktree: str
    head: str | None = None
    branch: str | None = None
    first_commit: str | None = None  # the oldest commit HEAD descends from (``episcope init``'s)
    dirty_paths: tuple[str, ...] = ()  # tracked files changed in the working tree or index
    untracked_paths: tuple[str, ...] = ()
    kernel_sha256: str | None = None  # of kernel.py as it is on disk now
    kernel_has_probe: bool | None = None
    kernel_error: str | None = None  # why kernel.py on disk could not be read (its sha256 is then None)
    base_commit: str | None = None  # the episode's (active episode or journal), when it names one
    # What the candidate is checked against (``incumbent.candidate_base``): a workspace without an
    # episode (``episcope init``'s) has no base commit, and the loop's rules still hold there.
    candidate_base: str | None = None
    candidate_commit: str | None = None
    candidate_changes: tuple[str, ...] | None = None  # paths changed from candidate_base to candidate
    candidate_has_probe: bool | None = None
    candidate_is_head: bool | None = None
    candidate_descends_from_base: bool | None = None
    error: str | None = None


def read_kernel(path: str | Path) -> tuple[bytes | None, str | None]:
    """(the bytes of kernel.py, None), or (None, why it was not read): only a regular file of
    at most MAX_KERNEL_BYTES is read, never a FIFO (which would block) or a device. A
    missing kernel.py is (None, None): nothing to explain."""
    try:
        return read_regular_file(path, MAX_KERNEL_BYTES), None
    except FileNotFoundError:
        return None, None
    except FormatError as exc:
        return None, f"kernel.py: {exc}"
    except OSError as exc:
        return None, f"kernel.py: {exc.strerror or exc}"


def _porcelain(repo: git.Repo) -> tuple[tuple[str, ...], tuple[str, ...]]:
    # Every output option is on the command line, so no status.* setting of the repository
    # changes what is read; submodules are not entered (each has a config of its own).
    out = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all",
                          kill_after_timeout=GIT_TIMEOUT_SECONDS)
    dirty, untracked = [], []
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code == "??":
            untracked.append(path)
            continue
        dirty.append(path)
        if code[0] in "RC":  # a rename carries its source path as the next entry
            i += 1
    return tuple(sorted(dirty)), tuple(sorted(untracked))


def read_git_facts(worktree: str | Path, *, base_commit: str | None = None, version_commit: str | None = None,
                   candidate_commit: str | None = None) -> GitFacts:
    """``base_commit``: the episode's; ``version_commit``: the incumbent memory version's
    (``incumbent.incumbent_version_commit``), the next choice of ``GitFacts.candidate_base``."""
    worktree = Path(worktree)
    kernel, kernel_error = read_kernel(worktree / "kernel.py")
    kernel_sha = hashlib.sha256(kernel).hexdigest() if kernel is not None else None
    kernel_probe = has_probe_marker(kernel.decode("utf-8", "replace")) if kernel is not None else None
    errors: tuple[type[Exception], ...] = (*read_errors(), OSError)
    try:
        with open_repo(worktree) as repo:
            try:
                head = repo.head.commit.hexsha
            except ValueError:
                head = None  # a repository without commits
            branch = None if repo.head.is_detached else repo.active_branch.name
            roots = repo.git.rev_list("--max-parents=0", "HEAD", kill_after_timeout=GIT_TIMEOUT_SECONDS) if head else ""
            first = roots.split()[-1] if roots else None
            dirty, untracked = _porcelain(repo)
            facts = GitFacts(
                worktree=str(worktree),
                head=head,
                branch=branch,
                first_commit=first,
                dirty_paths=dirty,
                untracked_paths=untracked,
                kernel_sha256=kernel_sha,
                kernel_has_probe=kernel_probe,
                kernel_error=kernel_error,
                base_commit=base_commit,
                candidate_base=candidate_base(base_commit, version_commit, first),
                candidate_commit=candidate_commit,
            )
            if candidate_commit:
                facts = replace(facts, **_candidate_facts(repo, head, facts.candidate_base, candidate_commit))
            return facts
    except errors as exc:
        message = " ".join(str(exc).split())[:300]
        return GitFacts(str(worktree), kernel_sha256=kernel_sha, kernel_has_probe=kernel_probe,
                        kernel_error=kernel_error, error=message)


def _candidate_facts(repo: git.Repo, head: str | None, base: str | None, candidate: str) -> dict[str, object]:
    facts: dict[str, object] = {}
    try:
        commit = repo.commit(candidate)
    except read_errors():
        return {"error": f"candidate commit {candidate[:12]} not found"}
    facts["candidate_is_head"] = head == commit.hexsha
    try:
        blob = commit.tree / "kernel.py"
        facts["candidate_has_probe"] = (has_probe_marker(blob.data_stream.read().decode("utf-8", "replace"))
                                        if blob.size <= MAX_KERNEL_BYTES else None)
    except KeyError:
        facts["candidate_has_probe"] = None
    if base:
        try:
            base_commit = repo.commit(base)  # its full id, never the name a file gave, goes to git
            facts["candidate_descends_from_base"] = repo.is_ancestor(base_commit, commit)
            changed = repo.git.diff("--no-ext-diff", "--no-textconv", "--name-only", base_commit.hexsha, commit.hexsha, "--",
                                    kill_after_timeout=GIT_TIMEOUT_SECONDS)
            facts["candidate_changes"] = tuple(sorted(p for p in changed.splitlines() if p))
        except read_errors():
            facts["candidate_descends_from_base"] = None
    return facts
