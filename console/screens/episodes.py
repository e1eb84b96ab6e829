"""The campaign's history: every episode, archived ones then the live one, in one table.

Each row is one ``EpisodeRecord`` of the state (``console.episode.episodes``): its outcome
(the terminal status, or where a running episode's supervisor is), whether it was accepted,
the supervisor's verdict and improvement, its memory version and AKA's measurement of its
phases. Enter shows every field of the row's record, as ``status --json`` has it, in the
detail view. The screen computes nothing: it draws the records of the newest state the app
holds, and redraws when they change (an episode ends, a replay moves).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.episode.episodes import EpisodeRecord
from console.episode.state import EpisodeState
from console.screens.base import ConsoleScreen
from widgets.common import NA, add_columns, fmt, plain, sync_table
from widgets.key_bar import KeyBar

REFRESH_SECONDS = 1.0  # the app's own tick: a new state shows within a second
GATE_STYLE = {"PASS": "green", "FAIL": "red", "ERROR": "red"}


def row_key(record: EpisodeRecord) -> str:
    """One key per row: an episode number is one record at most (the live one may have none)."""
    return f"{record.source}:{record.episode}"


def episode_cells(record: EpisodeRecord) -> tuple[Text | str, ...]:
    """The table's cells for one record, as its fields say (an unknown one is N/A)."""
    outcome = record.status or (f"phase {record.phase}" if record.phase else None)
    accepted = {True: plain("yes", "green"), False: plain("no", "red"), None: plain(None)}[record.accepted]
    timing = record.runtime.phase_timing
    return (
        f"e{record.episode:04d}" if record.episode is not None else NA,
        record.source,
        f"v{record.version}" if record.version is not None else NA,
        plain(outcome),
        accepted,
        plain(record.gate, GATE_STYLE.get(record.gate or "", "")),
        fmt(record.improvement_pct, ".2f"),
        plain(timing.measurement if timing is not None else None),
    )


def record_lines(value: object, prefix: str = "") -> Iterator[str]:
    """``key: value`` lines of a record's JSON form, nested keys joined with dots, values as
    JSON writes them (null, true, 41.48522555181793) and strings as they are."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from record_lines(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for index, item in enumerate(value):
            yield from record_lines(item, f"{prefix}[{index}]")
    elif isinstance(value, (dict, list)):
        yield f"{prefix}: {', '.join(map(str, value)) or '(none)'}"
    else:
        yield f"{prefix}: {value if isinstance(value, str) else json.dumps(value)}"


class EpisodesTable(DataTable):
    """The history's table: Enter is the table's own selection, so it is handled after the
    keys before it (a screen's priority binding runs as the key arrives, ahead of a cursor
    move still queued for the table), and says what it does in the footer and the help."""

    BINDINGS = [
        Binding("enter", "select_cursor", "detail", tooltip="every field of the selected episode, as status --json "
                "has it", id="episodes.detail"),
    ]


class EpisodesScreen(ConsoleScreen):
    DEFAULT_CSS = """
    EpisodesScreen #episodes-title { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    EpisodesScreen EpisodesTable { height: 1fr; }
    """

    BINDINGS = [
        Binding("escape,q,h", "app.pop_screen", "back", tooltip="back to the dashboard", id="episodes.back"),
    ]

    def __init__(self, state: EpisodeState) -> None:
        super().__init__()
        self.state = state
        self._drawn: tuple[EpisodeRecord, ...] | None = None

    def compose(self):
        yield Static(id="episodes-title")
        table = EpisodesTable(id="episodes-table", cursor_type="row", zebra_stripes=True)
        add_columns(table, "episode", "source", "ver", "outcome", "accepted", "gate", "gain %", "phases")
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        self.show_state(self.state)
        self.query_one(DataTable).focus()
        self.set_interval(REFRESH_SECONDS, self._follow)

    def _follow(self) -> None:
        # The app keeps the newest state even while its dashboard is hidden under this screen.
        self.show_state(self.app.episode_state)

    def show_state(self, state: EpisodeState) -> None:
        """Draw the state's episodes (only when they changed)."""
        self.state = state
        if self._drawn is not None and self._drawn == state.episodes:
            return
        self._drawn = state.episodes
        count = len(state.episodes)
        title = (f"campaign history  {state.campaign or NA}  {count} episode{'s' if count != 1 else ''}, oldest first"
                 if count else f"campaign history  {state.campaign or NA}  no episode yet")
        self.query_one("#episodes-title", Static).update(plain(title, "bold"))
        rows = [(row_key(record), episode_cells(record)) for record in state.episodes]
        sync_table(self.query_one(DataTable), rows)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click on the selected row): the row's record whole, in the detail view."""
        record = next((record for record in self.state.episodes if row_key(record) == event.row_key.value), None)
        if record is None:  # the row left with a newer state
            return
        from console.episode.summary import episode_entry
        from console.screens.detail import DetailScreen

        number = f"e{record.episode:04d}" if record.episode is not None else "the live episode"
        lines = record_lines(episode_entry(self.state, record))
        self.app.push_screen(DetailScreen(f"episode {number} ({record.source})", "\n".join(lines)))

