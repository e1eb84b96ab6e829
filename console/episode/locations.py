"""Where an episode's directories sit beside a campaign (episcope's own files: console/paths.py)."""

from __future__ import annotations

WORKTREES_DIR = ".atrex_long_horizon_worktrees"  # <parent>/<this>/<campaign>/<episode worktree>
RUNTIME_DIR = ".atrex_long_horizon"


