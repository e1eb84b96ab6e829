"""Enter on a row or pane: the full text of what the dashboard had to cut, in a box.

The text is agent-written (alerts quote paths, logs quote programs, unreadable records quote
the bytes that failed, titles name job ids and kernels): it is shown as plain text in a
read-only text area under a plain title, never as markup,
with control characters made visible line by line. The area scrolls and its text can be
selected; Esc, Enter or ``q`` close it.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from console.episode.text import visible, visible_lines


class DetailScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    DetailScreen { align: center middle; }
    DetailScreen > Vertical {
        width: 90%; height: 80%; max-width: 160;
        border: round $accent; border-title-color: $accent; background: $surface;
    }
    DetailScreen TextArea, DetailScreen TextArea:focus { height: 1fr; border: none; }
    DetailScreen #detail-hint { height: 1; color: $text-muted; }
    """

    BINDINGS = [
        Binding("escape,enter,q", "close", "close", tooltip="close the detail view", id="detail.close"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = visible(title)
        self.text = visible_lines(text)

    def compose(self):
        with Vertical() as box:
            box.border_title = Content(self.title_text)  # a str title would be read as markup
            text = TextArea(self.text, read_only=True, soft_wrap=True, show_line_numbers=False, id="detail-text")
            text.cursor_blink = False  # a still screen reads (and snapshots) the same every time
            yield text
            yield Static("Esc / Enter / q close · arrows scroll · shift+arrows select", id="detail-hint", markup=False)

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_close(self) -> None:
        self.dismiss(None)
