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


def dominant_kernel(profiles: Iterable[ProfileResult]) -> tuple[str | None, str | None]:
    """The profilers' pick with the largest duration summed over every profile, and None or
    why there is none. A name no profile picks is never dominant; a pick no profile states a
    duration for has none to compare, so when none of the picks has one there is no answer
    (an order of names would only be a guess)."""
    totals: dict[str, float] = {}
    picked: set[str] = set()
    count = 0
    for profile in profiles:
        count += 1
        if profile.dominant_kernel:
            picked.add(profile.dominant_kernel)
        stated = False
        for kernel in profile.kernels:
            if kernel.duration_ns is not None:
                totals[kernel.name] = totals.get(kernel.name, 0.0) + kernel.duration_ns
                stated = stated or kernel.name == profile.dominant_kernel
        if not stated and profile.dominant_kernel and profile.dominant_duration_ns is not None:
            totals[profile.dominant_kernel] = totals.get(profile.dominant_kernel, 0.0) + profile.dominant_duration_ns
    if not count:
        return None, "no profile of the current episode"
    if not picked:
        return None, "no profile of the current episode names a kernel"
    timed = sorted(name for name in picked if name in totals)
    if not timed:
        return None, "no profile of the current episode states a duration for a kernel it picks"
    return max(timed, key=lambda name: totals[name]), None


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
