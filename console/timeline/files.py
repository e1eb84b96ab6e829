"""Hashing, JSON bytes and appended lines with the standard library only (the GPU machine has no orjson).

Whole files are written through :func:`console.formats.plainjson.atomic_write_bytes`.
"""

from __future__ import annotations

import hashlib
import json
import os

from console.formats.plainjson import append_json_line


def sha256_file(path: str | os.PathLike) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=2) + "\n").encode()


def append_line(path: str | os.PathLike, obj) -> None:
    """Append one sorted-key JSON line with a single write on an O_APPEND descriptor."""
    append_json_line(path, obj)
