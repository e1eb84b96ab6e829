"""A yes/no question before anything destructive; ``y``/Enter confirms, ``n``/Esc declines.

The question names a job by its id and category, which are agent-written: it is shown as
text with control characters made visible, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.episode.text import visible_lines


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 64; height: auto; padding: 1 2;
        border: thick $error; background: $surface;
    }
    ConfirmScreen Horizontal { height: auto; align: center middle; margin-top: 1; }
    ConfirmScreen Button { margin: 0 1; }
    """

    BINDINGS = [
        Binding("y", "answer(True)", "yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm.no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self):
        with Vertical():
            yield Static(Text(visible_lines(self.question)), id="confirm-question")
            with Horizontal():
                yield Button("Yes (y)", variant="error", id="confirm-yes")
                yield Button("No (n)", variant="primary", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
