"""The immutable episode state the reducer produces and every front door reads.

Widgets and the headless printers only ever see an ``EpisodeState``; they never parse
files, compute statistics, sample hardware or tail logs. Unknown values are ``None``
(never 0). Collections are tuples or read-only mappings so a snapshot handed to another
thread cannot change under it.

Records follow console.formats: ``msgspec.Struct`` (frozen). Copy a state with a change
through ``msgspec.structs.replace``. The record types of the documents are imported for
the type checker only: the headless status reads a handful of documents and must not pay
for importing every reader (no code decodes into ``EpisodeState``, so msgspec never needs
to resolve these names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Never

import msgspec

if TYPE_CHECKING:
    from console.episode.episodes import CampaignProfile, EpisodeRecord
    from console.episode.git_facts import GitFacts
    from console.episode.preflight import Preflight
    from console.formats.abba import AbbaRun, AbbaVerdict
    from console.formats.evaluations import EvaluationRecord
    from console.formats.handoff import Handoff
    from console.formats.job_record import JobRecord
    from console.formats.journal import Journal
    from console.formats.live_memory import LiveMemory
    from console.formats.memory import MemoryVersion
    from console.formats.problems import Unreadable
    from console.formats.supervisor import ActiveEpisode, Attempt, SupervisorState
    from console.formats.telemetry_summary import TelemetrySummary
    from console.formats.timeline import MeasureRun, TimelineMeasurement, TimelineReceipt
    from console.gpu.sampler import GpuReading
    from console.profiling.result import ProfileResult
    from console.stats.ratio import Ratio

EMPTY: Mapping[str, Never] = MappingProxyType({})  # shared: read-only, so one instance serves all


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
    reason: str | None = None  # why partial, in AKA's codes: overlapping_phase, mismatched_phase_end, orphan_phase_end, unclosed_phase
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


class AbbaComparison(msgspec.Struct, frozen=True):
    """One ABBA verification as far as it has run: each side's valid latencies in arrival
    order, the candidate/incumbent ratio of geometric means (what the gate scores) with its
    interval, and the verdict once ``result.json`` is in."""

    directory: str | None  # the verification directory (None: a verdict that names none)
    runs: int  # run records seen (``runs.jsonl`` while it grows, else the verdict's)
    invalid_runs: int  # nonzero exit, failed correctness or no usable latency
    incumbent_us: tuple[float, ...]
    candidate_us: tuple[float, ...]
    incumbent_geomean_us: float | None
    candidate_geomean_us: float | None
    ratio: Ratio  # candidate / incumbent
    verdict: AbbaVerdict | None = None


class MeasureComparison(msgspec.Struct, frozen=True):
    """A timeline overhead measurement while it runs (``.runs.jsonl``): each variant's
    latencies, the instrumented/baseline ratio of medians (the measurement's own
    definition) with its interval, and the tool's latest statement (a block or done line)."""

    path: str
    baseline_ms: tuple[float, ...]
    instrumented_ms: tuple[float, ...]
    baseline_median_ms: float | None
    instrumented_median_ms: float | None
    ratio: Ratio  # instrumented / baseline
    reported: MeasureRun | None = None


class JobLogTail(msgspec.Struct, frozen=True):
    """The last lines of one sandbox job's ``stdout.log`` and ``stderr.log``, as written
    (agent text: shown through ``text.visible``, never as markup)."""

    job_id: str
    stdout: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()


