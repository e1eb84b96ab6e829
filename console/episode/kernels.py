"""Facts about kernels and jobs that the console and ``status --json`` both show.

The dominant kernel is the one an operator means by "the kernel": it is what the funnel
selects first and what a deep profile targets. A profile's own ``dominant_kernel`` is the
profiler's pick among the kernels of the program it ran, which leaves out the input
generators (``init_curand`` runs longest in a survey but only fills the inputs). Across
profiles, the dominant kernel is the one of those picks with the largest total duration; a
pick no profile gives a duration for cannot be weighed, and with no duration at all there is no
dominant kernel, only the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.formats.job_record import JobRecord
    from console.profiling.result import ProfileResult

SHAPE_PREFIX = "shape-"


def profile_shape(profile_dir: str) -> str | None:
    """The workload shape a profile was taken on: ``…/sol/shape-4`` is shape 4 (the
    profile scripts name each output directory after its ``workload.jsonl`` line)."""
    name = os.path.basename(profile_dir.rstrip("/"))
    return name[len(SHAPE_PREFIX):] if name.startswith(SHAPE_PREFIX) else None


def _picks(profiles: Iterable[ProfileResult]) -> tuple[int, set[str], dict[str, float]]:
    """How many profiles, the kernels they pick, and each kernel's summed stated duration (a
    pick no kernel entry times counts its profile's ``dominant_duration_ns``, summary.txt's)."""
    totals: dict[str, float] = {}
    picked: set[str] = set()
    count = 0
    for profile in profiles:
        count += 1
        pick = profile.dominant_kernel
        if pick:
            picked.add(pick)
        stated = False
        for kernel in profile.kernels:
            if kernel.duration_ns is not None:
                totals[kernel.name] = totals.get(kernel.name, 0.0) + kernel.duration_ns
                stated = stated or kernel.name == pick
        if pick and not stated and profile.dominant_duration_ns is not None:
            totals[pick] = totals.get(pick, 0.0) + profile.dominant_duration_ns
    return count, picked, totals


def dominant_kernel(profiles: Iterable[ProfileResult]) -> str | None:
    """The profilers' pick with the largest duration summed over every profile (a name no
    profile picks is never dominant; a pick no profile gives a duration for cannot be
    weighed; None when no pick can, ``why_no_dominant_kernel`` says why)."""
    _, picked, totals = _picks(profiles)
    timed = sorted(name for name in picked if name in totals)
    return max(timed, key=lambda name: totals[name]) if timed else None


def why_no_dominant_kernel(profiles: Iterable[ProfileResult]) -> str | None:
    """Why ``dominant_kernel`` of the same profiles is None (None: it is not)."""
    count, picked, totals = _picks(profiles)
    if not count:
        return "no profile of the current episode"
    if not picked:
        return "no profile of the current episode names a kernel"
    if not any(name in totals for name in picked):
        return "no profile of the current episode states a duration for a kernel it picks"
    return None


def job_elapsed(job: JobRecord, now: float | None) -> float | None:
    """Seconds a job ran: start to finish once it ended, start to ``now`` (unix seconds)
    while it runs; None before it starts or when a time is unreadable."""
    if job.duration_seconds is not None:
        return job.duration_seconds
    if job.state != "running" or now is None or not job.started_at:
        return None
    try:
        started = datetime.fromisoformat(job.started_at).timestamp()
    except ValueError:
        return None
    return max(0.0, now - started)
