"""The base of the console's full screens: the keys every screen answers, in the console's
words.

Textual's ``Screen`` binds Tab, Shift+Tab and Ctrl+C itself, described as "Focus Next",
"Focus Previous" and "Copy selected text"; help (``?``) lists every active binding, so these
would be the only lines of it in another voice, and ones a keymap could not name. The same
actions are bound here again, with ids and tooltips like every other console key.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen

FOCUS_TOOLTIP = "move to the next / previous table or pane"


class ConsoleScreen(Screen):
    BINDINGS = [
        Binding("tab", "app.focus_next", "next", show=False, tooltip=FOCUS_TOOLTIP, id="screen.next"),
        Binding("shift+tab", "app.focus_previous", "previous", show=False, tooltip=FOCUS_TOOLTIP,
                id="screen.previous"),
        Binding("ctrl+c,super+c", "screen.copy_text", "copy", show=False, tooltip="copy the selected text",
                id="screen.copy"),
    ]
