"""F1 / ``?``: every key the console answers now, generated from the active bindings.

The rows are the bindings of the screen beneath: the app's, the screen's and the focused
pane's, after the operator's keymap, so a remapped key or a key that exists only in replay
shows as it is. Bindings that share an action or a tooltip share a row (``?`` and F1,
``1``…``8``); a dimmed one says why it is refused now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import App
from textual.binding import ActiveBinding, Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from console.formats.job_record import MAX_SANDBOX_JOBS

# Binding id prefix -> group title; bindings of the app or screen without an id are "console".
GROUPS = {"app": "console", "job": "jobs", "replay": "replay"}
GROUP_NOTES = {"jobs": f"each a sandbox job in the episode workspace (max {MAX_SANDBOX_JOBS} at once)"}


@dataclass
class HelpRow:
    group: str
    text: str
    keys: list[str] = field(default_factory=list)
    enabled: bool = True
    why: str | None = None


def help_rows(bindings: Mapping[str, ActiveBinding], *, key_display: Callable[[Binding], str],
              why_blocked: Callable[[Binding], str | None], focused: str = "focused pane") -> list[HelpRow]:
    """One row per action (or per tooltip shared by several), grouped, in binding order; the
    bindings of the focused widgets (not the app's or the screen's) form the group ``focused``."""
    tips: dict[tuple[int, str], str] = {}
    for active in bindings.values():
        binding, owner = active.binding, id(active.node)
        # Our bindings (those with an id) speak for an action Textual also binds (ctrl+q, q).
        if binding.tooltip and (binding.id or (owner, binding.action) not in tips):
            tips[(owner, binding.action)] = binding.tooltip
    rows: dict[tuple[str, str], HelpRow] = {}
    for active in bindings.values():
        binding = active.binding
        owner = id(active.node)
        if isinstance(active.node, (App, Screen)):
            group = GROUPS.get((binding.id or "").partition(".")[0], "console")
        else:
            group = focused
        text = tips.get((owner, binding.action)) or binding.description or binding.action
        row = rows.setdefault((group, text), HelpRow(group, text))
        display = key_display(binding)
        if display not in row.keys:
            row.keys.append(display)
        if not active.enabled:
            row.enabled = False
            row.why = row.why or why_blocked(binding)
    order = [*dict.fromkeys(GROUPS.values()), focused]
    return sorted(rows.values(), key=lambda r: order.index(r.group))


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 100%; max-height: 90%; height: auto; padding: 1 2;
        border: thick $accent; background: $surface;
    }
    """

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close", id="help.close")]

    def __init__(self, *, mode: str, readonly: str | None, rows: list[HelpRow], header: Text | None = None) -> None:
        """``readonly``: why actions are refused (e.g. "archive: read-only"), None if they are not.
        ``header``: the dashboard header's lines, shown here whole (a narrow terminal cuts them)."""
        super().__init__()
        self.mode = mode
        self.readonly = readonly
        self.rows = rows
        self.header = header

    def compose(self):
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", width=16)
        table.add_column()
        # An archive is not followed live: say why the keys are dim rather than "live mode".
        what = f"{self.readonly}, actions disabled" if self.readonly else f"{self.mode} mode"
        title = Text.assemble(("episcope console", "bold"), f"  {what}")
        group = None
        for row in self.rows:
            if row.group != group:
                if group is not None:
                    table.add_row("", "")
                group = row.group
                table.add_row(Text(group, style="bold"), Text(GROUP_NOTES.get(group, ""), style="dim"))
            line = Text(row.text)
            if not row.enabled:
                line.stylize("dim")
                if row.why:
                    line.append(f"  [{row.why}]", style="yellow")
            table.add_row(Text(" ".join(row.keys)), line)
        with VerticalScroll():
            parts = [title, Text("")]
            if self.header is not None and self.header.plain.strip():
                parts += [self.header, Text("")]
            yield Static(Group(*parts, table))

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
