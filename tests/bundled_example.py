"""The bundled example episode (examples/episodes/row_softmax-h200.tar.gz) as a state, for
the layout and snapshot tests."""

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
