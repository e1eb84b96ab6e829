"""ABBA statistics: the samples of each side as they arrive, the ratio with its interval,
and the verdict; and the same for a timeline overhead measurement while it runs.

Nothing is computed here: ``EpisodeState.abba_comparisons`` and ``measure_comparisons``
hold the numbers (``console.episode.comparisons``), the same ones ``status --json`` prints,
in the same order: the newest verification first (the one in flight, if one is). The pane
shows that one; when there are more, its subtitle says so and Enter shows every verdict.
"""

from __future__ import annotations

import os

from rich.text import Text
from textual.widgets import Static

from console.episode.state import AbbaComparison, EpisodeState, MeasureComparison
from console.episode.text import visible

from .common import NA, fmt, plain
from .pane import Pane

GATE_STYLES = {"PASS": "bold green", "FAIL": "bold red", "ERROR": "bold magenta"}


def _samples(values: tuple[float, ...], limit: int = 8) -> str:
    shown = " ".join(f"{v:.4g}" for v in values[-limit:])
    return ("… " if len(values) > limit else "") + shown if values else NA


def _side(text: Text, side: str, values: tuple[float, ...], centre: float | None, spec: str, unit: str,
          centre_name: str) -> None:
    text.append(f" {side} n={len(values)} {centre_name} {fmt(centre, spec)} {unit}\n")
    text.append(f"   {_samples(values)}\n", style="dim")


def _ratio(text: Text, comparison: AbbaComparison | MeasureComparison) -> None:
    """The comparison's own lines; the interval is yellow when it covers less than asked."""
    ratio = comparison.ratio
    weak = ratio.coverage is None or ratio.coverage < ratio.confidence - 1e-9
    for index, line in enumerate(ratio.lines):
        text.append(f" {visible(line)}\n", style="yellow" if weak and index else "")


class AbbaStats(Pane, can_focus=True):
    title = "ABBA / measure"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self.shown_dir: str | None = None

    DEFAULT_CSS = """
    AbbaStats #abba-body { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def compose_body(self):
        yield Static(id="abba-body", classes="pane-body")

    def empty_note(self, state: EpisodeState) -> str | None:
        if state.abba_comparisons or state.measure_comparisons:
            return None
        return "no ABBA verification or timeline measure yet (a, m)"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        count = len(state.abba_comparisons)
        subtitle = f"newest of {count} · Enter" if count > 1 else ""
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if not self.has_body:
            return
        if previous is not None and previous.abba_comparisons == state.abba_comparisons \
                and previous.measure_comparisons == state.measure_comparisons:
            return
        newest = state.abba_comparisons[0] if state.abba_comparisons else None
        self.shown_dir = newest.directory if newest is not None else None
        self.query_one("#abba-body", Static).update(self.render_body(state))

    def render_body(self, state: EpisodeState, every: bool = False) -> Text:
        """The newest verification (``every``: each of them, newest first) and the last measure."""
        text = Text()
        for index, comparison in enumerate(state.abba_comparisons if every else state.abba_comparisons[:1]):
            if index:
                text.append("\n")
            self._verification(text, comparison, whole=every)
        for measure in state.measure_comparisons[-1:]:
            self._measure(text, measure)
        if not text:
            text.append("no ABBA verification or timeline\nmeasure yet (keys a, m)", style="dim")
        return text

    def _verification(self, text: Text, comparison: AbbaComparison, whole: bool = False) -> None:
        """The verdict and the ratio lead: on a small terminal they are what stays in sight.
        ``whole``: the directory in full too (the detail view tells verifications apart by it)."""
        verdict = comparison.verdict
        if verdict is not None:  # first: the pane is 26 columns wide at 80x24
            text.append_text(plain(verdict.gate, GATE_STYLES.get(verdict.gate, "bold")))
            text.append(f" {fmt(verdict.improvement_pct, '+.2f', '%')}  ")
        text.append(visible(f"ABBA {os.path.basename(comparison.directory or '')[:8]}  "), style="bold")
        text.append(f"{comparison.runs} run(s)\n", style="dim")
        if whole:
            text.append(visible(comparison.directory or 'no directory named') + "\n", style="dim")
        if verdict is not None and verdict.error:
            text.append_text(plain(f" {verdict.error}", "red"))
            text.append("\n")
        _ratio(text, comparison)
        if comparison.invalid_runs:
            text.append(f" {comparison.invalid_runs} run(s) invalid (exit, correctness)\n", style="yellow")
        _side(text, "incumbent", comparison.incumbent_us, comparison.incumbent_geomean_us, ".3f", "µs", "geomean")
        _side(text, "candidate", comparison.candidate_us, comparison.candidate_geomean_us, ".3f", "µs", "geomean")
        if verdict is None:
            text.append(" verdict: waiting for result.json\n", style="dim")

    def _measure(self, text: Text, measure: MeasureComparison) -> None:
        text.append(visible(f"measure {measure.path.rsplit('/', 1)[-1]}") + "\n", style="bold")
        _side(text, "baseline", measure.baseline_ms, measure.baseline_median_ms, ".4f", "ms", "med")
        _side(text, "instrumented", measure.instrumented_ms, measure.instrumented_median_ms, ".4f", "ms", "med")
        _ratio(text, measure)
        reported = measure.reported
        if reported is not None:
            low, high = reported.interval_low_percent, reported.interval_high_percent
            interval = f" [{low:+.2f}%, {high:+.2f}%]" if low is not None and high is not None else ""
            text.append(f" tool: {fmt(reported.overhead_percent, '+.2f', '%')}{interval} ")
            text.append_text(plain(reported.verdict, "bold"))
            text.append("\n")

    def full_text(self) -> tuple[str, str] | None:
        if self.state is None or self.empty:
            return None
        count = len(self.state.abba_comparisons)
        title = f"{self.title}: {count} verifications, newest first" if count > 1 else self.title
        return title, self.render_body(self.state, every=True).plain
