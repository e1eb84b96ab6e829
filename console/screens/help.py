"""F1 / ``?``: every key of the console, grouped, with what it does right now."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.actions import ACTIONS

GENERAL = (
    ("1-8 / Tab", "move between panes"),
    ("/", "filter the focused table (Esc clears)"),
    ("Enter", "on a job: follow its log"),
    ("t", "open the newest intra-kernel timeline receipt"),
    ("ctrl+p", "command palette: actions that make sense now, jumps"),
    ("? / F1", "this help"),
    ("Esc", "back / clear filter"),
    ("q", "quit (jobs this console started are ended)"),
)
REPLAY = (
    ("space", "play / pause"),
    ("+ / -", "faster / slower"),
    (". / ,", "step to the next / previous event"),
    ("> / <", "jump to the next / previous phase start"),
    ("v / V", "jump to the next / previous canonical memory version"),
    ("home / end", "start / end of the episode"),
    ("scrubber", "click to seek; ←/→ 1%, shift+←/→ 10%"),
)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-height: 90%; height: auto; padding: 1 2;
        border: thick $accent; background: $surface;
    }
    """

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close", id="help.close")]

    def __init__(self, *, mode: str, readonly: bool, blocked: dict[str, str]) -> None:
        super().__init__()
        self.mode = mode
        self.readonly = readonly
        self.blocked = blocked  # action name -> why it is unavailable now

    def compose(self):
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", width=12)
        table.add_column()
        table.add_row(Text("episcope console", style="bold"), Text(f"{self.mode} mode" + (", read-only" if self.readonly else "")))
        table.add_row("", "")
        for key, what in GENERAL:
            table.add_row(key, what)
        table.add_row("", "")
        table.add_row(Text("jobs", style="bold"), Text("each a sandbox job in the episode workspace (max 4 at once)", style="dim"))
        for action in ACTIONS:
            why = self.blocked.get(action.name)
            line = Text(f"{action.title}: {action.description}")
            if why:
                line.stylize("dim")
                line.append(f"  [{why}]", style="yellow")
            table.add_row(action.key, line)
        cancel_why = self.blocked.get("cancel_job")
        line = Text("cancel the selected job (asks first)", style="dim" if cancel_why else "")
        if cancel_why:
            line.append(f"  [{cancel_why}]", style="yellow")
        table.add_row("x", line)
        if self.mode == "replay":
            table.add_row("", "")
            for key, what in REPLAY:
                table.add_row(key, what)
        with VerticalScroll():
            yield Static(table)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
