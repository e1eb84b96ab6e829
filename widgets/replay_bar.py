"""The replay controls: play state, speed, position and a scrubber.

Click anywhere on the scrubber to seek there; with the bar focused, ←/→ move by 1% and
shift+←/→ by 10%. The bar only shows and asks: the app owns the ``Replay`` and redraws.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from console.episode.text import visible


class ReplayBar(Widget, can_focus=True):
    DEFAULT_CSS = """
    ReplayBar {
        height: 2;
        padding: 0 1;
        background: $boost;
    }
    ReplayBar:focus { background: $accent 20%; }
    """

    BINDINGS = [
        Binding("left", "nudge(-0.01)", "back 1%", show=False, tooltip="seek back / forward 1%",
                id="replay.back_1pc"),
        Binding("right", "nudge(0.01)", "fwd 1%", show=False, tooltip="seek back / forward 1%", id="replay.fwd_1pc"),
        Binding("shift+left", "nudge(-0.1)", "back 10%", show=False, tooltip="seek back / forward 10%",
                id="replay.back_10pc"),
        Binding("shift+right", "nudge(0.1)", "fwd 10%", show=False, tooltip="seek back / forward 10%",
                id="replay.fwd_10pc"),
    ]

    class Seek(Message):
        def __init__(self, fraction: float) -> None:
            super().__init__()
            self.fraction = fraction

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fraction = 0.0
        self.playing = False
        self.speed = 1.0
        self.position = 0
        self.total = 0
        self.now: float | None = None
        self.label = ""

    def show(self, *, fraction: float, playing: bool, speed: float, position: int, total: int,
             now: float | None, label: str = "") -> None:
        new = (fraction, playing, speed, position, total, now, label)
        if new == (self.fraction, self.playing, self.speed, self.position, self.total, self.now, self.label):
            return
        self.fraction, self.playing, self.speed, self.position, self.total, self.now, self.label = new
        self.refresh()

    def render(self) -> Text:
        width = max(10, self.size.width - 2)
        filled = int(self.fraction * width)
        bar = Text()
        bar.append("━" * filled, style="bold cyan")
        bar.append("●", style="bold white")
        bar.append("─" * max(0, width - filled - 1), style="dim")
        when = datetime.fromtimestamp(self.now, UTC).strftime("%Y-%m-%d %H:%M:%S") if self.now else "N/A"
        status = Text()
        status.append(" ▶ playing " if self.playing else " ⏸ paused ", style="reverse bold")
        status.append(f"  ×{self.speed:g}  event {self.position}/{self.total}  {when} UTC  ")
        status.append(visible(self.label), style="yellow")  # a phase or file name: agent-written
        status.append("\n")
        status.append_text(bar)
        return status

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            width = max(1, self.size.width - 2)
            self.post_message(self.Seek(min(1.0, max(0.0, event.x / width))))

    def action_nudge(self, delta: float) -> None:
        self.post_message(self.Seek(min(1.0, max(0.0, self.fraction + delta))))
