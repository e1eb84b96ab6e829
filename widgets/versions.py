"""Canonical memory versions: latency (or score) per ``memory/v<N>.json``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable

from console.episode.state import EpisodeState

from .common import NA, add_columns, fmt, plain, selected_key, short_sha, sync_table
from .pane import Pane, PaneTable

if TYPE_CHECKING:
    from console.formats.memory import MemoryVersion


class VersionsPane(Pane):
    title = "Versions"

    def compose_body(self):
        table = PaneTable(id="versions-table", cursor_type="row", zebra_stripes=True, classes="pane-body")
        add_columns(table, "ver", "latency µs", "score", "gate", "subject", "commit")
        yield table

    def empty_note(self, state: EpisodeState) -> str | None:
        return None if state.versions else "no memory versions yet"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        if not self.has_body:
            return
        if previous is not None and previous.versions == state.versions and previous.incumbent_curve == state.incumbent_curve:
            return
        incumbent = {point[0] for point in state.incumbent_curve[-1:]} if state.incumbent_curve else set()
        rows = []
        for record in state.versions:
            version = record.version
            latency = record.latency_us_geomean if record.latency_us_geomean is not None else record.latency_us
            gate = record.quality_gate_result or record.correctness_status or NA
            label = Text(f"v{version}" if version is not None else NA, style="bold green" if version in incumbent else "")
            rows.append(
                (
                    f"v{version}:{record.timestamp}",
                    (
                        label,
                        fmt(latency, ".3f"),
                        fmt(record.performance_score, ".4f"),
                        plain(gate, "green" if gate == "PASS" else "red" if gate in ("FAIL", "TIMEOUT_FAIL") else ""),
                        fmt(record.measurement_subject),
                        short_sha(record.git_commit_hash, 8),
                    ),
                )
            )
        table = self.query_one(DataTable)
        first_fill = table.row_count == 0
        sync_table(table, rows, self.filter_text)
        if first_fill and table.row_count:
            # The newest version is the one an operator looks at (and D diffs against the
            # incumbent): on a short terminal the oldest would hide it behind the scrollbar.
            table.move_cursor(row=table.row_count - 1, animate=False)

    def selected_version(self) -> MemoryVersion | None:
        """The memory version of the row under the cursor (None: no rows)."""
        if not self.has_body:
            return None
        key = selected_key(self.query_one(DataTable))
        if key is None or self.state is None:
            return None
        return next((r for r in self.state.versions if f"v{r.version}:{r.timestamp}" == key), None)

    def full_text(self) -> tuple[str, str] | None:
        if not self.has_body:
            return None
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        labels = [str(column.label) for column in table.columns.values()]
        cells = [getattr(cell, "plain", str(cell)) for cell in table.get_row_at(table.cursor_row)]
        version = self.selected_version()
        lines = [f"{label}: {cell}" for label, cell in zip(labels, cells, strict=True)]
        if version is not None:
            lines.append(f"full commit: {version.git_commit_hash or NA}")
        return f"version {cells[0]}", "\n".join(lines)
