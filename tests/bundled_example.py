"""The bundled example (examples/episodes/row_softmax-h200.tar.gz) as a state, for the layout
and snapshot tests: the archive as it opens (its last episode) or one episode's worktree."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.episode.session import Session
from console.episode.state import EpisodeState
from console.episode.workspace import resolve_workspace

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"


def bundled_state(cache_home: Path) -> EpisodeState:
    """The example scanned once, unpacked under ``cache_home`` (not the user's cache)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache_home))
        workspace = resolve_workspace(str(ARCHIVE))
        return Session(str(workspace.campaign_root), workspace=workspace).scan()


def episode_worktree(cache_home: Path, number: int) -> Path:
    """Episode ``number``'s worktree in the copy the example unpacks to under ``cache_home``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache_home))
        opened = resolve_workspace(str(ARCHIVE))
    (worktree,) = Path(opened.campaign_root).parent.glob(f".atrex_long_horizon_worktrees/{opened.name}/e{number:04d}-*")
    return worktree


def bundled_episode_state(cache_home: Path, number: int) -> EpisodeState:
    """Episode ``number`` of the example, opened from its worktree in the unpacked copy."""
    worktree = episode_worktree(cache_home, number)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache_home))
        return Session(str(worktree)).scan()
