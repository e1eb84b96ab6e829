"""The phase timeline: a Gantt of agent phases per iteration/attempt.

Each iteration/attempt is one lane scaled to its own extent (episodes run for hours, and
one shared axis would shrink every attempt to a dot). The running phase grows with the
clock the app hands in (wall time live, the virtual clock in replay). Partial spans are
hatched, source reads and sandbox jobs are ticks on the line under the lane.

Spans and reads arrive on append-only sequences, so the lanes are folded incrementally:
a new state costs only its new items.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.widget import Widget

from console.episode.state import EpisodeState, PhaseSpan
from console.episode.text import visible

from .common import NA, seconds
from .pane import Pane

# One hue per phase, apart from each other and from the grey of a phase not listed here (the
# terminal's named colours gave two phases the same colour under some themes).
PHASE_STYLES = {
    "profile": "#c678dd",
    "research": "#61afef",
    "planning": "#56b6c2",
    "implementation": "#98c379",
    "correctness": "#e5c07b",
    "benchmark": "#e06c75",
    "recording": "#d19a66",
}
OTHER_PHASE_STYLE = "#7f848e"
LABEL_WIDTH = 18
ID_ABBREVIATIONS = (("episode-", "ep"), ("invocation-", "#"), ("attempt", "att"))


def lane_label(iteration: str, attempt: str) -> str:
    """A short lane name: ``episode-0003/invocation-1`` reads ``ep0003/#1`` (control
    characters made visible: the ids are agent-written)."""
    for long, short in ID_ABBREVIATIONS:
        iteration = iteration.replace(long, short)
        attempt = attempt.replace(long, short)
    return visible(f"{iteration}/{attempt}")


@dataclass(slots=True)
class Lane:
    spans: list = field(default_factory=list)  # (start, end|None, phase, partial)
    reads: list = field(default_factory=list)  # wall times
    first: float | None = None
    last: float | None = None

    def widen(self, *moments: float | None) -> None:
        for moment in moments:
            if moment is None:
                continue
            if self.first is None or moment < self.first:
                self.first = moment
            if self.last is None or moment > self.last:
                self.last = moment


def _append_runs(text: Text, cells: list[tuple[str, str]]) -> None:
    """Append cells, one segment per run of one style: a lane is one or a few segments,
    not one per character, which is what keeps a redraw cheap."""
    run_glyphs: list[str] = []
    run_style = None
    for glyph, style in cells:
        if style != run_style and run_glyphs:
            text.append("".join(run_glyphs), style=run_style)
            run_glyphs = []
        run_style = style
        run_glyphs.append(glyph)
    if run_glyphs:
        text.append("".join(run_glyphs), style=run_style)


def legend(width: int) -> Text:
    """One line naming each phase in its colour, then the glyphs, as far as ``width`` allows."""
    line = Text(no_wrap=True, overflow="crop", end="")
    for phase, style in PHASE_STYLES.items():
        line.append(f"■ {phase} ", style=style)
    line.append(" ▒ partial · read ▲ job", style="dim")
    line.truncate(max(1, width), overflow="ellipsis")
    line.append("\n")
    return line


def _span_times(span: PhaseSpan) -> tuple[float | None, float | None]:
    start = span.start_at if span.start_at is not None else span.end_at
    return start, span.end_at


class PhaseTimeline(Widget, can_focus=True):
    DEFAULT_CSS = """
    PhaseTimeline {
        height: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.now: float | None = None
        self.state: EpisodeState | None = None
        self._lanes: dict[tuple[str, str], Lane] = {}
        self._spans_seen = 0
        self._reads_seen = 0
        self._first_span = None
        self._first_read = None

    def show_state(self, state: EpisodeState, now: float | None) -> None:
        self._fold(state)
        self.state = state
        self.now = now
        self.refresh()

    def tick(self, now: float | None) -> None:
        """Let the running phase grow without a new state."""
        self.now = now
        if self.state is not None and self.state.open_spans:
            self.refresh()

    def _fold(self, state: EpisodeState) -> None:
        spans, reads = state.phase_spans, state.source_reads
        restart = (
            len(spans) < self._spans_seen
            or len(reads) < self._reads_seen
            or (self._spans_seen and spans[0] is not self._first_span)
            or (self._reads_seen and reads[0] is not self._first_read)
        )
        if restart:
            self._lanes.clear()
            self._spans_seen = self._reads_seen = 0
        for index in range(self._spans_seen, len(spans)):
            span = spans[index]
            lane = self._lanes.setdefault((span.iteration_id, span.attempt_id), Lane())
            start, end = _span_times(span)
            if start is None:
                continue
            lane.spans.append((start, end if end is not None else start, span.phase, span.measurement != "explicit"))
            lane.widen(start, end)
        for index in range(self._reads_seen, len(reads)):
            read = reads[index]
            lane = self._lanes.setdefault((read.iteration_id, read.attempt_id), Lane())
            if read.at is not None:
                lane.reads.append(read.at)
                lane.widen(read.at)
        self._spans_seen, self._reads_seen = len(spans), len(reads)
        self._first_span = spans[0] if len(spans) else None
        self._first_read = reads[0] if len(reads) else None

    def lane_keys(self) -> list[tuple[str, str]]:
        keys = set(self._lanes)
        if self.state is not None:
            keys.update((s.iteration_id, s.attempt_id) for s in self.state.open_spans)
        return sorted(keys)

    def render(self) -> Text:
        state = self.state
        if state is None:
            return Text("waiting for telemetry…", style="dim")
        width = max(20, self.size.width - LABEL_WIDTH - 20)
        text = Text(no_wrap=True, overflow="crop")
        open_by_lane = {(s.iteration_id, s.attempt_id): s for s in state.open_spans}
        ops_by_lane: dict[tuple[str, str], list] = {}
        for op in state.sandbox_operations:
            if op.started_at is not None:
                ops_by_lane.setdefault((op.iteration_id, op.attempt_id), []).append(op)
        keys = self.lane_keys()
        # Not laid out yet (the pane was folded until now): draw everything, the next frame crops.
        height = self.size.height or 2 * len(keys) + 2
        # The legend goes first when the lanes leave it a line (the totals name each phase in its colour too).
        if height >= 2 * len(keys) + 2:
            text.append_text(legend(self.size.width or 200))
        # Two lines a lane and one for the totals; when they do not all fit, one more says how many are left out.
        room = max(1, (height - 1) // 2)
        if len(keys) > room:
            room = max(1, (height - 2) // 2)
            text.append(f"… {len(keys) - room} earlier lane(s)\n", style="dim")
            keys = keys[-room:]
        if not keys:
            text.append("no phase markers yet\n", style="dim")
        for key in keys:
            self._render_lane(text, key, width, open_by_lane.get(key), ops_by_lane.get(key, ()))
        lines_left = max(1, height - text.plain.count("\n"))
        text.append_text(self._totals(state, self.size.width, lines_left))
        return text

    def _render_lane(self, text: Text, key, width: int, running: PhaseSpan | None, ops) -> None:
        lane = self._lanes.get(key) or Lane()
        first, last = lane.first, lane.last
        now = self.now
        spans = list(lane.spans)
        if running is not None and running.start_at is not None:
            end = max(now, running.start_at) if now is not None else running.start_at
            spans.append((running.start_at, end, running.phase, False))
            first = running.start_at if first is None else min(first, running.start_at)
            last = end if last is None else max(last, end)
        for op in ops:
            end = op.started_at + op.duration_seconds if op.duration_seconds is not None else op.started_at
            first = op.started_at if first is None else min(first, op.started_at)
            last = end if last is None else max(last, end)
        label = lane_label(*key)[: LABEL_WIDTH - 1].ljust(LABEL_WIDTH)
        if first is None or last is None:
            text.append(label + NA + "\n")
            return
        extent = max(last - first, 1e-9)
        bar = [(" ", "")] * width

        def column(moment: float) -> int:
            return min(width - 1, max(0, int((moment - first) / extent * (width - 1))))

        for start, end, phase, partial in spans:
            style = PHASE_STYLES.get(phase, OTHER_PHASE_STYLE)
            a, b = column(start), column(end)
            glyph = "▒" if partial else "█"
            for i in range(a, max(a, b) + 1):
                bar[i] = (glyph, style)
        if running is not None and running.start_at is not None:
            bar[column(spans[-1][1])] = ("▶", "bold " + PHASE_STYLES.get(running.phase, OTHER_PHASE_STYLE))
        ticks = [(" ", "")] * width
        for moment in lane.reads:
            ticks[column(moment)] = ("·", "bright_white")
        for op in ops:
            style = {"succeeded": "green", "failed": "red"}.get(op.status, "yellow")
            ticks[column(op.started_at)] = ("▲", style)
        text.append(label, style="bold" if running is not None else "")
        _append_runs(text, bar)
        text.append(f" {seconds(extent)}", style="dim")
        text.append(visible(f" {running.phase}"[:14]) if running is not None else "", style="bold")
        text.append("\n" + " " * LABEL_WIDTH)
        _append_runs(text, ticks)
        text.append("\n")

    def _totals(self, state: EpisodeState, width: int, lines: int) -> Text:
        """The phases largest first (the state's order), then orchestration, wrapped to
        ``width`` on at most ``lines`` lines; a cut ends in "…" (Enter shows them all)."""
        parts = Text("totals ", style="dim")
        for phase, total in state.phase_totals.items():
            style = PHASE_STYLES.get(phase, OTHER_PHASE_STYLE)
            mark = "" if total.measurement == "explicit" else "~"
            parts.append(visible(f"{phase} {mark}{seconds(total.wall_seconds)} ×{total.intervals}  "), style=style)
        parts.append(f"orchestration {seconds(state.orchestration_seconds)}", style="dim")
        if not width:  # not laid out yet: the next frame wraps
            return parts
        wrapped = list(parts.wrap(self.app.console, width))
        if len(wrapped) > lines:
            wrapped = wrapped[:lines]
            last = wrapped[-1]
            last.rstrip()
            last.truncate(width - 1)
            last.append("…", style="dim")
        return Text("\n").join(wrapped)


class PhaseTimelinePane(Pane):
    title = "Phases"

    def compose_body(self):
        yield PhaseTimeline(classes="pane-body")

    def empty_note(self, state: EpisodeState) -> str | None:
        if state.phase_spans or state.open_spans or state.source_reads or state.sandbox_operations:
            return None
        return "no phase markers yet (telemetry.jsonl)"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        super().show_state(state, now)
        if self.has_body:
            self.query_one(PhaseTimeline).show_state(state, now)

    def tick(self, now: float | None) -> None:
        super().tick(now)
        for timeline in self.query(PhaseTimeline):  # absent while the pane mounts or unmounts
            timeline.tick(now)

    def focus_target(self) -> Widget | None:
        if not self.has_body or self.empty:
            return None
        return self.query_one(PhaseTimeline)

    def full_text(self) -> tuple[str, str] | None:
        state = self.state
        if state is None or self.empty:
            return None
        lines = []
        if state.active_phase is not None:
            active = state.active_phase
            lines += [f"running: {active.phase} ({active.iteration_id}/{active.attempt_id})", ""]
        for phase, total in state.phase_totals.items():
            lines.append(f"{phase}: {seconds(total.wall_seconds)} in {total.intervals} interval(s), {total.measurement}")
        lines.append(f"orchestration: {seconds(state.orchestration_seconds)}")
        if state.partial_reasons:
            # span reasons (overlapping …) and markers of no known phase, which make no span
            lines.append("marker problems: " + ", ".join(f"{reason} {n}" for reason, n in state.partial_reasons.items()))
        # the telemetry's own count; jobs launched without tracing are in the Jobs pane only
        lines.append(f"source reads: {len(state.source_reads)}  sandbox operations traced: {len(state.sandbox_operations)}")
        return "Phases", "\n".join(lines)
