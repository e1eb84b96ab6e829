"""The operator's settings file: ``config.toml`` under the user config directory.

Only a ``[keymap]`` table for now, binding id = keys (comma-separated, Textual's key names)::

    [keymap]
    "job.benchmark_run" = "B"
    "app.help" = "f1,h"

A file that cannot be used changes nothing and yields one line saying why: a typo in a
settings file must never stop the console.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path


def load_keymap(path: Path, known_ids: Iterable[str]) -> tuple[dict[str, str], str | None]:
    """(binding id -> keys, a one-line warning or None). Entries naming an unknown id or
    holding anything but a non-empty string are left out and named in the warning."""
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except FileNotFoundError:
        return {}, None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return {}, f"default keys in use: {path} not read ({_one_line(exc)})"
    table = document.get("keymap", {})
    if not isinstance(table, dict):
        return {}, f"default keys in use: [keymap] in {path} is not a table"
    known = set(known_ids)
    keymap: dict[str, str] = {}
    ignored: list[str] = []
    for binding_id, keys in table.items():
        if binding_id in known and isinstance(keys, str) and keys.strip():
            keymap[binding_id] = keys.replace(" ", "")
        else:
            ignored.append(binding_id)
    if ignored:
        shown = ", ".join(repr(i) for i in ignored[:5]) + (" …" if len(ignored) > 5 else "")
        return keymap, f"keymap entries ignored: {shown} (unknown binding id or not a key string) in {path}"
    return keymap, None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
