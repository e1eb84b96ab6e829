"""ABBA statistics: the samples of each side as they arrive, medians, the ratio (or the
timeline overhead) with its interval, and the verdict.

Two sources feed it: ABBA verifications (incumbent vs candidate; ``runs.jsonl`` grows one
run at a time, ``result.json`` lands with the verdict) and timeline measure runs (baseline
vs instrumented, appended to ``.runs.jsonl`` while they run). The verification shown is the
one whose runs or verdict arrived last.
"""

from __future__ import annotations

import math
import os
from statistics import median

from rich.text import Text
from textual.widgets import Static

from console.episode.state import EpisodeState
from console.stats.intervals import hodges_lehmann

from .common import NA, fmt, get, number
from .pane import Pane

CONFIDENCE = 0.95
REVISIONS = ("incumbent", "candidate")


def ratio_interval(a: list[float], b: list[float]) -> tuple[float | None, float | None, float | None, float | None]:
    """(b/a as a ratio of medians, low, high, coverage) of a distribution-free interval.

    The interval is Hodges-Lehmann on the log-latency shift, so it bounds the ratio. One
    ABBA schedule gives two or three runs a side, too few for 95%; then the widest
    interval (the extreme pairwise ratios) is given with its exact coverage, which says
    how little those samples can tell. Too few for even that: low, high, coverage None.
    """
    if not a or not b or min(a) <= 0 or min(b) <= 0:
        return None, None, None, None
    point = median(b) / median(a)
    log_a, log_b = [math.log(v) for v in a], [math.log(v) for v in b]
    interval = hodges_lehmann(log_a, log_b, CONFIDENCE)
    if interval.low is None and len(a) >= 2 and len(b) >= 2:
        widest = 1.0 - 2.0 / math.comb(len(a) + len(b), len(a))
        interval = hodges_lehmann(log_a, log_b, widest - 1e-9)  # a hair under: k = 1 despite rounding
    if interval.low is None or interval.high is None:
        return point, None, None, None
    return point, math.exp(interval.low), math.exp(interval.high), interval.coverage


def abba_sides(runs) -> tuple[dict[str, list[float]], int]:
    """Latencies (µs) of the valid runs per revision, in arrival order, and the invalid count."""
    sides: dict[str, list[float]] = {revision: [] for revision in REVISIONS}
    invalid = 0
    for run in runs:
        if run.valid and run.revision in sides:
            sides[run.revision].append(run.result.latency_us_geomean)
        else:
            invalid += 1
    return sides, invalid


def verdict_dir(verdict) -> str | None:
    """The verification directory a verdict belongs to (its artifact is the directory, or
    the result.json the verdict was scored from)."""
    artifact = verdict.artifact
    if not artifact:
        return None
    return os.path.dirname(artifact) if artifact.endswith("result.json") else artifact.rstrip("/")


def _samples(values: list[float], limit: int = 8) -> str:
    shown = " ".join(f"{v:.4g}" for v in values[-limit:])
    return ("… " if len(values) > limit else "") + shown if values else NA


def _side(text: Text, side: str, values: list[float], spec: str, unit: str) -> None:
    text.append(f" {side} n={len(values)} med {fmt(median(values) if values else None, spec)} {unit}\n")
    text.append(f"   {_samples(values)}\n", style="dim")


def _interval(text: Text, low: float | None, high: float | None, coverage: float | None, scale) -> None:
    if low is None:
        text.append("   interval: too few samples\n", style="dim")
        return
    text.append(f"   [{scale(low)}, {scale(high)}] {coverage * 100:.0f}%",
                style="" if coverage >= CONFIDENCE - 1e-9 else "yellow")
    text.append(" HL\n", style="dim")


