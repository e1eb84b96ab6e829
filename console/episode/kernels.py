"""Facts about kernels and jobs that the console and ``status --json`` both show.

The dominant kernel is the one an operator means by "the kernel": it is what the funnel
selects first and what a deep profile targets. A profile's own ``dominant_kernel`` is the
profiler's pick among the kernels of the program it ran, which leaves out the input
generators (``init_curand`` runs longest in a survey but only fills the inputs). Across
profiles, the dominant kernel is the one of those picks with the largest total duration.
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


def dominant_kernel(profiles: Iterable[ProfileResult]) -> str | None:
    """The profilers' dominant pick with the largest duration summed over every profile
    (a name no profile picks is never dominant; None when no profile names one)."""
    totals: dict[str, float] = {}
    picked: set[str] = set()
    for profile in profiles:
        if profile.dominant_kernel:
            picked.add(profile.dominant_kernel)
        for kernel in profile.kernels:
            if kernel.duration_ns is not None:
                totals[kernel.name] = totals.get(kernel.name, 0.0) + kernel.duration_ns
    if not picked:
        return None
    return max(sorted(picked), key=lambda name: totals.get(name, 0.0))


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
