"""Where an episode's directories sit beside a campaign (episcope's own files: console/paths.py)."""

from __future__ import annotations

WORKTREES_DIR = ".atrex_long_horizon_worktrees"  # <parent>/<this>/<campaign>/<episode worktree>
RUNTIME_DIR = ".atrex_long_horizon"


# The name AKA gives an episode's worktree, eNNNN-<hex>, its number the group: at most nine
# digits (AKA writes four; a longer number is no episode of AKA's, and one past 64 bits could
# not even be printed as JSON).
EPISODE_WORKTREE_NAME = r"e([0-9]{1,9})(?:-[^/\\]*)?"
