"""Latency comparisons derived from the runs in the state, computed once per snapshot.

Every front door shows these same numbers: the console's ABBA pane draws them,
``status --json`` prints them, a replay recomputes them from the same events. Run files
only grow, so a comparison is recomputed only when its runs or its verdict changed (the
live console takes a snapshot after every batch of events).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from console.stats.ratio import centre, latency_ratio

from .state import AbbaComparison, MeasureComparison

if TYPE_CHECKING:
    from console.formats.abba import AbbaRun, AbbaVerdict
    from console.formats.timeline import MeasureRun

RUNS_NAME = "runs.jsonl"


def verdict_directory(verdict: AbbaVerdict) -> str | None:
    """The verification directory a verdict belongs to (its artifact is the directory, or
    the result.json the verdict was scored from)."""
    artifact = verdict.artifact
    if not artifact:
        return None
    return os.path.dirname(artifact) if artifact.endswith("result.json") else artifact.rstrip("/")


def abba_comparison(directory: str | None, runs: Sequence[AbbaRun], verdict: AbbaVerdict | None) -> AbbaComparison:
    sides: dict[str, list[float]] = {"incumbent": [], "candidate": []}
    invalid = 0
    for run in runs:
        latency = run.result.latency_us_geomean if run.result is not None else None
        if run.valid and latency is not None and run.revision in sides:
            sides[run.revision].append(latency)
        else:
            invalid += 1
    ratio = latency_ratio(sides["incumbent"], sides["candidate"], center="geomean", names="cand/inc")
    incumbent, candidate = sides["incumbent"], sides["candidate"]
    return AbbaComparison(directory, len(runs), invalid, tuple(incumbent), tuple(candidate),
                          centre(incumbent, "geomean"), centre(candidate, "geomean"), ratio, verdict)


def measure_comparison(path: str, runs: Sequence[MeasureRun]) -> MeasureComparison:
    sides: dict[str, list[float]] = {"baseline": [], "instrumented": []}
    reported = None  # the measure tool's own latest estimate (a block or done line)
    for run in runs:
        if run.event == "run" and run.latency_ms is not None and run.variant in sides:
            sides[run.variant].append(run.latency_ms)
        elif run.overhead_percent is not None or run.verdict:
            reported = run
    ratio = latency_ratio(sides["baseline"], sides["instrumented"], center="median", names="instr/base")
    baseline, instrumented = sides["baseline"], sides["instrumented"]
    return MeasureComparison(path, tuple(baseline), tuple(instrumented), centre(baseline, "median"),
                             centre(instrumented, "median"), ratio, reported)


class Comparisons:
    """The comparisons of successive snapshots, each recomputed only when its inputs moved."""

    def __init__(self) -> None:
        # Keyed by the identity of the last run and of the verdict; each entry keeps those
        # objects alive, so an identity cannot be reused for another record meanwhile.
        self._abba: dict[tuple[str | None, int, int, int], tuple[AbbaComparison, object, object]] = {}
        self._measure: dict[tuple[str, int, int], tuple[MeasureComparison, object]] = {}

    def abba(self, verdicts: Mapping[str, AbbaVerdict], runs_by_path: Mapping[str, Sequence[AbbaRun]],
             at: Mapping[str, float | None]) -> tuple[AbbaComparison, ...]:
        """One comparison per verification directory, newest first; the runs are those of
        ``runs.jsonl`` while it grows, else those the verdict carries.

        ``verdicts`` and ``runs_by_path`` are keyed by the file they were read from, ``at``
        gives each file's time (its newest event's: neither format states a time, so that is
        the file's modification time). A verification is as new as its newest file, so the
        one in flight leads; one of unknown time goes last, and ties go by directory."""
        by_directory: dict[str, list[AbbaVerdict]] = {}
        newest: dict[str, float | None] = {}
        undirected = []
        claims: dict[str, list[tuple[str, AbbaVerdict]]] = {}
        for path, verdict in sorted(verdicts.items()):
            directory = verdict_directory(verdict)
            if directory is None:
                undirected.append((at.get(path), verdict))
            else:
                claims.setdefault(directory, []).append((path, verdict))
        for directory, claimed in claims.items():
            # The verdict filed in the verification its artifact names is that verification's;
            # one filed elsewhere naming it too (a copy, or a file naming another's artifact)
            # is listed where it was filed, never dropped unsaid.
            claimed.sort(key=lambda claim: os.path.dirname(claim[0]) != directory)  # stable
            for rank, (path, verdict) in enumerate(claimed):
                own = os.path.dirname(path)
                place = directory if rank == 0 else own if own not in claims and own not in by_directory else path
                by_directory.setdefault(place, []).append(verdict)
                newest[place] = _later(newest.get(place), at.get(path))
        for path in runs_by_path:
            directory = os.path.dirname(path)
            by_directory.setdefault(directory, [])
            newest[directory] = _later(newest.get(directory), at.get(path))
        for live, archived in _archived_copies(by_directory).items():
            # One verification: AKA's supervisor copies a finished one into the episode's
            # archive while the live directory still exists (phase ``promoted``).
            newest[archived] = _later(newest.get(archived), newest.pop(live, None))
            verdicts_of_live = by_directory.pop(live)
            if not by_directory[archived]:
                by_directory[archived] = verdicts_of_live
        wanted: list[tuple[float | None, str | None, Sequence[AbbaRun], AbbaVerdict | None]] = []
        for directory in sorted(by_directory):
            found = by_directory[directory][0] if by_directory[directory] else None
            runs = runs_by_path.get(os.path.join(directory, RUNS_NAME))
            if runs is None:
                runs = found.runs if found is not None and found.runs is not None else ()
            wanted.append((newest.get(directory), directory, runs, found))
        wanted.extend((moment, None, verdict.runs or (), verdict) for moment, verdict in undirected)
        wanted.sort(key=lambda entry: (entry[0] is None, -(entry[0] or 0.0)))  # stable: ties keep directory order
        done = {}
        for _, directory, runs, shown in wanted:
            last = runs[-1] if runs else None
            key = (directory, len(runs), id(last), id(shown))
            known = self._abba.get(key)
            done[key] = known or (abba_comparison(directory, runs, shown), last, shown)
        self._abba = done
        return tuple(entry[0] for entry in done.values())

    def measure(self, runs_by_path: Mapping[str, Sequence[MeasureRun]]) -> tuple[MeasureComparison, ...]:
        done = {}
        for path, runs in sorted(runs_by_path.items()):
            last = runs[-1] if runs else None
            key = (path, len(runs), id(last))
            done[key] = self._measure.get(key) or (measure_comparison(path, runs), last)
        self._measure = done
        return tuple(entry[0] for entry in done.values())


def _archived_copies(directories: Mapping[str, object]) -> dict[str, str]:
    """Live verification directories (``…/.atrex_long_horizon_verify/<uuid>``) whose copy is
    also in an episode's archive (``…/episodes/eNNNN/verification_runtime/<uuid>``): live
    directory -> archived copy."""
    archived = {os.path.basename(d): d for d in directories
                if os.path.basename(os.path.dirname(d)) == "verification_runtime"}
    return {d: archived[os.path.basename(d)] for d in directories
            if os.path.basename(os.path.dirname(d)) == ".atrex_long_horizon_verify" and os.path.basename(d) in archived}


def _later(known: float | None, moment: float | None) -> float | None:
    """The later of two times, either of which may be unknown."""
    if known is None or moment is None:
        return moment if known is None else known
    return max(known, moment)
