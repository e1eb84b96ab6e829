"""The intra-kernel timeline: owner lanes (SM / CTA / writer) over %globaltimer time, and
the per-site interval table.

Lanes share one axis (one kernel launch lasts micro- to milliseconds, so a shared axis is
what shows the overlap between CTAs). A capture may hold thousands of owners: the lanes are
sorted by SM then owner and the view scrolls. The lanes are drawn from the decoded capture
(``console.timeline.capture_view``, computed before the screen got it): they are the capture
itself, too large for the episode state. The site table draws the receipt's ``sites`` from the
state (``show_sites``), the numbers ``status --json`` prints.
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from console.episode.text import visible

from .common import fmt, sync_table

SITE_STYLES = ("green", "cyan", "magenta", "yellow", "blue", "red", "bright_green", "bright_cyan")
LABEL_WIDTH = 30


def site_table(sites) -> list[tuple[str, tuple[str, ...]]]:
    """Rows (site, kind, records, ranges, total, median, min, max), durations in µs, one per
    site of a receipt's ``sites`` (console.formats.timeline.TimelineSite, in ns)."""

    def us(ns: float | None) -> str:
        return fmt(None if ns is None else ns / 1e3, ".3f")

    return [
        (str(site.site_id), (site.name, site.kind, str(site.records), str(site.ranges), us(site.total_ns),
                             us(site.median_ns), us(site.min_ns), us(site.max_ns)))
        for site in sites
    ]


class OwnerLanes(Widget):
    DEFAULT_CSS = """
    OwnerLanes { height: auto; }
    """

    def __init__(self, view, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = view
        self.lanes = [(lane.sm, lane.owner) for lane in view.lanes]
        self._site_style = {site_id: SITE_STYLES[i % len(SITE_STYLES)] for i, (site_id, _) in enumerate(view.sites)}

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lanes) + 1

    def render(self) -> Text:
        width = max(10, self.size.width - LABEL_WIDTH - 1)
        span = max(1, self.view.span_ns)
        text = Text(no_wrap=True, overflow="crop")
        text.append(" " * LABEL_WIDTH + f"0 µs{'':>{max(0, width - 16)}}{span / 1e3:.2f} µs\n", style="dim")

        def column(ns: int) -> int:
            return min(width - 1, max(0, ns * (width - 1) // span))

        for lane in self.view.lanes:
            cells = [(" ", "")] * width
            for site, begin, end in lane.ranges:
                style = self._site_style.get(site, "white")
                for c in range(column(begin), column(end) + 1):
                    cells[c] = ("█", style)
            for moment in lane.instants:
                cells[column(moment)] = ("│", "bold white")
            label = visible(f"SM{lane.sm:<3} {lane.name}")[: LABEL_WIDTH - 1].ljust(LABEL_WIDTH)
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
    TimelineView #sites-note { height: auto; }
    """

    def __init__(self, view, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = view

    def compose(self):
        view = self.view
        legend = Text()
        for i, (_, name) in enumerate(view.sites):
            legend.append(visible(f"█ {name}  "), style=SITE_STYLES[i % len(SITE_STYLES)])
        legend.append(f"\ngrid {list(view.grid)} block {list(view.block)} launch {view.launch_id}  "
                      f"{view.event_count} events, {view.range_count} ranges", style="dim")
        yield Static(legend, id="timeline-legend")
        scroll = VerticalScroll(OwnerLanes(view), id="lanes-scroll")
        scroll.border_title = "owner lanes (SM / CTA / writer)"
        yield scroll
        table = DataTable(id="sites-table", cursor_type="row", zebra_stripes=True)
        table.border_title = "per-site intervals (µs)"
        table.add_columns("site", "kind", "records", "ranges", "total", "median", "min", "max")
        yield table
        yield Static(id="sites-note")

    def show_sites(self, sites, why: str | None) -> None:
        """The receipt's ``sites`` as the state holds them, or why it holds none."""
        sync_table(self.query_one(DataTable), site_table(sites or ()))
        self.query_one("#sites-note", Static).update(Text(visible(why or ""), style="dim"))