class EpisodeState(msgspec.Struct, frozen=True):
    campaign_root: str | None = None
    campaign: str | None = None
    worktree: str | None = None
    # Documents, as parsed by console.formats (None until seen).
    supervisor: SupervisorState | None = None
    active_episode: ActiveEpisode | None = None
    attempts: tuple[Attempt, ...] = ()  # one per archived episode
    journal: Journal | None = None
    handoff: Handoff | None = None
    live_memory: LiveMemory | None = None
    telemetry_summaries: tuple[TelemetrySummary, ...] = ()
    git: GitFacts | None = None
    # Telemetry, folded.
    phase_spans: Sequence[PhaseSpan] = ()  # closed spans, file order (a read-only view)
    phase_totals: Mapping[str, PhaseTotal] = EMPTY
    active_phase: PhaseSpan | None = None  # the most recently opened phase still running
    open_spans: tuple[PhaseSpan, ...] = ()  # every phase still open, one per iteration/attempt
    # why spans are partial, e.g. overlapping: 2; invalid_phase_marker counts the markers of
    # no known phase, which open and close nothing (AKA's reader ignores them too)
    partial_reasons: Mapping[str, int] = EMPTY
    orchestration_seconds: float | None = None
    telemetry_span_seconds: float | None = None
    source_reads: Sequence[SourceRead] = ()
    sandbox_operations: Sequence[SandboxOperation] = ()  # completed, then running
    running_operations: tuple[SandboxOperation, ...] = ()  # started, not yet completed
    # The current episode's operations no job record names, newest first (episodes.traced_only):
    # the Jobs pane lists them as traced rows beside ``jobs`` (AKA writes no job records).
    traced_operations: tuple[SandboxOperation, ...] = ()
    telemetry_events: int | None = None  # None: no telemetry file (current_episode says why)
    # Whose runtime files the episode fields above read: "live" (the running episode's),
    # "archived" (between episodes: the last one's, under episodes/eNNNN/), None (no episode).
    runtime: str | None = None
    episodes: tuple[EpisodeRecord, ...] = ()  # every episode of the campaign, oldest first (episodes.py)
    # The newest of ``episodes``: the one the episode fields read. Its runtime facts and their
    # reasons are the status document's top-level counts, so the two cannot disagree.
    current_episode: EpisodeRecord | None = None
    # Evaluations, canonical memory, verification.
    evaluations: Sequence[EvaluationRecord] = ()  # in file order
    evaluations_by_sha: Mapping[str, tuple[EvaluationRecord, ...]] = EMPTY
    versions: tuple[MemoryVersion, ...] = ()  # sorted by version number
    incumbent_curve: tuple[tuple[int, float, str], ...] = ()  # (version, figure, kind)
    profiles: tuple[ProfileResult, ...] = ()  # the current episode's, one per profile directory (the funnel's)
    campaign_profiles: tuple[CampaignProfile, ...] = ()  # every episode's, tagged (episodes.campaign_profiles)
    dominant_kernel: str | None = None  # console.episode.kernels.dominant_kernel of ``profiles``
    dominant_kernel_unknown: str | None = None  # why ``dominant_kernel`` is None
    abba: tuple[AbbaVerdict, ...] = ()
    abba_runs: Mapping[str, Sequence[AbbaRun]] = EMPTY  # runs.jsonl path -> runs as they complete
    abba_comparisons: tuple[AbbaComparison, ...] = ()  # one per verification, newest first
    timeline_receipts: tuple[TimelineReceipt, ...] = ()
    timeline_measurements: tuple[TimelineMeasurement, ...] = ()
    measure_runs: Mapping[str, Sequence[MeasureRun]] = EMPTY  # .runs.jsonl path -> lines as they arrive
    measure_comparisons: tuple[MeasureComparison, ...] = ()  # one per .runs.jsonl, by path
    jobs: tuple[JobRecord, ...] = ()  # the current episode's, newest first
    job_logs: Mapping[str, JobLogTail] = EMPTY  # job id -> the last lines of its logs
    gpu: GpuReading | None = None  # the latest NVML reading (live only; recorded and replayed)
    preflight: Preflight | None = None  # whether GPU actions can run on this host (live and status)
    # Problems.
    alerts: tuple[Alert, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    last_event_at: float | None = None
    event_count: int = 0
    scanning: bool = False  # the console's first state, before the workspace's files are read
