"""The intra-kernel timeline of one receipt, with Perfetto export.

The receipt names the raw buffer, manifest and event dictionary relative to itself; the
screen decodes the raw buffer again (the same decoder ``validate`` uses), so what it shows
is what the buffer says, not what a summary claimed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from console.episode.replay import state_dir
from widgets.key_bar import KeyBar
from widgets.timeline_view import TimelineView


class TimelineLoadError(Exception):
    """The receipt or its capture cannot be shown (message lists every problem)."""


def load_capture(receipt_path: str | Path):
    from console.timeline.decode import CaptureRejected, decode
    from console.timeline.manifest import SpecError, parse_dictionary, parse_manifest

    receipt_path = Path(receipt_path)
    try:
        receipt = json.loads(receipt_path.read_text())
    except (OSError, ValueError) as exc:
        raise TimelineLoadError(f"{receipt_path}: {exc}") from None
    base = receipt_path.parent

    def named(key: str) -> Path:
        value = receipt.get(key)
        if isinstance(value, dict):
            value = value.get("path")
        if not isinstance(value, str):
            raise TimelineLoadError(f"{receipt_path}: receipt names no {key}")
        return base / value

    try:
        raw = named("raw").read_bytes()
        manifest = parse_manifest(json.loads(named("manifest").read_text()))
        dictionary = parse_dictionary(json.loads(named("event_dictionary").read_text()))
    except (OSError, ValueError, SpecError) as exc:
        raise TimelineLoadError(f"{receipt_path}: {exc}") from None
    try:
        return decode(raw, manifest, dictionary)
    except CaptureRejected as exc:
        raise TimelineLoadError("capture rejected: " + "; ".join(str(p) for p in exc.problems)) from None


def export_perfetto(capture, name: str) -> Path:
    """Write the Perfetto trace under the user's state directory (never the workspace)."""
    from console.timeline.export import perfetto_trace_bytes

    target = state_dir() / "exports" / f"{name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.perfetto-trace"
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_suffix(".tmp")
    temp.write_bytes(perfetto_trace_bytes(capture))
    temp.replace(target)
    return target


class TimelineScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "back", id="timeline.back"),
        Binding("e", "export", "export Perfetto", id="timeline.export"),
    ]

    def __init__(self, receipt_path: str | Path) -> None:
        super().__init__()
        self.receipt_path = Path(receipt_path)
        self.capture = None
        self.error: str | None = None
        try:
            self.capture = load_capture(self.receipt_path)
        except TimelineLoadError as exc:
            self.error = str(exc)

    def compose(self):
        shown = f"{self.receipt_path.parent.name}/{self.receipt_path.name}"
        title = Static(Text(f"intra-kernel timeline  {shown}   (e export Perfetto, esc back)", style="bold"), id="timeline-title")
        yield title
        if self.capture is not None:
            yield TimelineView(self.capture)
        else:
            yield Static(Text(self.error or "nothing to show", style="red"), id="timeline-error")
        yield KeyBar()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "export" and self.capture is None:
            return False
        return True

    def action_export(self) -> None:
        if self.capture is None:
            return
        try:
            path = export_perfetto(self.capture, self.receipt_path.parent.name or "timeline")
        except OSError as exc:
            self.notify(f"export failed: {exc}", severity="error")
            return
        self.notify(f"Perfetto trace written to {path}")
