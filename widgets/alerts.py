"""Alerts from the guards: the loop's hard boundaries, checked on every state."""

from __future__ import annotations

from textual.widgets import DataTable

from console.episode.state import EpisodeState

from .common import plain, sync_table
from .pane import Pane

SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


class AlertsPane(Pane):
    title = "Alerts"

    def compose(self):
        table = DataTable(id="alerts-table", cursor_type="row")
        table.add_columns("sev", "message", "code")
        yield table

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        subtitle = str(len(state.alerts)) if state.alerts else ""
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if previous is not None and previous.alerts == state.alerts:
            return
        rows = []
        for index, alert in enumerate(state.alerts):
            rows.append(
                (
                    f"{alert.code}:{alert.path}:{alert.message}:{index}",
                    (plain(alert.severity, SEVERITY_STYLES.get(alert.severity, "")),
                     alert.message + (f"  ({alert.path})" if alert.path else ""), alert.code),
                )
            )
        sync_table(self.query_one(DataTable), rows, self.filter_text)