class AbbaStats(Pane, can_focus=True):
    title = "ABBA / measure"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._counts: dict[str, int] = {}  # verification dir -> runs seen (+1 once its verdict is in)
        self.shown_dir: str | None = None

    DEFAULT_CSS = """
    AbbaStats #abba-body { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def compose(self):
        yield Static(id="abba-body")

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        if previous is not None and previous.abba == state.abba and _runs_key(previous) == _runs_key(state):
            return
        self.shown_dir = self._follow(state)
        self.query_one("#abba-body", Static).update(self.render_body(state))

    def _follow(self, state: EpisodeState) -> str | None:
        """The verification to show: the last one that moved (a run or its verdict arrived)."""
        counts: dict[str, int] = {os.path.dirname(path): len(runs) for path, runs in state.abba_runs.items()}
        for verdict in state.abba:
            directory = verdict_dir(verdict)
            if directory is not None:
                counts[directory] = counts.get(directory, 0) + 1
        moved = [d for d in sorted(counts) if counts[d] > self._counts.get(d, 0)]
        self._counts = counts
        if moved:
            return moved[-1]
        if self.shown_dir in counts:
            return self.shown_dir
        return sorted(counts)[-1] if counts else None

    def render_body(self, state: EpisodeState) -> Text:
        text = Text()
        if self.shown_dir is not None:
            self._verification(text, state, self.shown_dir)
        for path, runs in list(state.measure_runs.items())[-1:]:
            self._measure(text, path, list(runs))
        if not text:
            text.append("no ABBA verification or timeline\nmeasure yet (keys a, m)", style="dim")
        return text

    def _verification(self, text: Text, state: EpisodeState, directory: str) -> None:
        verdict = next((v for v in state.abba if verdict_dir(v) == directory), None)
        runs = state.abba_runs.get(os.path.join(directory, "runs.jsonl"))
        if runs is None:
            runs = verdict.runs if verdict is not None and verdict.runs is not None else ()
        sides, invalid = abba_sides(runs)
        text.append(f"ABBA {os.path.basename(directory)[:12]}", style="bold")
        text.append(f"  {len(runs)} run(s)\n", style="dim")
        for side in REVISIONS:
            _side(text, side, sides[side], ".3f", "µs")
        ratio, low, high, coverage = ratio_interval(sides["incumbent"], sides["candidate"])
        text.append(f" cand/inc {fmt(ratio, '.4f')}\n")
        _interval(text, low, high, coverage, lambda r: f"{r:.4f}")
        if invalid:
            text.append(f" {invalid} run(s) invalid (exit, correctness)\n", style="yellow")
        if verdict is None:
            text.append(" verdict: waiting for result.json\n", style="dim")
            return
        style = {"PASS": "bold green", "FAIL": "bold red", "ERROR": "bold magenta"}.get(verdict.gate, "bold")
        text.append(f" improvement {fmt(verdict.improvement_pct, '+.2f', '%')}  ")
        text.append(verdict.gate, style=style)
        if verdict.error:
            text.append(f"\n {verdict.error}", style="red")
        text.append("\n")

    def _measure(self, text: Text, path: str, runs: list) -> None:
        sides: dict[str, list[float]] = {}
        reported = None  # the measure tool's own latest estimate (block or done line)
        for run in runs:
            latency = number(get(run, "latency_ms"))
            if get(run, "event") == "run" and latency is not None:
                sides.setdefault(get(run, "variant") or "?", []).append(latency)
            elif number(get(run, "overhead_percent")) is not None or get(run, "verdict"):
                reported = run
        text.append(f"measure {path.rsplit('/', 1)[-1]}\n", style="bold")
        for side in ("baseline", "instrumented"):
            _side(text, side, sides.get(side, []), ".4f", "ms")
        ratio, low, high, coverage = ratio_interval(sides.get("baseline", []), sides.get("instrumented", []))
        text.append(f" overhead {fmt(None if ratio is None else (ratio - 1) * 100, '+.2f', '%')}\n")
        _interval(text, low, high, coverage, lambda r: f"{(r - 1) * 100:+.2f}%")
        if reported is not None:
            low_r, high_r = number(get(reported, "interval_low_percent")), number(get(reported, "interval_high_percent"))
            interval = f" [{low_r:+.2f}%, {high_r:+.2f}%]" if low_r is not None and high_r is not None else ""
            text.append(f" tool: {fmt(number(get(reported, 'overhead_percent')), '+.2f', '%')}{interval} ")
            text.append(get(reported, "verdict") or NA, style="bold")
            text.append("\n")


def _runs_key(state: EpisodeState) -> tuple:
    # Run files only grow: the count per file says whether anything new arrived.
    return (tuple((path, len(runs)) for path, runs in state.measure_runs.items()),
            tuple((path, len(runs)) for path, runs in state.abba_runs.items()))
