"""Alerts from the guards: the loop's hard boundaries, checked on every state (Enter shows one uncut)."""

from __future__ import annotations

from textual.widgets import DataTable

from console.episode.state import Alert, EpisodeState

from .common import add_columns, plain, selected_key, sync_table
from .pane import Pane, PaneTable

SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


class AlertsPane(Pane):
    title = "Alerts"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._alerts: dict[str, Alert] = {}  # row key -> alert

    def compose_body(self):
        table = PaneTable(id="alerts-table", cursor_type="row", classes="pane-body")
        add_columns(table, "sev", "message", "code")
        yield table

    def empty_note(self, state: EpisodeState) -> str | None:
        return None if state.alerts else "no alerts"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        subtitle = str(len(state.alerts)) if state.alerts else ""
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if not self.has_body or (previous is not None and previous.alerts == state.alerts):
            return
        # Paths inside the workspace are shown from its root (the detail view has them whole).
        root = (state.worktree or state.campaign_root or "").rstrip("/") + "/"
        rows = []
        self._alerts = {}
        for index, alert in enumerate(state.alerts):
            path = alert.path
            if path and root != "/" and path.startswith(root):
                path = path[len(root):]
            key = f"{alert.code}:{alert.path}:{alert.message}:{index}"
            self._alerts[key] = alert
            rows.append(
                (
                    key,
                    (plain(alert.severity, SEVERITY_STYLES.get(alert.severity, "")),
                     alert.message + (f"  ({path})" if path else ""), alert.code),
                )
            )
        sync_table(self.query_one(DataTable), rows, self.filter_text)

    def full_text(self) -> tuple[str, str] | None:
        if not self.has_body:
            return None
        key = selected_key(self.query_one(DataTable))
        alert = None if key is None else self._alerts.get(key)
        if alert is None:
            return None
        return f"{alert.severity} {alert.code}", f"{alert.message}\n\n{alert.severity} {alert.code}\n{alert.path or ''}"
