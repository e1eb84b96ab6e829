"""Records the readers could not use, with file and byte offset; never hidden, never fatal.
Enter shows one uncut: the full path and the whole error."""

from __future__ import annotations

from textual.widgets import DataTable

from console.episode.state import EpisodeState
from console.formats.problems import Unreadable

from .common import add_columns, fmt, selected_key, sync_table
from .pane import Pane, PaneTable


class UnreadableList(Pane):
    title = "Unreadable"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._items: dict[str, Unreadable] = {}  # row key -> record

    def compose_body(self):
        table = PaneTable(id="unreadable-table", cursor_type="row", classes="pane-body")
        add_columns(table, "file", "offset", "error")
        yield table

    def empty_note(self, state: EpisodeState) -> str | None:
        return None if state.unreadable else "all records read"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        subtitle = str(len(state.unreadable)) if state.unreadable else ""
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if not self.has_body or (previous is not None and previous.unreadable == state.unreadable):
            return
        root = (state.worktree or state.campaign_root or "").rstrip("/") + "/"
        rows = []
        self._items = {}
        for item in state.unreadable:
            path = item.path
            shown = path[len(root):] if root != "/" and path.startswith(root) else path
            self._items[f"{path}@{item.offset}"] = item
            rows.append((f"{path}@{item.offset}", (shown, fmt(item.offset), item.error)))
        sync_table(self.query_one(DataTable), rows, self.filter_text)

    def full_text(self) -> tuple[str, str] | None:
        if not self.has_body:
            return None
        key = selected_key(self.query_one(DataTable))
        item = None if key is None else self._items.get(key)
        if item is None:
            return None
        return "unreadable record", f"{item.path}\nbyte offset {fmt(item.offset)}\n\n{item.error}"
