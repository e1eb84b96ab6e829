"""The base of every dashboard pane: a titled box that shows an ``EpisodeState``.

A pane remembers the last state it drew and its table filter, so the app can hand it a new
state (or a new filter) and the pane redraws only what changed.
"""

from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import DataTable

from console.episode.state import EpisodeState


class Pane(Vertical):
    DEFAULT_CSS = """
    Pane {
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        height: 1fr;
    }
    Pane:focus-within {
        border: round $accent;
        border-title-color: $accent;
    }
    """

    title = "pane"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.number = number
        self.state: EpisodeState | None = None
        self.filter_text = ""

    def on_mount(self) -> None:
        self._set_title()

    def _set_title(self) -> None:
        prefix = f"{self.number} " if self.number is not None else ""
        suffix = f"  /{self.filter_text}" if self.filter_text else ""
        self.border_title = f"{prefix}{self.title}{suffix}"

    def show_state(self, state: EpisodeState) -> None:
        """Draw ``state``; subclasses redraw only the parts whose inputs changed."""
        self.state = state

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._set_title()
        if self.state is not None:
            # Forget the drawn state so the pane redraws in full under the new filter.
            state, self.state = self.state, None
            self.show_state(state)

    def focus_pane(self) -> None:
        target = self.query(DataTable).first() if self.query(DataTable) else None
        if target is not None:
            target.focus()
        elif self.can_focus:
            self.focus()
