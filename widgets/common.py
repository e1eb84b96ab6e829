"""Small helpers every pane shares: showing unknown values as N/A (never 0), showing
agent-written text as text, and syncing a DataTable cell by cell.

Every string a pane shows may come from an agent-written file. A DataTable parses a ``str``
cell as markup (``[@click=...]`` would become a live action), and a control character
reaching the terminal could retitle the window or clear the screen; so cells and bodies are
``rich.text.Text`` built through ``plain``, and ``sync_table`` turns any ``str`` cell into
such a ``Text``. Column labels are ``Text`` too (``add_columns``): they are ours, but parsing
them as markup loads rich's emoji table before the first data can be drawn.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import DataTable

from console.episode.numbers import bounded
from console.episode.text import visible

NA = "N/A"


def plain(value: object, style: str = "") -> Text:
    """``value`` as text that is never markup, control characters made visible; N/A when unknown."""
    return Text(NA if value is None else visible(str(value)), style=style)


def add_columns(table: DataTable, *labels: str) -> None:
    """Columns with plain-text labels (a ``str`` label is read as markup)."""
    table.add_columns(*(Text(label) for label in labels))


def fmt(value: object, spec: str = "", suffix: str = "") -> str:
    """``value`` formatted with ``spec`` in a bounded width (``numbers.bounded``), or N/A when
    it is unknown (strings made visible)."""
    if value is None:
        return NA
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{bounded(value, spec)}{suffix}"
    return visible(f"{value}{suffix}")


def short_sha(value: str | None, width: int = 10) -> str:
    return visible(value[:width]) if value else NA


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


def matches(cells: Iterable[Text], needle: str) -> bool:
    if not needle:
        return True
    needle = needle.lower()
    return any(needle in cell.plain.lower() for cell in cells)


def _as_text(cell: Text | str) -> Text:
    if isinstance(cell, str):
        return plain(cell)
    shown = visible(cell.plain)
    return cell if shown == cell.plain else Text(shown, style=cell.style)


def selected_key(table: DataTable) -> str | None:
    """The key of the row under the table's cursor (None: the table has no rows)."""
    if table.row_count == 0:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


def sync_table(table: DataTable, rows: list[tuple[str, tuple[Text | str, ...]]], needle: str = "") -> bool:
    """Make ``table`` show ``rows`` (key, cells) in order, touching only what changed.

    Rows that stay keep their cursor; a changed cell is updated alone, so a busy episode
    does not repaint whole tables. Every cell is shown as text (see the module docstring).
    Returns True when anything changed.
    """
    rows = [(key, tuple(_as_text(cell) for cell in cells)) for key, cells in rows]
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
                # The column takes the new width: a job first drawn "queued" 0.0s is
                # "succeeded" 12.1s a moment later.
                table.update_cell(key, column, new, update_width=True)
                changed = True
    return changed


def _is_append(current: list[str], wanted: list[str]) -> bool:
    return len(wanted) >= len(current) and wanted[: len(current)] == current


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _style(cell: object) -> str:
    return str(cell.style) if isinstance(cell, Text) else ""
