"""How a reader reports what it could not read, without losing what it could.

Standard library only (NamedTuple records): every reader, the GPU-side ones included,
imports this.
"""

# Annotations are evaluated here (no __future__ import): typing.NamedTuple would compile
# each string annotation into a ForwardRef, doubling the cost of defining these records.
from collections.abc import Callable, Iterable
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")


class FormatError(ValueError):
    """A record or document that does not follow its format; the message is one line."""


class Unreadable(NamedTuple):
    """One record (or whole document) a reader could not use.

    ``offset`` is the byte offset of the record in ``path`` (``None`` for whole documents).
    """

    path: str
    offset: int | None
    error: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "offset": self.offset, "error": self.error}

    def __str__(self) -> str:
        where = self.path if self.offset is None else f"{self.path}@{self.offset}"
        return f"{where}: {self.error}"


class ReadResult(NamedTuple, Generic[T]):
    """What a document reader returns: the value (or ``None``) plus every problem met."""

    value: T | None
    problems: tuple[Unreadable, ...] = ()

    @property
    def ok(self) -> bool:
        return self.value is not None and not self.problems


def one_line(error: BaseException | str, limit: int = 300) -> str:
    """Squash an exception into the one-line message every reader reports."""
    text = str(error) if not isinstance(error, str) else error
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_each(
    items: Iterable[Any], parse: Callable[[Any, str], T], where: str, note: Callable[[str], None] | None
) -> tuple[T, ...]:
    """``parse(item, "where[i]")`` of each element of an array. A bad element is passed to
    ``note`` and skipped, so every good one is kept; without ``note`` it raises."""
    out: list[T] = []
    for index, item in enumerate(items):
        try:
            out.append(parse(item, f"{where}[{index}]"))
        except FormatError as exc:
            if note is None:
                raise
            note(str(exc))
    return tuple(out)
