"""Typed events with provenance: the one stream every front door reads.

An event says what was seen (``kind`` and ``data``), where (``path`` and, for line records,
the byte ``offset`` of the line) and when (``at``: the wall-clock time the record itself
states, or the snapshot time of a document). Which file gives which kind is the artifact
registry's business (registry.py).
"""

from typing import Any, NamedTuple

# Line-record kinds (one event per JSON line).
TELEMETRY = "telemetry"  # data: formats.telemetry.TelemetryRecord
EVALUATION = "evaluation"  # data: formats.evaluations.EvaluationRecord
MEASURE_RUN = "measure_run"  # data: dict, one line of a timeline measure ``.runs.jsonl``
JOB_LOG = "job_log"  # data: str, one line of a sandbox job's stdout.log or stderr.log
ABBA_RUN = "abba_run"  # data: formats.abba.AbbaRun, one line of a verification's ``runs.jsonl``

# Document kinds (one event per snapshot of a whole file; data is the parsed document).
STATE = "state"
ACTIVE_EPISODE = "active_episode"
ATTEMPT = "attempt"
JOURNAL = "journal"
HANDOFF = "handoff"
LIVE_MEMORY = "live_memory"
MEMORY_VERSION = "memory_version"
TELEMETRY_SUMMARY = "telemetry_summary"
PROFILE = "profile"  # data: console.profiling result for one profile directory
ABBA = "abba"  # data: formats.abba verdict (+ runs)
TIMELINE_RECEIPT = "timeline_receipt"
TIMELINE_MEASUREMENT = "timeline_measurement"
JOB = "job"  # data: formats.job_record.JobRecord
GIT = "git"  # data: episode.git_facts.GitFacts

# Readings that no file holds (path names their source).
GPU = "gpu"  # data: console.gpu.sampler.GpuReading, path "nvml"; the live console samples them
PREFLIGHT = "preflight"  # data: console.episode.preflight.Preflight, path "preflight": can GPU actions run here
# data: formats.timeline.DecodedSites, path the receipt's: the console's timeline screen decoded its capture
TIMELINE_SITES = "timeline_sites"

# Bookkeeping kinds.
REMOVED = "removed"  # data: the kind of the document that disappeared (path says which)
UNREADABLE = "unreadable"  # data: formats.problems.Unreadable

KINDS = (
    TELEMETRY, EVALUATION, MEASURE_RUN, JOB_LOG, ABBA_RUN, STATE, ACTIVE_EPISODE, ATTEMPT, JOURNAL, HANDOFF,
    LIVE_MEMORY, MEMORY_VERSION, TELEMETRY_SUMMARY, PROFILE, ABBA, TIMELINE_RECEIPT, TIMELINE_MEASUREMENT, JOB,
    GIT, GPU, PREFLIGHT, TIMELINE_SITES, REMOVED, UNREADABLE,
)

class Event(NamedTuple):
    kind: str
    path: str
    offset: int | None
    at: float | None
    data: Any
