"""Records the readers could not use, with file and byte offset; never hidden, never fatal."""

from __future__ import annotations

from textual.widgets import DataTable

from console.episode.state import EpisodeState

from .common import fmt, sync_table
from .pane import Pane


class UnreadableList(Pane):
    title = "Unreadable"

    def compose(self):
        table = DataTable(id="unreadable-table", cursor_type="row")
        table.add_columns("file", "offset", "error")
        yield table

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        subtitle = str(len(state.unreadable)) if state.unreadable else ""
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if previous is not None and previous.unreadable == state.unreadable:
            return
        root = (state.worktree or state.campaign_root or "").rstrip("/") + "/"
        rows = []
        for item in state.unreadable:
            path = item.path
            shown = path[len(root):] if root != "/" and path.startswith(root) else path
            rows.append((f"{path}@{item.offset}", (shown, fmt(item.offset), item.error)))
        sync_table(self.query_one(DataTable), rows, self.filter_text)
