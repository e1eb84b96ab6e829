"""Phase time as the Atrex Kernel Agent measures it: a telemetry file read as one sequence.

AKA's telemetry reader gives a phase an interval only for a start followed by the end of
the same phase; once markers go wrong it stops measuring until the nesting unwinds, and
says why with a reason code. Its rules, which this module follows marker for marker:

- a marker whose phase is not one of the seven (``PHASES``) or that has no monotonic time
  is ``invalid_phase_marker`` and ignored;
- a start while another phase is open is ``overlapping_phase``: neither gets an interval,
  and both stay open on a stack of broken phases until each is ended;
- an end with nothing open is ``orphan_phase_end``; an end of another phase than the open
  one is ``mismatched_phase_end`` (the open one joins the broken stack); an end earlier than
  its start is ``negative_phase_duration``;
- while the broken stack is not empty, a start is one more ``overlapping_phase``, the end of
  its top phase pops it, the end of a phase deeper in it is ``mismatched_phase_end`` (popped
  through), any other end ``orphan_phase_end``; nothing is measured;
- at the end of the file a phase still open, or a broken stack, is ``unclosed_phase``.

A phase with no interval is ``unavailable`` (its wall time ``None``): an open phase has no
interval. One with intervals is ``partial`` when any marker of it was in a broken sequence,
else ``explicit``. The file's measurement is ``partial`` when any reason was found, else
``explicit`` when any phase was measured, else ``unavailable``.

The reducer's spans (reducer.py) keep every marker as a span, partial ones too, and pair per
attempt; this is the figure AKA itself reports for the same file, so both can be compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import msgspec

from console.formats.telemetry import TelemetryRecord
from console.formats.telemetry_builders import PHASES

INVALID_MARKER = "invalid_phase_marker"
OVERLAPPING = "overlapping_phase"
MISMATCHED_END = "mismatched_phase_end"
ORPHAN_END = "orphan_phase_end"
NEGATIVE_DURATION = "negative_phase_duration"
UNCLOSED = "unclosed_phase"

_KNOWN = frozenset(PHASES)


class PhaseMeasure(msgspec.Struct, frozen=True):
    wall_seconds: float | None  # None: no interval (unavailable)
    interval_count: int
    measurement: str  # explicit | partial | unavailable


class PhaseTiming(msgspec.Struct, frozen=True):
    """What AKA's reader says about one telemetry file (or several, combined)."""

    phases: Mapping[str, PhaseMeasure]  # every one of PHASES, in their order
    measurement: str  # explicit | partial | unavailable
    reason_codes: tuple[str, ...]  # sorted, each once

    def to_json(self) -> dict[str, object]:
        return {
            "measurement": self.measurement,
            "reason_codes": list(self.reason_codes),
            "phases": {name: msgspec.to_builtins(entry) for name, entry in self.phases.items()},
        }


class PhaseTimer:
    """AKA's phase reader over the markers of one file, fed in file order; ``timing()``
    answers at any point (an open phase is ``unclosed_phase`` until its end arrives)."""

    __slots__ = ("_active", "_broken", "_counts", "_invalid", "_reasons", "_started", "_walls")

    def __init__(self) -> None:
        self._walls = dict.fromkeys(PHASES, 0.0)
        self._counts = dict.fromkeys(PHASES, 0)
        self._invalid: set[str] = set()
        self._reasons: set[str] = set()
        self._active: str | None = None
        self._started = 0.0
        self._broken: list[str] = []  # phases opened or ended out of order, innermost last

    def read(self, records: Iterable[TelemetryRecord]) -> None:
        """Read the ``phase_started`` / ``phase_completed`` records among ``records``.

        This loop runs once per telemetry line of a cold ingest: the open phase is kept in
        local variables while it runs.
        """
        walls, counts, invalid, reasons, broken = self._walls, self._counts, self._invalid, self._reasons, self._broken
        active, started = self._active, self._started
        for record in records:
            event = record.event
            if event != "phase_started" and event != "phase_completed":
                continue
            phase, monotonic = record.phase, record.monotonic_seconds
            if phase is None or phase not in _KNOWN or monotonic is None:
                reasons.add(INVALID_MARKER)
            elif broken:
                invalid.add(phase)
                self._unwind(phase, event == "phase_started")
            elif event == "phase_started":
                if active is None:
                    active, started = phase, monotonic
                else:
                    invalid.update((active, phase))
                    reasons.add(OVERLAPPING)
                    broken.extend((active, phase))
                    active = None
            elif active is None:
                invalid.add(phase)
                reasons.add(ORPHAN_END)
            elif active != phase:
                invalid.update((active, phase))
                reasons.add(MISMATCHED_END)
                broken.append(active)
                active = None
            elif monotonic < started:
                invalid.add(phase)
                reasons.add(NEGATIVE_DURATION)
                active = None
            else:
                walls[phase] += monotonic - started
                counts[phase] += 1
                active = None
        self._active, self._started = active, started

    def _unwind(self, phase: str, starting: bool) -> None:
        broken = self._broken
        if starting:
            broken.append(phase)
            self._reasons.add(OVERLAPPING)
        elif phase == broken[-1]:
            broken.pop()
        elif phase in broken:
            self._reasons.add(MISMATCHED_END)
            while broken.pop() != phase:  # down to its innermost opening, that one included
                pass
        else:
            self._reasons.add(ORPHAN_END)

    def timing(self) -> PhaseTiming:
        invalid, reasons = set(self._invalid), set(self._reasons)
        if self._active is not None:
            invalid.add(self._active)
            reasons.add(UNCLOSED)
        if self._broken:
            invalid.update(self._broken)
            reasons.add(UNCLOSED)
        return _timing(self._walls, self._counts, invalid, reasons)


def _timing(walls: Mapping[str, float], counts: Mapping[str, int], invalid: set[str], reasons: set[str]) -> PhaseTiming:
    phases = {}
    for name in PHASES:
        count = counts.get(name, 0)
        if not count:
            phases[name] = PhaseMeasure(None, 0, "unavailable")
        else:
            phases[name] = PhaseMeasure(walls.get(name, 0.0), count, "partial" if name in invalid else "explicit")
    measurement = "partial" if reasons else ("explicit" if any(counts.values()) else "unavailable")
    return PhaseTiming(MappingProxyType(phases), measurement, tuple(sorted(reasons)))


def combine(timings: Iterable[PhaseTiming]) -> PhaseTiming | None:
    """Several files' timing as one (wall times and counts add up, reasons join); None
    when there is none."""
    timings = list(timings)
    if not timings:
        return None
    if len(timings) == 1:
        return timings[0]
    walls: dict[str, float] = {}
    counts: dict[str, int] = {}
    invalid: set[str] = set()
    reasons: set[str] = set()
    for timing in timings:
        reasons.update(timing.reason_codes)
        for name, entry in timing.phases.items():
            if entry.interval_count:
                walls[name] = walls.get(name, 0.0) + (entry.wall_seconds or 0.0)
                counts[name] = counts.get(name, 0) + entry.interval_count
            if entry.measurement == "partial":
                invalid.add(name)
    return _timing(walls, counts, invalid, reasons)
