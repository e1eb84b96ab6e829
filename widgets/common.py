"""Small helpers every pane shares: reading fields of documents written by other modules,
showing unknown values as N/A (never 0), and syncing a DataTable cell by cell.

The documents the panes show come from several readers (msgspec Structs, NamedTuples, plain
dicts from a recording); ``get`` reads any of them by name and treats a missing field as
unknown.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rich.text import Text
from textual.widgets import DataTable

NA = "N/A"


def get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def dig(obj: Any, *names: str) -> Any:
    for name in names:
        obj = get(obj, name)
        if obj is None:
            return None
    return obj


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def fmt(value: Any, spec: str = "", suffix: str = "") -> str:
    """``value`` formatted with ``spec``, or N/A when it is unknown."""
    if value is None:
        return NA
    if spec and number(value) is not None:
        return f"{value:{spec}}{suffix}"
    return f"{value}{suffix}"


def short_sha(value: Any, width: int = 10) -> str:
    return value[:width] if isinstance(value, str) and value else NA


def seconds(value: float | None) -> str:
    if value is None:
        return NA
    if value < 60:
        return f"{value:.1f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def matches(cells: Iterable[Any], needle: str) -> bool:
    if not needle:
        return True
    needle = needle.lower()
    return any(needle in str(c.plain if isinstance(c, Text) else c).lower() for c in cells)


def sync_table(table: DataTable, rows: list[tuple[str, tuple]], needle: str = "") -> bool:
    """Make ``table`` show ``rows`` (key, cells) in order, touching only what changed.

    Rows that stay keep their cursor; a changed cell is updated alone, so a busy episode
    does not repaint whole tables. Returns True when anything changed.
    """
    wanted = [(key, cells) for key, cells in rows if matches(cells, needle)]
    wanted_keys = [key for key, _ in wanted]
    current_keys = [row_key.value for row_key in table.rows]
    columns = list(table.columns)
    changed = False
    if current_keys != wanted_keys and not _is_append(current_keys, wanted_keys):
        # Order changed or rows vanished: rebuild, keeping the cursor on the same key.
        selected = current_keys[table.cursor_row] if current_keys and 0 <= table.cursor_row < len(current_keys) else None
        table.clear()
        for key, cells in wanted:
            table.add_row(*cells, key=key)
        if selected in wanted_keys:
            table.move_cursor(row=wanted_keys.index(selected), animate=False)
        return True
    for key, cells in wanted[len(current_keys):]:
        table.add_row(*cells, key=key)
        changed = True
    for key, cells in wanted[: len(current_keys)]:
        existing = table.get_row(key)
        for column, old, new in zip(columns, existing, cells):
            if _plain(old) != _plain(new) or _style(old) != _style(new):
                table.update_cell(key, column, new)
                changed = True
    return changed


def _is_append(current: list, wanted: list) -> bool:
    return len(wanted) >= len(current) and wanted[: len(current)] == current


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _style(cell: Any) -> str:
    return str(cell.style) if isinstance(cell, Text) else ""
