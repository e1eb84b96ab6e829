"""The workspace kit: the tools, skills and problems ``episcope init`` copies into a workspace
and the console's keyboard actions run.

The repository keeps them at its top (``tools/``, ``skills/``, ``examples/problems/``), where
the episode loop and a ``PYTHONPATH=.`` checkout on a GPU machine expect them. ``console/kit/``
holds links to those directories and a built wheel holds copies of them as package data, so a
checkout, an editable install and a regular install all find the kit at one place inside the
package.
"""

from __future__ import annotations

from pathlib import Path

AREAS = ("tools", "skills", "problems")


def kit_path(area: str) -> Path:
    """The directory of one kit area: ``tools``, ``skills`` or ``problems``."""
    if area not in AREAS:
        raise ValueError(f"unknown kit area {area!r} (one of {', '.join(AREAS)})")
    # pip installs a wheel unpacked, so the kit is a real directory beside this file that a
    # tool can run from and copytree can copy (a zipped install could do neither).
    return Path(__file__).parent / area
