"""ABBA statistics: the samples of each side as they arrive, medians, the ratio (or the
timeline overhead) with its interval, and the verdict.

Two sources feed it: ABBA verification verdicts (incumbent vs candidate) and timeline
measure runs (baseline vs instrumented, appended to ``.runs.jsonl`` while they run).
"""

from __future__ import annotations

import math
from statistics import median

from rich.text import Text
from textual.widgets import Static

from console.episode.state import EpisodeState

from .common import NA, dig, fmt, get, number
from .pane import Pane


def ratio_interval(a: list[float], b: list[float]) -> tuple[float | None, float | None, float | None]:
    """b/a as a ratio of medians, with a distribution-free interval on the log shift.

    The interval is None until there are enough samples for 95% (Hodges-Lehmann needs
    more than the four-a-side that one ABBA + BAAB block gives)."""
    if not a or not b or min(a) <= 0 or min(b) <= 0:
        return None, None, None
    point = median(b) / median(a)
    try:
        from console.stats.intervals import hodges_lehmann
    except ImportError:
        return point, None, None
    interval = hodges_lehmann([math.log(v) for v in a], [math.log(v) for v in b])
    if interval.low is None or interval.high is None:
        return point, None, None
    return point, math.exp(interval.low), math.exp(interval.high)


def _side_latency(run) -> float | None:
    return number(dig(run, "result", "latency_us_geomean"))


def _samples(values: list[float], limit: int = 8) -> str:
    shown = " ".join(f"{v:.3g}" for v in values[-limit:])
    return ("… " if len(values) > limit else "") + shown if values else NA


def _runs_key(state: EpisodeState) -> tuple:
    # Measure runs only grow: the count per file says whether anything new arrived.
    return tuple((path, len(runs)) for path, runs in state.measure_runs.items())


class AbbaStats(Pane, can_focus=True):
    title = "ABBA / measure"

    def compose(self):
        yield Static(id="abba-body")

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        if previous is not None and previous.abba == state.abba and _runs_key(previous) == _runs_key(state):
            return
        self.query_one("#abba-body", Static).update(self.render_body(state))

    def render_body(self, state: EpisodeState) -> Text:
        text = Text()
        if state.abba:
            self._verdict(text, state.abba[-1])
        for path, runs in list(state.measure_runs.items())[-1:]:
            self._measure(text, path, list(runs))
        if not text:
            text.append("no ABBA verification or timeline measure yet (a compare, m measure)", style="dim")
        return text

    def _verdict(self, text: Text, verdict) -> None:
        runs = list(get(verdict, "runs") or ())
        sides: dict[str, list[float]] = {"incumbent": [], "candidate": []}
        invalid = 0
        for run in runs:
            latency = _side_latency(run)
            if get(run, "valid") is False or latency is None:
                invalid += 1
                continue
            sides.setdefault(get(run, "revision") or "?", []).append(latency)
        text.append("ABBA verification\n", style="bold")
        for side in ("incumbent", "candidate"):
            values = sides.get(side, [])
            text.append(f" {side:<10} n={len(values)} med {fmt(median(values) if values else None, '.3f')} µs  ")
            text.append(_samples(values) + "\n", style="dim")
        ratio, low, high = ratio_interval(sides["incumbent"], sides["candidate"])
        text.append(f" cand/inc {fmt(ratio, '.4f')}")
        text.append(f" [{low:.4f}, {high:.4f}] 95%\n" if low is not None else "  (interval: too few samples)\n",
                    style="" if low is not None else "dim")
        improvement = number(get(verdict, "improvement_pct"))
        gate = get(verdict, "gate") or NA
        style = {"PASS": "bold green", "FAIL": "bold red", "ERROR": "bold magenta"}.get(gate, "bold")
        text.append(f" improvement {fmt(improvement, '+.2f', '%')}  verdict ")
        text.append(gate, style=style)
        if invalid:
            text.append(f"  ({invalid} invalid run(s))", style="yellow")
        if get(verdict, "error"):
            text.append(f"\n error: {get(verdict, 'error')}", style="red")
        text.append("\n")

    def _measure(self, text: Text, path: str, runs: list) -> None:
        sides: dict[str, list[float]] = {}
        reported = None  # the measure tool's own latest estimate (block or done line)
        for run in runs:
            event = get(run, "event")
            latency = number(get(run, "latency_ms"))
            if event in (None, "run") and latency is not None:
                sides.setdefault(get(run, "variant") or "?", []).append(latency)
            elif number(get(run, "overhead_percent")) is not None or get(run, "verdict"):
                reported = run
        text.append(f"timeline measure  {path.rsplit('/', 1)[-1]}\n", style="bold")
        for side in ("baseline", "instrumented"):
            values = sides.get(side, [])
            text.append(f" {side:<12} n={len(values)} med {fmt(median(values) if values else None, '.4f')} ms  ")
            text.append(_samples(values) + "\n", style="dim")
        ratio, low, high = ratio_interval(sides.get("baseline", []), sides.get("instrumented", []))
        overhead = None if ratio is None else (ratio - 1) * 100
        text.append(f" overhead {fmt(overhead, '+.2f', '%')}")
        if low is not None:
            text.append(f" [{(low - 1) * 100:+.2f}%, {(high - 1) * 100:+.2f}%] 95%\n")
        else:
            text.append("  (interval: too few samples)\n", style="dim")
        if reported is not None:
            low_r, high_r = number(get(reported, "interval_low_percent")), number(get(reported, "interval_high_percent"))
            interval = f" [{low_r:+.2f}%, {high_r:+.2f}%]" if low_r is not None and high_r is not None else ""
            text.append(f" measure: {fmt(number(get(reported, 'overhead_percent')), '+.2f', '%')}{interval}  verdict ")
            verdict = get(reported, "verdict") or NA
            text.append(verdict, style="bold")
            text.append("\n")
