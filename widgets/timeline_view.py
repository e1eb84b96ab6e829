"""The intra-kernel timeline: owner lanes (SM / CTA / writer) over %globaltimer time, and
the per-site interval table.

Lanes share one axis (one kernel launch lasts micro- to milliseconds, so a shared axis is
what shows the overlap between CTAs). A capture may hold thousands of owners: the lanes are
sorted by SM then owner and the view scrolls.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from .common import sync_table

SITE_STYLES = ("green", "cyan", "magenta", "yellow", "blue", "red", "bright_green", "bright_cyan")
LABEL_WIDTH = 30


def site_table(capture) -> list[tuple[str, tuple]]:
    """Rows (site, kind, events, ranges, total, median, min, max) in µs, one per site."""
    ev, rg = capture.events, capture.ranges
    rows = []
    durations = (rg["end_ns"].astype(np.int64) - rg["begin_ns"].astype(np.int64)) if rg["owner"].size else np.zeros(0, np.int64)
    for site in capture.dictionary.sites:
        count = int(np.count_nonzero(ev["site"] == site.site_id))
        mine = durations[rg["site"] == site.site_id] if durations.size else durations
        if mine.size:
            stats = (f"{mine.sum() / 1e3:.3f}", f"{np.median(mine) / 1e3:.3f}", f"{mine.min() / 1e3:.3f}", f"{mine.max() / 1e3:.3f}")
        else:
            stats = ("N/A",) * 4
        rows.append((str(site.site_id), (site.name, site.kind, str(count), str(int(mine.size)), *stats)))
    return rows


class OwnerLanes(Widget):
    DEFAULT_CSS = """
    OwnerLanes { height: auto; }
    """

    def __init__(self, capture, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.capture = capture
        ev = capture.events
        owners, first = np.unique(ev["owner"], return_index=True)
        sms = ev["sm"][first]
        order = np.lexsort((owners, sms))
        self.lanes = [(int(sms[i]), int(owners[i])) for i in order]
        self.t0 = int(ev["timestamp_ns"].min())
        self.t1 = int(ev["timestamp_ns"].max())
        self._site_style = {s.site_id: SITE_STYLES[i % len(SITE_STYLES)] for i, s in enumerate(capture.dictionary.sites)}

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lanes) + 1

    def render(self) -> Text:
        width = max(10, self.size.width - LABEL_WIDTH - 1)
        span = max(1, self.t1 - self.t0)
        rg, ev = self.capture.ranges, self.capture.events
        by_owner: dict[int, list[int]] = {}
        for i, owner in enumerate(rg["owner"].tolist()):
            by_owner.setdefault(owner, []).append(i)
        points: dict[int, list[int]] = {}
        for i in np.flatnonzero(ev["kind"] >= 2).tolist():
            points.setdefault(int(ev["owner"][i]), []).append(i)
        text = Text(no_wrap=True, overflow="crop")
        text.append(" " * LABEL_WIDTH + f"0 µs{'':>{max(0, width - 16)}}{span / 1e3:.2f} µs\n", style="dim")

        def column(ns: int) -> int:
            return min(width - 1, max(0, (ns - self.t0) * (width - 1) // span))

        for sm, owner in self.lanes:
            cells = [(" ", "")] * width
            for i in by_owner.get(owner, ()):
                style = self._site_style.get(int(rg["site"][i]), "white")
                for c in range(column(int(rg["begin_ns"][i])), column(int(rg["end_ns"][i])) + 1):
                    cells[c] = ("█", style)
            for i in points.get(owner, ()):
                cells[column(int(ev["timestamp_ns"][i]))] = ("│", "bold white")
            label = f"SM{sm:<3} {self.capture.manifest.owner_name(owner)}"[: LABEL_WIDTH - 1].ljust(LABEL_WIDTH)
            text.append(label, style="dim")
            for glyph, style in cells:
                text.append(glyph, style=style)
            text.append("\n")
        return text


class TimelineView(Vertical):
    DEFAULT_CSS = """
    TimelineView #lanes-scroll { height: 2fr; border: round $panel-lighten-2; }
    TimelineView #sites-table { height: 1fr; border: round $panel-lighten-2; }
    TimelineView #timeline-legend { height: auto; }
    """

    def __init__(self, capture, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.capture = capture

    def compose(self):
        capture = self.capture
        legend = Text()
        for i, site in enumerate(capture.dictionary.sites):
            legend.append(f"█ {site.name}  ", style=SITE_STYLES[i % len(SITE_STYLES)])
        header = capture.header
        legend.append(f"\ngrid {list(header.grid)} block {list(header.block)} launch {header.launch_id}  "
                      f"{capture.event_count} events, {int(capture.ranges['owner'].size)} ranges", style="dim")
        yield Static(legend, id="timeline-legend")
        scroll = VerticalScroll(OwnerLanes(capture), id="lanes-scroll")
        scroll.border_title = "owner lanes (SM / CTA / writer)"
        yield scroll
        table = DataTable(id="sites-table", cursor_type="row", zebra_stripes=True)
        table.border_title = "per-site intervals (µs)"
        table.add_columns("site", "kind", "events", "ranges", "total", "median", "min", "max")
        yield table

    def on_mount(self) -> None:
        sync_table(self.query_one(DataTable), site_table(self.capture))
