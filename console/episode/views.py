"""Read-only views over append-only lists, so a state snapshot costs O(1).

The reducer appends to plain lists and never changes an item once appended. A snapshot
hands out ``Prefix(list, n)``: the first ``n`` items, fixed forever even while the reducer
goes on appending. This is what lets a 1,000,000-event episode take one more event in well
under a millisecond instead of copying every span into a new tuple.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import TypeVar, overload

T = TypeVar("T")


class Prefix(Sequence[T]):
    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._items[i] for i in range(*index.indices(self._n))]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._n)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __hash__(self) -> int:
        return hash((id(self._items), self._n))

    def __repr__(self) -> str:
        return f"Prefix({self._n} items)"


class Concat(Sequence[T]):
    """Several read-only sequences seen as one (for example one per telemetry file)."""

    __slots__ = ("_n", "_parts")

    def __init__(self, parts: Sequence[Sequence[T]]) -> None:
        self._parts = tuple(p for p in parts if len(p))
        self._n = sum(len(p) for p in self._parts)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        for part in self._parts:
            if index < len(part):
                return part[index]
            index -= len(part)
        raise IndexError(index)  # pragma: no cover - guarded above

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # unhashable, as a list is

    def __repr__(self) -> str:
        return f"Concat({self._n} items)"


def combine(parts: list[Sequence[T]]) -> Sequence[T]:
    parts = [p for p in parts if len(p)]
    if not parts:
        return ()
    if len(parts) == 1:
        return parts[0]
    return Concat(parts)
