"""The base of every dashboard pane: a titled box that shows an ``EpisodeState``.

A pane remembers the last state it drew and its table filter, so the app can hand it a new
state (or a new filter) and the pane redraws only what changed.

The pane that holds the focus gets an accent border. That is an inline style set when a
descendant gains or loses focus, not a ``:focus-within`` rule: Textual answers such a rule
by re-applying the whole stylesheet to every widget inside both panes on each focus
change, which was the larger part of what a Tab or number key cost.
"""

from __future__ import annotations

from textual import events
from textual.color import Color
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
    """

    title = "pane"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.number = number
        self.state: EpisodeState | None = None
        self.filter_text = ""
        self._highlighted = False

    def on_mount(self) -> None:
        self._set_title()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._highlight(True)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._highlight(False)

    def on_focus(self, event: events.Focus) -> None:
        self._highlight(True)

    def on_blur(self, event: events.Blur) -> None:
        self._highlight(False)

    def _highlight(self, on: bool) -> None:
        if on == self._highlighted:
            return
        self._highlighted = on
        if on:
            accent = Color.parse(self.app.theme_variables["accent"])
            self.styles.border = ("round", accent)
            self.styles.auto_border_title_color = False  # the stylesheet's muted title color is "auto"
            self.styles.border_title_color = accent
        else:  # back to the stylesheet's border and title color
            self.styles.border = None
            self.styles.inline.clear_rule("auto_border_title_color")
            self.styles.border_title_color = None

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
