"""The intra-kernel timeline of one receipt, with Perfetto export.

Decoding a capture and writing its trace are slow: both run in a worker thread
(``console.timeline.capture_view``) and come back as a message; the screen draws only what
the message carries, and says "decoding…" meanwhile.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from console.episode.replay import state_dir
from console.episode.text import visible
from console.timeline.capture_view import CaptureView, TimelineLoadError, capture_view, export_perfetto
from widgets.key_bar import KeyBar
from widgets.timeline_view import TimelineView


class TimelineScreen(Screen):
    BINDINGS = [
        # q leaves this screen as it leaves every other one over the dashboard (diff, help,
        # detail); on the dashboard itself it quits.
        Binding("escape,q", "app.pop_screen", "back", tooltip="back to the dashboard", id="timeline.back"),
        Binding("e", "export", "export Perfetto", id="timeline.export"),
    ]

    class Loaded(Message):
        """A capture decoded (``view``) or refused (``error``)."""

        def __init__(self, view: CaptureView | None, error: str | None) -> None:
            super().__init__()
            self.view = view
            self.error = error

    class Exported(Message):
        def __init__(self, path: Path | None, error: str | None) -> None:
            super().__init__()
            self.path = path
            self.error = error

    def __init__(self, receipt_path: str | Path) -> None:
        super().__init__()
        self.receipt_path = Path(receipt_path)
        self.view: CaptureView | None = None
        self.error: str | None = None

    @property
    def capture(self):
        return self.view.capture if self.view is not None else None

    def compose(self):
        shown = visible(f"{self.receipt_path.parent.name}/{self.receipt_path.name}")
        yield Static(Text(f"intra-kernel timeline  {shown}   (e export Perfetto, esc/q back)", style="bold"),
                     id="timeline-title")
        yield Static(Text("decoding the capture…", style="dim"), id="timeline-status")
        yield KeyBar()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-load")
    def load(self) -> None:
        try:
            self.post_message(self.Loaded(capture_view(self.receipt_path), None))
        except TimelineLoadError as exc:
            self.post_message(self.Loaded(None, str(exc)))

    def on_timeline_screen_loaded(self, message: Loaded) -> None:
        self.view, self.error = message.view, message.error
        self.query_one("#timeline-status", Static).remove()
        if message.view is not None:
            shown = TimelineView(message.view)
        else:
            shown = Static(Text(visible(message.error or "nothing to show"), style="red"), id="timeline-error")
        self.mount(shown, before=self.query_one(KeyBar))
        self.refresh_bindings()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "export" and self.capture is None:
            return False
        return True

    def action_export(self) -> None:
        if self.view is not None:
            self.export(self.view)

    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-export")
    def export(self, view: CaptureView) -> None:
        """Write the trace under the user's state directory (never the workspace)."""
        try:
            path = export_perfetto(view.capture, self.receipt_path.parent.name, state_dir() / "exports")
        except OSError as exc:
            self.post_message(self.Exported(None, str(exc)))
            return
        self.post_message(self.Exported(path, None))

    def on_timeline_screen_exported(self, message: Exported) -> None:
        if message.path is None:
            self.notify(visible(f"export failed: {message.error}"), severity="error", markup=False)
        else:
            self.notify(visible(f"Perfetto trace written to {message.path}"), markup=False)
