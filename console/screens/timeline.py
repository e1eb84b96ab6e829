"""The intra-kernel timeline of one receipt, with Perfetto export.

Decoding a capture and writing its trace are slow: both run in a worker thread
(``console.timeline.capture_view``) and come back as a message, and the screen says
"decoding…" meanwhile. The owner lanes are drawn from the decoded capture the message carries
(the capture itself, too large for the episode state). The per-site table is drawn from the
state: the receipt's ``sites``, which episcope's receipts state; for one that states none, the
worker's statistics go to the app as ``SitesDecoded``, which folds them into the session as an
event (recorded, replayed, in ``status --json``), and the table follows the state.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from console.episode.replay import state_dir
from console.episode.state import EpisodeState
from console.episode.text import visible
from console.formats.timeline import DecodedSites, TimelineReceipt, decoded_sites
from console.screens.base import ConsoleScreen
from console.screens.episodes import REFRESH_SECONDS
from console.timeline.capture_view import CaptureView, TimelineLoadError, capture_view, export_perfetto
from console.timeline.summary import site_statistics
from widgets.key_bar import KeyBar
from widgets.timeline_view import TimelineView


class TimelineScreen(ConsoleScreen):
    BINDINGS = [
        # q leaves this screen as it leaves every other one over the dashboard (diff, help,
        # detail); on the dashboard itself it quits.
        Binding("escape,q", "app.pop_screen", "back", tooltip="back to the dashboard", id="timeline.back"),
        Binding("e", "export", "export Perfetto", id="timeline.export"),
    ]

    class Loaded(Message):
        """A capture decoded (``view``, and its per-site statistics ``sites``) or refused (``error``)."""

        def __init__(self, view: CaptureView | None, sites: DecodedSites | None, error: str | None) -> None:
            super().__init__()
            self.view = view
            self.sites = sites
            self.error = error

    class SitesDecoded(Message):
        """Per-site statistics of a capture whose receipt (``receipt_path``, as the state
        names it) states none, for the app to fold into the state."""

        def __init__(self, receipt_path: str, sites: DecodedSites) -> None:
            super().__init__()
            self.receipt_path = receipt_path
            self.sites = sites

    class Exported(Message):
        def __init__(self, path: Path | None, error: str | None) -> None:
            super().__init__()
            self.path = path
            self.error = error

    def __init__(self, receipt_path: str | Path, *, sites_not_decoded: str | None = None) -> None:
        """``sites_not_decoded``: why the statistics of a receipt that states none stay
        unknown in this console (a replay's), None where the app folds in the decoded ones."""
        super().__init__()
        self.receipt_path = Path(receipt_path)
        self.sites_not_decoded = sites_not_decoded
        self.view: CaptureView | None = None
        self.error: str | None = None
        self._sites_of: tuple[TimelineReceipt | None] | None = None  # the receipt the site table shows

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
            view = capture_view(self.receipt_path)
            sites = decoded_sites(view.raw_sha256, site_statistics(view.capture))
        except TimelineLoadError as exc:
            self.post_message(self.Loaded(None, None, str(exc)))
            return
        self.post_message(self.Loaded(view, sites, None))

    def receipt(self, state: EpisodeState) -> TimelineReceipt | None:
        """This screen's receipt as the state holds it (None: the state holds no such receipt)."""
        return next((r for r in state.timeline_receipts if r.path is not None and Path(r.path) == self.receipt_path),
                    None)

    async def on_timeline_screen_loaded(self, message: Loaded) -> None:
        self.view, self.error = message.view, message.error
        self.query_one("#timeline-status", Static).remove()
        if message.view is not None:
            shown = TimelineView(message.view)
        else:
            shown = Static(Text(visible(message.error or "nothing to show"), style="red"), id="timeline-error")
        await self.mount(shown, before=self.query_one(KeyBar))
        self.refresh_bindings()
        if message.view is None:
            return
        receipt = self.receipt(self.app.episode_state)
        if receipt is not None and receipt.sites is None and receipt.path is not None and message.sites is not None:
            self.post_message(self.SitesDecoded(receipt.path, message.sites))  # bubbles up to the app
        self.show_sites(self.app.episode_state)
        self.set_interval(REFRESH_SECONDS, self._follow)

    def _follow(self) -> None:
        # The app keeps the newest state even while its dashboard is hidden under this screen.
        self.show_sites(self.app.episode_state)

    def show_sites(self, state: EpisodeState) -> None:
        """Draw the receipt's sites as the state holds them (only when the receipt changed)."""
        receipt = self.receipt(state)
        if self._sites_of is not None and self._sites_of[0] is receipt:
            return
        self._sites_of = (receipt,)
        if receipt is None:
            why: str | None = "this receipt is not in the episode's state"
        elif receipt.sites is None and self.sites_not_decoded is not None:
            why = self.sites_not_decoded  # the receipt's own reason promises a decode this console does not do
        else:
            why = receipt.sites_unknown
        self.query_one(TimelineView).show_sites(receipt.sites if receipt is not None else None, why)

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
