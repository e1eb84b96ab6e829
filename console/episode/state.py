"""The immutable episode state the reducer produces and every front door reads.

Widgets and the headless printers only ever see an ``EpisodeState``; they never parse
files. Unknown values are ``None`` (never 0). Collections are tuples or read-only mappings
so a snapshot handed to another thread cannot change under it.

Records follow console.formats: ``msgspec.Struct`` (frozen). Copy a state with a change
through ``msgspec.structs.replace``.
"""

from types import MappingProxyType
from typing import Any, Mapping, Sequence

import msgspec

EMPTY: Mapping = MappingProxyType({})  # shared: read-only, so one instance serves all


class PhaseSpan(msgspec.Struct, frozen=True, gc=False):
    """One phase interval of one iteration/attempt (FORMATS §2).

    A long campaign folds hundreds of thousands of spans, source reads and sandbox
    operations. As Structs with ``gc=False`` they are built faster than tuples, are a
    fifth smaller, and the cyclic collector never walks them (they hold only strings,
    numbers and None, so they cannot be part of a cycle).
    """

    iteration_id: str
    attempt_id: str
    phase: str
    start_monotonic: float | None
    end_monotonic: float | None  # None while the phase is still running (or never closed)
    start_at: float | None  # wall clock (unix seconds) of the start marker
    end_at: float | None
    measurement: str  # "explicit" | "partial"
    reason: str | None = None  # why partial: overlapping, mismatched_end, orphan_end, unclosed
    active: bool = False

    @property
    def wall_seconds(self) -> float | None:
        if self.start_monotonic is None or self.end_monotonic is None:
            return None
        return self.end_monotonic - self.start_monotonic


class PhaseTotal(msgspec.Struct, frozen=True):
    wall_seconds: float | None
    intervals: int
    measurement: str  # "explicit" when every interval is, else "partial"


class SourceRead(msgspec.Struct, frozen=True, gc=False):
    iteration_id: str
    attempt_id: str
    source_kind: str | None
    reference: str | None
    at: float | None
    monotonic: float | None


class SandboxOperation(msgspec.Struct, frozen=True, gc=False):
    operation_id: str
    category: str | None
    iteration_id: str
    attempt_id: str
    started_at: float | None
    started_monotonic: float | None
    duration_seconds: float | None
    status: str  # running | succeeded | failed
    exit_status: int | None = None
    failure_type: str | None = None


class Alert(msgspec.Struct, frozen=True):
    code: str
    severity: str  # info | warning | error
    message: str
    path: str | None = None

    def to_json(self) -> dict:
        return {"code": self.code, "severity": self.severity, "message": self.message, "path": self.path}


class EpisodeState(msgspec.Struct, frozen=True):
    campaign_root: str | None = None
    campaign: str | None = None
    worktree: str | None = None
    # Documents, as parsed by console.formats (None until seen).
    supervisor: Any = None  # formats.supervisor.SupervisorState
    active_episode: Any = None  # formats.supervisor.ActiveEpisode
    attempts: tuple = ()  # formats.supervisor.Attempt, one per archived episode
    journal: Any = None  # formats.journal.Journal
    handoff: Any = None  # formats.handoff.Handoff
    live_memory: Any = None  # formats.live_memory.LiveMemory
    telemetry_summaries: tuple = ()
    git: Any = None  # episode.git_facts.GitFacts
    # Telemetry, folded.
    phase_spans: Sequence[PhaseSpan] = ()  # closed spans, file order (a read-only view)
    phase_totals: Mapping[str, PhaseTotal] = EMPTY
    active_phase: PhaseSpan | None = None  # the most recently opened phase still running
    open_spans: tuple[PhaseSpan, ...] = ()  # every phase still open, one per iteration/attempt
    partial_reasons: Mapping[str, int] = EMPTY  # why spans are partial, e.g. overlapping: 2
    orchestration_seconds: float | None = None
    telemetry_span_seconds: float | None = None
    source_reads: Sequence[SourceRead] = ()
    sandbox_operations: Sequence[SandboxOperation] = ()  # completed, then running
    running_operations: tuple[SandboxOperation, ...] = ()  # started, not yet completed
    telemetry_events: int = 0
    # Evaluations, canonical memory, verification.
    evaluations: Sequence = ()  # formats.evaluations.EvaluationRecord, in file order
    evaluations_by_sha: Mapping[str, tuple] = EMPTY
    versions: tuple = ()  # formats.memory.MemoryVersion, sorted by version number
    incumbent_curve: tuple = ()  # (version, latency_us_geomean or performance_score)
    profiles: tuple = ()  # console.profiling results, one per profile directory
    abba: tuple = ()  # formats.abba verdicts
    abba_runs: Mapping[str, Sequence] = EMPTY  # runs.jsonl path -> AbbaRun as they complete
    timeline_receipts: tuple = ()
    timeline_measurements: tuple = ()  # measurements (and live .runs.jsonl samples)
    measure_runs: Mapping[str, Sequence] = EMPTY  # .runs.jsonl path -> run dicts as they arrive
    jobs: tuple = ()  # formats.job_record.JobRecord, newest first
    # Problems.
    alerts: tuple[Alert, ...] = ()
    unreadable: tuple = ()  # formats.problems.Unreadable
    last_event_at: float | None = None
    event_count: int = 0
