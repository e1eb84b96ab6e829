#!/usr/bin/env python3
"""Thin entry point: `timeline.py capture|decode|export|validate|measure|capture-iket|export-iket|profile-iket ...`
(see SKILL.md)."""

import sys
from pathlib import Path

try:
    import console.timeline.tool  # noqa: F401
except ModuleNotFoundError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from console.timeline.tool import main

if __name__ == "__main__":
    raise SystemExit(main())
