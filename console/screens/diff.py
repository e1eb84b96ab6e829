"""What the agent changed: the diff of ``kernel.py`` between two points, with the latency change.

Modelled on lazygit's diff view: the two points on top (any memory version, the incumbent,
HEAD, or the working tree, each picked with a Select), the latency of each and the change
beside them, the unified diff below, coloured by the ``diff`` lexer. The diff is read in a
worker (``console.episode.kernel_diff``, which runs git) and comes back as a message; the
screen draws what the message carries. The text is shown through rich ``Syntax`` (code, never
markup), its control characters already made visible by the domain.
"""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer
from textual.message import Message
from textual.widgets import Select, Static

from console.episode.kernel_diff import DiffSide, KernelDiff, evaluated_latencies, kernel_diff
from console.episode.state import EpisodeState
from console.screens.base import ConsoleScreen
from widgets.key_bar import KeyBar


class DiffScreen(ConsoleScreen):
    DEFAULT_CSS = """
    DiffScreen #diff-sides { height: auto; }
    DiffScreen #diff-sides Select { width: 1fr; }
    DiffScreen #diff-summary { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    DiffScreen #diff-scroll { height: 1fr; }
    DiffScreen #diff-body { width: auto; }
    """

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "back", tooltip="back to the dashboard", id="diff.back"),
    ]

    class Loaded(Message):
        def __init__(self, diff: KernelDiff) -> None:
            super().__init__()
            self.diff = diff

    def __init__(self, state: EpisodeState, sides: tuple[DiffSide, ...], old: DiffSide, new: DiffSide) -> None:
        super().__init__()
        self.worktree = state.git.worktree if state.git is not None else state.worktree or state.campaign_root or "."
        self.evaluated = evaluated_latencies(state)
        self.sides = sides
        self.old, self.new = old, new
        self.diff: KernelDiff | None = None

    def compose(self):
        options = [(Text(side.label), index) for index, side in enumerate(self.sides)]
        with Horizontal(id="diff-sides"):
            yield Select(options, value=self.sides.index(self.old), allow_blank=False, id="diff-old")
            yield Select(options, value=self.sides.index(self.new), allow_blank=False, id="diff-new")
        yield Static(Text("reading the diff…", style="dim"), id="diff-summary")
        with ScrollableContainer(id="diff-scroll"):
            yield Static(id="diff-body")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#diff-scroll").focus()
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="kernel-diff")
    def load(self) -> None:
        self.post_message(self.Loaded(kernel_diff(self.worktree, self.old, self.new, self.evaluated, self.sides)))

    def on_select_changed(self, event: Select.Changed) -> None:
        chosen = self.sides[event.value]
        if event.select.id == "diff-old" and chosen != self.old:
            self.old = chosen
        elif event.select.id == "diff-new" and chosen != self.new:
            self.new = chosen
        else:
            return
        self.query_one("#diff-summary", Static).update(Text("reading the diff…", style="dim"))
        self.load()

    def on_diff_screen_loaded(self, message: Loaded) -> None:
        diff = self.diff = message.diff
        if (diff.old, diff.new) != (self.old, self.new):
            return  # an older pick's answer; the newest one is on its way
        change = diff.change_pct
        style = "" if change is None else "bold green" if change < 0 else "bold red" if change > 0 else ""
        self.query_one("#diff-summary", Static).update(Text(diff.summary, style=style))
        body = self.query_one("#diff-body", Static)
        if diff.error is not None:
            body.update(Text(f"no diff: {diff.error}", style="red"))
        elif not diff.text:
            body.update(Text("kernel.py is the same on both sides", style="dim"))
        else:
            body.update(Syntax(diff.text, "diff", theme="ansi_dark", word_wrap=False))
