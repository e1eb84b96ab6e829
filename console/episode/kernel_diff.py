"""What changed in ``kernel.py`` between two points of the episode, and what it did to latency.

The points (``DiffSide``) are the canonical memory versions that name a commit, the incumbent
commit when no version names it (``episcope init``'s first commit, a base commit), the
worktree's HEAD, and the working tree's ``kernel.py`` as it is on disk. ``kernel_diff`` reads
the unified diff through GitPython on the worktree's repository (``git_repo.open_repo``: the
repository's config runs nothing) and pairs it with each side's latency: the memory version's
own figure, else the newest evaluation of exactly that ``kernel.py`` (by its sha256).

It runs git, so the console calls it from a worker; the text it returns has its control
characters made visible, ready to be drawn as it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from .git_facts import MAX_KERNEL_BYTES, read_kernel
from .git_repo import GIT_TIMEOUT_SECONDS, open_repo, read_errors
from .incumbent import incumbent_commit
from .state import EpisodeState
from .text import visible, visible_lines

if TYPE_CHECKING:
    import git

    from console.formats.memory import MemoryVersion

KERNEL = "kernel.py"
WORKING_TREE = "working tree"


class DiffSide(msgspec.Struct, frozen=True):
    label: str  # "v1", "incumbent 20989be4", "first 51c057ca", "HEAD 567bfa08", "working tree"
    commit: str | None  # None: the working tree's kernel.py
    latency_us: float | None = None  # the memory version's own figure, when it is one


class KernelDiff(msgspec.Struct, frozen=True):
    old: DiffSide
    new: DiffSide
    text: str  # the unified diff of kernel.py, "" when both sides hold the same file
    old_latency_us: float | None
    new_latency_us: float | None
    change_pct: float | None  # new latency against old, in percent (negative: faster)
    error: str | None = None  # why no diff could be read (one line)

    @property
    def summary(self) -> str:
        """One line: the two sides and the latency change."""
        def figure(value: float | None) -> str:
            return "N/A" if value is None else f"{value:.3f}"

        change = "" if self.change_pct is None else f" ({self.change_pct:+.2f}%)"
        return (f"{self.old.label} → {self.new.label}   latency µs {figure(self.old_latency_us)} → "
                f"{figure(self.new_latency_us)}{change}")


def diff_sides(state: EpisodeState) -> tuple[DiffSide, ...]:
    """Every point a diff can start or end at, oldest first, the working tree last."""
    git = state.git
    sides: list[DiffSide] = []
    for version in state.versions:
        commit = version.git_commit_hash
        if commit is None or version.version is None or any(side.commit == commit for side in sides):
            continue
        latency = version.latency_us_geomean if version.latency_us_geomean is not None else version.latency_us
        sides.append(DiffSide(f"v{version.version}", commit, latency))
    named = {side.commit for side in sides}
    first = git.first_commit if git else None
    incumbent = incumbent_commit(state)
    if first and first not in named:
        sides.insert(0, DiffSide(f"{'incumbent' if first == incumbent else 'first'} {first[:8]}", first))
        named.add(first)
    if incumbent and incumbent not in named:
        sides.insert(1 if first else 0, DiffSide(f"incumbent {incumbent[:8]}", incumbent))
        named.add(incumbent)
    if git is not None and git.head and git.head not in named:
        sides.append(DiffSide(f"HEAD {git.head[:8]}", git.head))
    sides.append(DiffSide(WORKING_TREE, None))
    return tuple(sides)


def version_side(sides: tuple[DiffSide, ...], version: MemoryVersion) -> tuple[DiffSide | None, str | None]:
    """Where a memory version's ``kernel.py`` is: its own commit, else its episode's candidate
    commit (AKA writes a rejected version without a commit of its own), as a side of ``sides``
    or a new one; or None and why the version names neither."""
    name = f"v{version.version}" if version.version is not None else "the selected version"
    latency = version.latency_us_geomean if version.latency_us_geomean is not None else version.latency_us
    commit = version.git_commit_hash
    label = name
    if commit is None:
        commit = version.long_horizon.candidate_commit if version.long_horizon is not None else None
        label = f"{name} candidate {(commit or '')[:8]}"
    if commit is None:
        return None, f"{name} names no commit: git_commit_hash and long_horizon.candidate_commit are null"
    found = next((side for side in sides if side.commit == commit), None)
    return found or DiffSide(label, commit, latency), None


def default_pair(state: EpisodeState, sides: tuple[DiffSide, ...], chosen: DiffSide | None = None) -> tuple[DiffSide, DiffSide]:
    """(old, new) to show first: ``chosen`` (else the working tree) against the incumbent;
    the incumbent itself against the side before it."""
    incumbent = incumbent_commit(state)
    base = next((side for side in sides if side.commit == incumbent), sides[0])
    new = chosen or sides[-1]
    if new == base:
        index = sides.index(base)
        base = sides[index - 1] if index > 0 else base
    return base, new


def evaluated_latencies(state: EpisodeState) -> dict[str, float]:
    """kernel.py sha256 -> the latency of its newest evaluation that reports one."""
    out: dict[str, float] = {}
    for sha, records in state.evaluations_by_sha.items():
        for record in reversed(records):
            latency = record.result.latency_us_geomean if record.result is not None else None
            if latency is not None:
                out[sha] = latency
                break
    return out


def kernel_diff(worktree: str, old: DiffSide, new: DiffSide, evaluated: Mapping[str, float],
                sides: tuple[DiffSide, ...] = ()) -> KernelDiff:
    """The diff of kernel.py from ``old`` to ``new`` in the repository of ``worktree``.

    A side without a figure of its own takes the newest evaluation of its kernel.py, else the
    figure of a side in ``sides`` that holds the very same kernel.py (a commit that changed
    only memory files has its version's latency). Where no diff can be read (a version's
    commit that is not in this repository), ``error`` says why in one line and each side
    keeps its own figure."""
    try:
        with open_repo(worktree) as repo:
            old_id, new_id = _object_id(repo, old.commit), _object_id(repo, new.commit)
            missing = [side for side, found in ((old, old_id), (new, new_id)) if side.commit is not None and not found]
            if missing:
                return _without_diff(old, new, "; ".join(f"{_commit_name(side)} is not in this repository"
                                                         for side in missing))
            if old_id is None:  # the working tree against a commit: that diff, the other way round
                revisions = ["-R", new_id] if new_id else []
            else:
                revisions = [old_id, new_id] if new_id else [old_id]
            text = repo.git.diff("--no-ext-diff", "--no-textconv", "--no-color", *revisions, "--", KERNEL,
                                 kill_after_timeout=GIT_TIMEOUT_SECONDS) if revisions else ""
            old_sha = _kernel_sha(repo, worktree, old.commit)
            new_sha = _kernel_sha(repo, worktree, new.commit)
            measured = dict(evaluated)
            for side in sides:
                if side.latency_us is None or (side.commit is not None and not _has_commit(repo, side.commit)):
                    continue
                sha = _kernel_sha(repo, worktree, side.commit)
                if sha is not None:
                    measured.setdefault(sha, side.latency_us)
    except read_errors() as exc:
        return _without_diff(old, new, _git_reason(exc))
    old_latency = old.latency_us if old.latency_us is not None else measured.get(old_sha or "")
    new_latency = new.latency_us if new.latency_us is not None else measured.get(new_sha or "")
    return KernelDiff(old, new, visible_lines(text.expandtabs(4)), old_latency, new_latency,
                      _change(old_latency, new_latency))


def _change(old_latency: float | None, new_latency: float | None) -> float | None:
    if old_latency and new_latency is not None:
        return (new_latency / old_latency - 1.0) * 100.0
    return None


def _without_diff(old: DiffSide, new: DiffSide, error: str) -> KernelDiff:
    """No diff, each side with its own figure (a memory version's latency is known without git)."""
    return KernelDiff(old, new, "", old.latency_us, new.latency_us, _change(old.latency_us, new.latency_us),
                      error=visible(error))


def _has_commit(repo: git.Repo, commit: str) -> bool:
    return _object_id(repo, commit) is not None


def _object_id(repo: git.Repo, commit: str | None) -> str | None:
    """The full id of the commit ``commit`` names in ``repo`` (GitPython resolves it without
    running git), None when it names none. Only such an id goes on a git command line: the name
    comes from a file an agent wrote, and git would read ``--output=PATH`` (a ref may even be
    called that) as an option that writes a file."""
    if commit is None:
        return None
    try:
        return repo.commit(commit).hexsha
    except read_errors():
        return None


def _commit_name(side: DiffSide) -> str:
    """"v0's commit 25b89425", or the label itself where it names the commit ("HEAD 567bfa08")."""
    short = (side.commit or "")[:8]
    return side.label if short in side.label else f"{side.label}'s commit {short}"


def _git_reason(exc: Exception) -> str:
    """git's own complaint ("fatal: bad revision …") rather than GitPython's account of the
    whole command line; one line."""
    stderr = str(getattr(exc, "stderr", None) or "").strip()
    stderr = stderr.removeprefix("stderr: '").removesuffix("'").strip()  # how GitPython quotes it
    reason = stderr.splitlines()[-1] if stderr else " ".join(str(exc).split())
    return reason[:200]


def _kernel_sha(repo: git.Repo, worktree: str, commit: str | None) -> str | None:
    """sha256 of kernel.py at ``commit`` (None: on disk), the key evaluations are filed under."""
    if commit is None:  # read as the git facts read it: a regular file of bounded size only
        data, _ = read_kernel(f"{worktree}/{KERNEL}")
        return None if data is None else hashlib.sha256(data).hexdigest()
    try:
        blob = repo.commit(commit).tree / KERNEL
    except KeyError:
        return None
    return hashlib.sha256(blob.data_stream.read()).hexdigest() if blob.size <= MAX_KERNEL_BYTES else None
