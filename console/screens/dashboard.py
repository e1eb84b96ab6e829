"""The screen the dashboard lives on: Textual's default screen minus one full repaint per
focus change, with size classes the stylesheet lays the panes out by."""

from __future__ import annotations

from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class DashboardScreen(Screen):
    # Textual's Screen.focused repaints the whole screen whenever focus moves. The widget
    # that lost focus, the one that gained it and every pane styled ``:focus-within``
    # repaint themselves already; the full repaint only re-rendered every pane and table on
    # each Tab or number key (the bulk of key-to-screen latency under load). Measured with
    # benchmarks/console_load.py (100 events/s, 3 runs each, a shared 2-core host): median
    # key-to-screen 54-86 ms with this and the pane's inline border, 90-219 ms with Textual's
    # stock repaint and a ``Pane:focus-within`` rule.
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    # Classes the stylesheet sizes the rows by (app.tcss): short terminals give the tables
    # the height, narrow ones give the ABBA pane more width.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
