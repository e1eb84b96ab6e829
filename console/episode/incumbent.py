"""Which kernel is the incumbent, and what an ABBA compare from the console puts against it.

The incumbent commit is, in this order: the episode's base commit (what the supervisor
verifies a candidate against), the commit of the incumbent memory version (v0 before any
promotion), or the first commit of the worktree's history (what ``episcope init`` made, the
problem's naive kernel). The candidate is the worktree's HEAD, and only when ``kernel.py``
there is committed: ABBA compares commits, so an edit not yet committed would not be what
runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from .state import EpisodeState

if TYPE_CHECKING:
    from console.formats.memory import MemoryVersion


class AbbaPlan(NamedTuple):
    incumbent: str | None
    candidate: str | None
    missing: str | None  # why no compare can run (one line), None when it can


def candidate_base(base_commit: str | None, version_commit: str | None, first_commit: str | None) -> str | None:
    """The incumbent commit in the order above, from the episode's base commit, the incumbent
    memory version's commit and the first commit; the git rules check a candidate against it."""
    return base_commit or version_commit or first_commit


def incumbent_version_commit(versions: Iterable[MemoryVersion]) -> str | None:
    """The commit of the incumbent memory version: the incumbent curve's last point."""
    from console.formats.memory import incumbent_curve

    versions = tuple(versions)
    curve = incumbent_curve(versions)
    if not curve:
        return None
    version = next((v for v in versions if v.version == curve[-1][0]), None)
    return version.git_commit_hash if version is not None and version.git_commit_hash else None


def incumbent_commit(state: EpisodeState) -> str | None:
    git, active, journal = state.git, state.active_episode, state.journal
    base = (git.base_commit if git else None) or (active.base_commit if active else None) \
        or (journal.base_commit if journal else None)
    return candidate_base(base, incumbent_version_commit(state.versions), git.first_commit if git else None)


def abba_plan(state: EpisodeState) -> AbbaPlan:
    git = state.git
    incumbent = incumbent_commit(state)
    head = git.head if git else None
    if git is None:
        return AbbaPlan(incumbent, None, "worktree HEAD unknown (no git facts yet)")
    if git.error:
        return AbbaPlan(incumbent, None, f"git: {git.error}")
    if head is None:
        return AbbaPlan(incumbent, None, "worktree HEAD unknown (no commit yet)")
    if incumbent is None:
        return AbbaPlan(None, head, "no base commit known (no episode base, memory version or first commit)")
    if "kernel.py" in git.dirty_paths:
        return AbbaPlan(incumbent, head, "kernel.py has uncommitted changes: commit them to compare what you see")
    if head == incumbent:
        return AbbaPlan(incumbent, head, "no commit since the base commit")
    return AbbaPlan(incumbent, head, None)
