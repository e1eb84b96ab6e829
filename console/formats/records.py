"""How the host-side readers turn decoded JSON into records: msgspec Structs.

Every record is a frozen ``msgspec.Struct`` whose fields default to ``None`` (unknown is
``None``, never 0) and whose types msgspec checks in :func:`convert`; unknown keys are
ignored (AKA adds fields between generations). A value of the wrong type becomes one
:class:`FormatError` line naming the field path:
``attempts[2].episode: Expected `int | null`, got `str```.

A memory version, written ``12`` or ``"v12"``, is read as :class:`Version`; a free-form
value shown as text (an experiment's structured ``evidence``) is
:class:`Rendered`: JSON text when it is not a string.

The GPU machine has no msgspec: what it must check itself of evaluator results, ABBA runs
and job records is in :mod:`gpu_side`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from .problems import FormatError, ReadResult, Unreadable, one_line

T = TypeVar("T")

_VERSION = re.compile(r"v?(\d{1,9})")
_PATH = re.compile(r" - at `\$(.*)`$")


class Version(int):
    """A memory version, written as ``12`` or ``"v12"``."""


class Rendered(str):
    """Free-form JSON shown as one line of text (objects as compact JSON)."""


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """The base of every host-side record: frozen, keyword-built, encoded by msgspec."""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON builtins; its reader parses them back to an equal record
        (replay re-parses recorded events)."""
        encoded: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_encode)
        return encoded


def _version_number(value: Any) -> int | None:
    """``12`` or ``"v12"`` -> 12; anything else -> ``None``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if isinstance(value, str):
        match = _VERSION.fullmatch(value.strip())
        if match:
            return int(match.group(1))
    return None


def _decode(kind: type, value: Any) -> Any:
    if kind is Version:
        number = _version_number(value)
        if number is None:
            brief = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise ValueError(f"{brief} is not a version (vN)")
        return Version(number)
    if kind is Rendered:
        if isinstance(value, str):
            return Rendered(value)
        return Rendered(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))
    raise NotImplementedError(kind)


def _encode(value: Any) -> Any:
    if isinstance(value, Version):
        return int(value)
    if isinstance(value, str):  # Rendered
        return str(value)
    raise NotImplementedError(type(value))


def convert(obj: Any, kind: type[T], where: str | None = None) -> T:
    """``obj`` as a ``kind`` record; :class:`FormatError` naming the field path if it is not one.

    ``where`` names ``obj`` inside its document (``"phase_tokens.phases.profile"``).
    """
    try:
        return msgspec.convert(obj, kind, dec_hook=_decode)
    except msgspec.ValidationError as exc:
        raise FormatError(field_error(str(exc), where)) from None
    except RecursionError:
        raise FormatError(f"{where or 'document'} is nested too deeply") from None


def field_error(message: str, where: str | None = None) -> str:
    """msgspec's ``Expected `int`, got `str` - at `$.a[2].b``` as ``a[2].b: Expected ...``."""
    match = _PATH.search(message)
    path = match.group(1) if match else ""
    text = message[: match.start()] if match else message
    path = path.removeprefix(".")
    if where:
        path = f"{where}.{path}" if path and not path.startswith("[") else f"{where}{path}"
    return one_line(f"{path}: {text}" if path else text)


def as_object(obj: Any, where: str | None = None) -> dict[str, Any]:
    """``obj``, to convert to a record that keeps the object as written in its ``raw``
    field: :class:`FormatError` naming its place (``document`` at the top) unless it is a
    JSON object; a ``raw`` key of its own is not the record's to read."""
    if not isinstance(obj, dict):
        kind = "array" if isinstance(obj, list) else type(obj).__name__
        raise FormatError(f"{where or 'document'}: Expected `object`, got `{kind}`")
    return {key: value for key, value in obj.items() if key != "raw"} if "raw" in obj else obj


def blank_to_none(record: msgspec.Struct, names: tuple[str, ...]) -> None:
    """AKA writes ``""`` for an unset commit or error: read it as absent (``None``).
    For ``__post_init__`` of a frozen record, as msgspec intends ``force_setattr``."""
    for name in names:
        if getattr(record, name) == "":
            msgspec.structs.force_setattr(record, name, None)


def read_document(path: str | os.PathLike[str], parse: Callable[[Any, Callable[[str], None]], T]) -> ReadResult[T]:
    """Read one JSON document; ``parse(obj, note)`` builds the value and calls ``note`` for
    each sub-record it had to skip, which comes back as a problem beside the value.

    Never raises: a path the OS refuses is reported like any unreadable document.
    """
    from .jsonio import read_json_document  # orjson: kept out of `episcope jobs`, which reads job records only

    notes: list[str] = []
    result: ReadResult[T] = read_json_document(path, lambda obj: parse(obj, notes.append))
    if result.value is None or not notes:
        return result
    return ReadResult(result.value, tuple(Unreadable(str(path), None, one_line(n)) for n in notes))
