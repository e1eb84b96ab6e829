"""The screen the dashboard lives on: Textual's default screen minus one full repaint per
focus change, fitting the panes to short terminals."""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.reactive import Reactive
from textual.widget import Widget

from console.screens.base import ConsoleScreen
from widgets.pane import Pane, PaneRow

SHORT_ROWS = 30
LOW_ROW = 9  # the bottom row's most height (app.tcss starts it there)
SHORT_LOW_ROW = 5  # and on a short terminal


class DashboardScreen(ConsoleScreen):
    # Textual's Screen.focused repaints the whole screen whenever focus moves. The widget
    # that lost focus, the one that gained it and every pane styled ``:focus-within``
    # repaint themselves already; the full repaint only re-rendered every pane and table on
    # each Tab or number key (the bulk of key-to-screen latency under load). Measured with
    # benchmarks/console_load.py (100 events/s, 3 runs each, a shared 2-core host): median
    # key-to-screen 54-86 ms with this and the pane's inline border, 90-219 ms with Textual's
    # stock repaint and a ``Pane:focus-within`` rule.
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    # The app gives the first focus (EpiscopeApp._give_first_focus) once a pane has a body;
    # Textual's rule, the first focusable widget, picked the ABBA pane while every pane was
    # still empty. "" turns that rule off: None would take the app's AUTO_FOCUS ("*").
    AUTO_FOCUS = ""

    def __init__(self, *, on_show: Callable[[], None] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self._on_show = on_show

    def on_screen_resume(self) -> None:
        """Call ``on_show`` once, when the screen is first shown (its first frame is laid
        out and written as soon as the handlers of this event return)."""
        callback, self._on_show = self._on_show, None
        if callback is not None:
            callback()

    def on_resize(self, event: events.Resize) -> None:
        """A short terminal (under SHORT_ROWS lines) gives the tables the height: the bottom
        row shrinks, and each pane fits its body (``Pane.fit_short``, also when the body is
        mounted later). Inline styles, not a breakpoint class: a class on the screen
        re-applies the stylesheet to every widget, the largest single cost of the first
        frame after Textual's own start."""
        short = event.size.height < SHORT_ROWS
        for row in self.query("#row-low").results(PaneRow):
            row.set_open_height(SHORT_LOW_ROW if short else LOW_ROW)
        for pane in self.query(Pane):
            pane.fit_short(short)
