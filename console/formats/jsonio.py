"""Fast JSON in and out (orjson), for the host side.

Files are written through :mod:`plainjson` (``atomic_write_bytes``, ``append_line``), the one
implementation of episcope's two safe ways of writing, which also runs where orjson is absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson

from . import plainjson
from .problems import ReadResult

T = TypeVar("T")

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # Python's json module writes NaN/Infinity (a kernel that produces NaNs gives
        # ``max_abs_err: NaN``) and strict JSON refuses them; such a document gets a second
        # chance with the standard library, anything else keeps orjson's error.
        value = _loads_nonfinite(data)
        if value is _NOT_DECODED:
            raise exc
        return value


_NOT_DECODED = object()


def _loads_nonfinite(data: bytes | str) -> Any:
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return _NOT_DECODED
    if "NaN" not in text and "Infinity" not in text:
        return _NOT_DECODED
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_DECODED


def dumps(obj: Any, *, sort_keys: bool = True, indent: bool = False) -> bytes:
    option = orjson.OPT_SERIALIZE_NUMPY
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    return orjson.dumps(obj, option=option, default=_default)


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    to_json = getattr(obj, "to_json", None)
    if callable(to_json):
        return to_json()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def read_json_document(path: str | os.PathLike[str], parse: Callable[[Any], T]) -> ReadResult[T]:
    """``plainjson.read_json_document`` with orjson decoding (see there for the rules)."""
    return plainjson.read_json_document(path, parse, decode=loads)
