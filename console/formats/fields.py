"""Typed access to decoded JSON objects, shared by the document readers.

Every accessor returns ``None`` for an absent (or ``null``) field, never a default such as 0,
and raises :class:`FormatError` naming the field when the value has the wrong JSON type.
Extra keys are never an error: AKA adds fields between generations.

Standard library only: parsers built on this run on the GPU machine too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from .problems import FormatError, ReadResult, Unreadable, one_line, parse_each

T = TypeVar("T")


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_number(value: Any) -> bool:
    """True for JSON numbers; a boolean is not a number even though Python says so."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_finite(value: Any) -> float | None:
    """The value as a float when it is a usable latency (finite and > 0), else ``None``."""
    if not is_number(value):
        return None
    number = float(value)
    return number if number > 0.0 and math.isfinite(number) else None


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Fields:
    """One JSON object whose fields are read with their types checked.

    ``where`` names the object inside its document (``"result"``, ``"runs[3]"``) so a
    message reads ``result.latency_us_geomean is string, not a number``.
    """

    __slots__ = ("obj", "where")

    def __init__(self, obj: Any, where: str | None = None):
        if not isinstance(obj, dict):
            raise FormatError(f"{where or 'document'} is {json_type(obj)}, not an object")
        self.obj = obj
        self.where = where

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _wrong(self, key: str, value: Any, wanted: str) -> FormatError:
        return FormatError(f"{self.name(key)} is {json_type(value)}, not {wanted}")

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def value(self, key: str) -> Any:
        return self.obj.get(key)

    def string(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self._wrong(key, value, "a string")

    def text(self, key: str) -> str | None:
        """A string where "" means absent (AKA writes "" for unset commits and errors)."""
        value = self.string(key)
        return value if value else None

    def ident(self, key: str) -> str | None:
        """An identifier written as a string or an integer; kept as a string."""
        value = self.obj.get(key)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise self._wrong(key, value, "a string")

    def integer(self, key: str) -> int | None:
        value = self.obj.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise self._wrong(key, value, "an integer")

    def number(self, key: str) -> int | float | None:
        value = self.obj.get(key)
        if value is None or is_number(value):
            return value
        raise self._wrong(key, value, "a number")

    def boolean(self, key: str) -> bool | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self._wrong(key, value, "a boolean")

    def choice(self, key: str, allowed: Iterable[str]) -> str | None:
        value = self.string(key)
        if value is None or value in allowed:
            return value
        raise FormatError(f"{self.name(key)} is {_brief(value)}, not one of {', '.join(allowed)}")

    def mapping(self, key: str) -> dict[str, Any] | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self._wrong(key, value, "an object")

    def array(self, key: str) -> list[Any] | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, list):
            return value
        raise self._wrong(key, value, "an array")

    def strings(self, key: str) -> tuple[str, ...] | None:
        items = self.array(key)
        if items is None:
            return None
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise FormatError(f"{self.name(key)}[{index}] is {json_type(item)}, not a string")
        return tuple(items)

    def numbers_by_key(self, key: str) -> Mapping[str, int | float | None] | None:
        """An object of numbers (``latency_us_by_shape``); a ``null`` entry stays ``None``."""
        value = self.mapping(key)
        if value is None:
            return None
        for name, number in value.items():
            if number is not None and not is_number(number):
                raise FormatError(f"{self.name(key)}[{name!r}] is {json_type(number)}, not a number")
        return MappingProxyType(dict(value))

    def records(
        self, key: str, parse: Callable[[Any, str], T], note: Callable[[str], None] | None
    ) -> tuple[T, ...] | None:
        """Parse each element of an array; a bad element is reported through ``note``
        and skipped (keep every good record), or raised when ``note`` is ``None``."""
        items = self.array(key)
        return None if items is None else parse_each(items, parse, self.name(key), note)


def loads_lenient(data: bytes | str) -> Any:
    """Decode JSON with the standard library, which (unlike strict JSON) accepts the
    ``NaN``/``Infinity`` tokens Python writers emit for a kernel that produced NaNs.
    Raises :class:`FormatError` with a one-line reason."""
    from .plainjson import loads

    try:
        return loads(data)
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply") from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise FormatError(f"invalid JSON: {exc}") from None


def read_document(path: Any, parse: Callable[[Any, Callable[[str], None]], T]) -> ReadResult[T]:
    """Read one JSON document; ``parse(obj, note)`` builds the value and calls ``note`` for
    each sub-record it had to skip, which comes back as a problem beside the value.

    Never raises: a path the OS refuses is reported like any unreadable document.
    """
    from .jsonio import read_json_document  # orjson: kept out of GPU-side imports

    notes: list[str] = []
    try:
        result = read_json_document(path, lambda obj: parse(obj, notes.append))
    except (OSError, ValueError) as exc:
        return ReadResult(None, (Unreadable(str(path), None, one_line(exc)),))
    if result.value is None or not notes:
        return result
    return ReadResult(result.value, tuple(Unreadable(str(path), None, one_line(n)) for n in notes))
