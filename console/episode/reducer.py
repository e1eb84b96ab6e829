"""Folding the event stream into an immutable ``EpisodeState``.

``Reducer.feed`` is the only place events change anything; ``Reducer.snapshot`` hands out
an immutable state that shares the append-only lists through ``views.Prefix`` (O(1)), so
the live console can snapshot after every batch. ``fold(events)`` is the pure one-shot
form used by tests, replay and the headless verbs.

Phase pairing follows FORMATS §2: markers pair per (iteration, attempt) by the writer's
monotonic clock; an overlapping start, a mismatched end, an orphan end or an unclosed
start makes that span ``partial`` and it is kept, never silently dropped. Orchestration
time is each attempt's telemetry span minus the phase time attributed inside it; sandbox
time is reported apart. Beside its own pairing, each telemetry file also runs AKA's phase
reader (phase_timing.py), whose measurement and reason codes the status reports as AKA would.

The episode fields read one episode's runtime files: the live episode's, else, between
episodes, the last archived one's (episodes.py tells them apart by path); ``episodes`` holds
every episode's own, archived and live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from console.formats.telemetry import FoldedTelemetry, TelemetryRecord

from . import events as ev
from .comparisons import Comparisons
from .episodes import RuntimeFacts, build_history, by_episode
from .guards import evaluate_guards
from .job_logs import JobLogs
from .kernels import dominant_kernel
from .phase_timing import PhaseTimer
from .phase_timing import combine as combine_timing
from .registry import DOCUMENT_KINDS
from .state import EpisodeState, PhaseSpan, PhaseTotal, SandboxOperation, SourceRead
from .views import Prefix, combine

if TYPE_CHECKING:
    from console.formats.abba import AbbaRun
    from console.formats.evaluations import EvaluationRecord
    from console.formats.memory import MemoryVersion
    from console.formats.problems import Unreadable
    from console.formats.timeline import MeasureRun


class _Clock:
    """One attempt's telemetry clock: its monotonic bounds, the phase time attributed
    inside it, and what it last added to the file's time totals."""

    __slots__ = ("attempt_id", "attributed", "first", "iteration_id", "last", "orchestration_part", "span_part")

    def __init__(self, iteration_id: str, attempt_id: str) -> None:
        self.iteration_id = iteration_id
        self.attempt_id = attempt_id
        self.first: float | None = None  # earliest and latest monotonic time: both None or both set
        self.last: float | None = None
        self.attributed = 0.0
        self.span_part = 0.0
        self.orchestration_part = 0.0


class _Tally:
    """A phase's wall time and interval count, and how many of them are partial."""

    __slots__ = ("intervals", "partial", "wall")

    def __init__(self) -> None:
        self.wall = 0.0
        self.intervals = 0
        self.partial = 0


_OpenPhase = tuple[str, float | None, float | None]  # (phase, start monotonic, start wall clock)


class _TelemetryFold:
    """Everything one telemetry file has said (a replaced file starts a fresh fold)."""

    __slots__ = ("clocks", "count", "ids", "open", "ops_done", "ops_ended", "ops_running", "ops_seconds",
                 "orchestration", "reads", "reasons", "span_seconds", "spans", "timer", "totals")

    def __init__(self) -> None:
        self.clocks: dict[tuple[str, str], _Clock] = {}  # (iteration, attempt) -> its clock
        self.open: dict[tuple[str, str], _OpenPhase] = {}  # (iteration, attempt) -> its phase still open
        self.spans: list[PhaseSpan] = []
        self.totals: dict[str, _Tally] = {}  # phase -> its tally
        # Telemetry span and orchestration summed over attempts, kept up to date as each
        # run of an attempt's records ends (``_end_run``): a snapshot must not walk every clock.
        self.span_seconds: float | None = None
        self.orchestration: float | None = None
        self.reads: list[SourceRead] = []
        self.ops_done: list[SandboxOperation] = []
        self.ops_running: dict[str, SandboxOperation] = {}
        # Completed operations by status and their summed duration (None until one states
        # it), counted as they complete: a snapshot must not walk every operation.
        self.ops_ended: dict[str, int] = {}
        self.ops_seconds: float | None = None
        self.count = 0
        # Interning: a million records share a handful of ids, phases and categories, so
        # the spans keep one string each instead of one per record.
        self.ids: dict[str, str] = {}
        self.reasons: dict[str, int] = {}  # partial span reason -> count
        self.timer = PhaseTimer()  # the file as AKA's reader measures it (phase_timing.py)

    def _clock(self, iteration: str, attempt: str) -> _Clock:
        clock = self.clocks.get((iteration, attempt))
        if clock is None:
            ids = self.ids
            clock = _Clock(ids.setdefault(iteration, iteration), ids.setdefault(attempt, attempt))
            self.clocks[(clock.iteration_id, clock.attempt_id)] = clock
        return clock

    def _intern(self, text: str | None) -> str | None:
        return None if text is None else self.ids.setdefault(text, text)

    def _phase(self, record: FoldedTelemetry | TelemetryRecord) -> str:
        phase = record.phase
        assert phase is not None, "the record types reject a phase marker without its phase"
        return self.ids.setdefault(phase, phase)

    def _close(self, span: PhaseSpan, clock: _Clock) -> None:
        """Keep a closed span, add its wall time to its phase and attempt, and count why it
        is partial if it is."""
        self.spans.append(span)
        tally = self.totals.get(span.phase)
        if tally is None:
            tally = self.totals[span.phase] = _Tally()
        start, end = span.start_monotonic, span.end_monotonic
        if start is not None and end is not None:
            tally.wall += end - start
            clock.attributed += end - start
        tally.intervals += 1
        if span.measurement != "explicit":
            tally.partial += 1
            reason = span.reason or "partial"
            self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def add(self, records: Sequence[FoldedTelemetry | TelemetryRecord]) -> float | None:
        """Fold records in file order; return the latest wall-clock time they state.

        This loop runs once per telemetry line of a cold ingest. Consecutive records of
        one attempt (the usual case) form a run: the run looks its attempt's clock up once
        and keeps its bounds and open phase in local variables, written back when the run
        ends. AKA's reading of the phase markers is a pass of its own (``PhaseTimer``).
        """
        self.timer.read(records)
        clock: _Clock | None = None
        iteration_id = attempt_id = ""  # the run's attempt (interned), its clock bounds and open phase
        first: float | None = None
        last: float | None = None
        current: _OpenPhase | None = None
        latest: float | None = None
        for number, record in enumerate(records, self.count + 1):
            # formats.telemetry.record_epoch, written out: this runs once per record of a cold ingest
            ts = record.timestamp
            at = None if ts is None else (ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)).timestamp()
            if at is not None and (latest is None or at > latest):
                latest = at
            if clock is None or record.iteration_id != iteration_id or record.attempt_id != attempt_id:
                if clock is not None:
                    self._end_run(clock, first, last, current)
                clock = self._clock(record.iteration_id, record.attempt_id)
                iteration_id, attempt_id = clock.iteration_id, clock.attempt_id
                first, last = clock.first, clock.last
                current = self.open.get((iteration_id, attempt_id))
            mono = record.monotonic_seconds
            if mono is not None:
                if first is None or last is None:
                    first = last = mono
                elif mono > last:
                    last = mono
                elif mono < first:
                    first = mono
            event = record.event
            if event == "phase_completed":
                if current is None:
                    self._close(PhaseSpan(iteration_id=iteration_id, attempt_id=attempt_id,
                                          phase=self._phase(record), start_monotonic=None,
                                          end_monotonic=mono, start_at=None, end_at=at, measurement="partial",
                                          reason="orphan_end"), clock)
                else:
                    phase, start, start_at = current
                    current = None
                    paired = phase == record.phase
                    self._close(PhaseSpan(iteration_id=iteration_id, attempt_id=attempt_id, phase=phase,
                                          start_monotonic=start, end_monotonic=mono, start_at=start_at, end_at=at,
                                          measurement="explicit" if paired else "partial",
                                          reason=None if paired else "mismatched_end"), clock)
            elif event == "phase_started":
                if current is not None:
                    phase, start, start_at = current
                    self._close(PhaseSpan(iteration_id=iteration_id, attempt_id=attempt_id, phase=phase,
                                          start_monotonic=start, end_monotonic=mono, start_at=start_at, end_at=at,
                                          measurement="partial", reason="overlapping"), clock)
                current = (self._phase(record), mono, at)
            elif event == "source_read":
                self.reads.append(SourceRead(iteration_id=iteration_id, attempt_id=attempt_id,
                                             source_kind=self._intern(record.source_kind),
                                             reference=record.reference, at=at, monotonic=mono))
            elif event == "sandbox_operation_started":
                op_id = record.operation_id or f"unnamed-{number}"
                self.ops_running[op_id] = SandboxOperation(
                    operation_id=op_id, category=self._intern(record.category), iteration_id=iteration_id,
                    attempt_id=attempt_id, started_at=at, started_monotonic=mono, duration_seconds=None,
                    status="running",
                )
            else:  # sandbox_operation_completed: the record type admits no other event
                op_id = record.operation_id or f"unnamed-{number}"
                started = self.ops_running.pop(op_id, None)
                category = record.category or (started.category if started else None)
                status = "succeeded" if record.status == "succeeded" else "failed"
                self.ops_ended[status] = self.ops_ended.get(status, 0) + 1
                if record.duration_seconds is not None:
                    self.ops_seconds = (self.ops_seconds or 0.0) + record.duration_seconds
                self.ops_done.append(SandboxOperation(
                    operation_id=op_id,
                    category=self._intern(category),
                    iteration_id=iteration_id,
                    attempt_id=attempt_id,
                    started_at=started.started_at if started else None,
                    started_monotonic=started.started_monotonic if started else None,
                    duration_seconds=record.duration_seconds,
                    status=status,
                    exit_status=record.exit_status,
                    failure_type=record.failure_type,
                ))
        if clock is not None:
            self._end_run(clock, first, last, current)
        self.count += len(records)
        return latest

    def _end_run(self, clock: _Clock, first: float | None, last: float | None, current: _OpenPhase | None) -> None:
        """Write a run's clock bounds and open phase back, and update the time totals:
        each attempt adds its span, and its span less the phase time inside it."""
        clock.first, clock.last = first, last
        if current is None:
            self.open.pop((clock.iteration_id, clock.attempt_id), None)
        else:
            self.open[(clock.iteration_id, clock.attempt_id)] = current
        if first is not None and last is not None:
            span = last - first
            orchestration = max(span - clock.attributed, 0.0)
            self.span_seconds = (self.span_seconds or 0.0) + span - clock.span_part
            self.orchestration = (self.orchestration or 0.0) + orchestration - clock.orchestration_part
            clock.span_part, clock.orchestration_part = span, orchestration


class Reducer:
    def __init__(self) -> None:
        self._telemetry: dict[str, _TelemetryFold] = {}
        self._evaluations: dict[str, list[EvaluationRecord]] = {}
        self._measure_runs: dict[str, list[MeasureRun]] = {}
        self._abba_runs: dict[str, list[AbbaRun]] = {}
        # kind -> path -> parsed value, of the kind's record type (registry.py)
        self._documents: dict[str, dict[str, Any]] = {}
        self._document_at: dict[str, float | None] = {}
        self._unreadable: dict[tuple[str, int | None], Unreadable] = {}
        self._last_at: float | None = None
        self._count = 0
        self._meta: dict[str, str | None] = {"campaign_root": None, "campaign": None, "worktree": None}
        self._snapshot: EpisodeState | None = None
        self._comparisons = Comparisons()
        self._gpu = None  # the latest GPU reading
        self._job_logs = JobLogs()

    def set_workspace(self, campaign_root: str | None, campaign: str | None, worktree: str | None) -> None:
        self._meta = {"campaign_root": campaign_root, "campaign": campaign, "worktree": worktree}
        self._snapshot = None

    # -- feeding -------------------------------------------------------------------------

    def feed(self, events: Iterable[ev.Event]) -> Reducer:
        # Telemetry dominates every real stream: consecutive telemetry events of one file
        # are folded together; every other kind goes through ``apply``.
        self._snapshot = None
        path = ""
        records: list[TelemetryRecord] = []
        for event in events:
            if event.kind == ev.TELEMETRY:
                if event.path != path:
                    if records:
                        self.fold_telemetry(path, records)
                        records = []
                    path = event.path
                records.append(event.data)
            else:
                if records:
                    self.fold_telemetry(path, records)
                    records = []
                self.apply(event)
        if records:
            self.fold_telemetry(path, records)
        return self

    def apply(self, event: ev.Event) -> None:
        self._snapshot = None
        kind = event.kind
        if kind == ev.TELEMETRY:
            self.fold_telemetry(event.path, (event.data,))
            return
        self._count += 1
        at = event.at
        if at is not None and (self._last_at is None or at > self._last_at):
            self._last_at = at
        if kind == ev.EVALUATION:
            self._evaluations.setdefault(event.path, []).append(event.data)
        elif kind == ev.MEASURE_RUN:
            self._measure_runs.setdefault(event.path, []).append(event.data)
        elif kind == ev.ABBA_RUN:
            self._abba_runs.setdefault(event.path, []).append(event.data)
        elif kind == ev.JOB_LOG:
            self._job_logs.add(event.path, event.data)
        elif kind == ev.GPU:
            self._gpu = event.data
        elif kind == ev.UNREADABLE:
            self._unreadable[(event.path, event.offset)] = event.data
        elif kind == ev.REMOVED:
            self._forget(event.path, event.data)
        elif kind in DOCUMENT_KINDS:
            self._documents.setdefault(kind, {})[event.path] = event.data
            self._document_at[event.path] = at
            self._unreadable.pop((event.path, None), None)

    def fold_telemetry(self, path: str, records: Sequence[FoldedTelemetry | TelemetryRecord]) -> None:
        """Fold telemetry records of one file: what ``feed`` does with
        TELEMETRY events, for a cold scan that needs neither their offsets nor Events."""
        self._snapshot = None
        fold = self._telemetry.get(path)
        if fold is None:
            fold = self._telemetry[path] = _TelemetryFold()
        latest = fold.add(records)
        if latest is not None and (self._last_at is None or latest > self._last_at):
            self._last_at = latest
        self._count += len(records)

    def _forget(self, path: str, kind: str) -> None:
        """A file vanished, or a line file was truncated/replaced and is read anew."""
        if kind == ev.TELEMETRY:
            self._telemetry.pop(path, None)
        elif kind == ev.EVALUATION:
            self._evaluations.pop(path, None)
        elif kind == ev.MEASURE_RUN:
            self._measure_runs.pop(path, None)
        elif kind == ev.ABBA_RUN:
            self._abba_runs.pop(path, None)
        elif kind == ev.JOB_LOG:
            self._job_logs.forget(path)
        else:
            self._documents.get(kind, {}).pop(path, None)
        for key in [k for k in self._unreadable if k[0] == path]:
            del self._unreadable[key]

    # -- snapshots -----------------------------------------------------------------------

    def _latest(self, kind: str, within: set[str] | None = None) -> Any:
        docs = self._documents.get(kind) or {}
        paths = [p for p in docs if within is None or p in within]
        if not paths:
            return None
        return docs[max(paths, key=lambda p: (self._document_at.get(p) or 0.0, p))]

    def _episode_runtime(self) -> tuple[dict[int | None, set[str]], set[str], str | None]:
        """Runtime files by episode (episodes.py), the ones the status's episode reads (the
        live episode's, else, between episodes, the last archived one's) and which that is."""
        groups = by_episode([*self._telemetry, *self._evaluations, *self._documents.get(ev.JOURNAL, ()),
                             *self._documents.get(ev.HANDOFF, ())])
        if groups.get(None):
            return groups, groups[None], "live"
        archived = [n for n in groups if n is not None]
        return (groups, groups[max(archived)], "archived") if archived else (groups, set(), None)

    def _runtime_facts(self, paths: set[str]) -> RuntimeFacts:
        folds = [self._telemetry[p] for p in sorted(paths) if p in self._telemetry]
        lists = [self._evaluations[p] for p in sorted(paths) if p in self._evaluations]
        journal, handoff = self._latest(ev.JOURNAL, paths), self._latest(ev.HANDOFF, paths)
        ops: dict[str, int] = {"running": 0, "succeeded": 0, "failed": 0}
        seconds = [f.ops_seconds for f in folds if f.ops_seconds is not None]
        for fold in folds:
            for status, count in fold.ops_ended.items():
                ops[status] += count
            ops["running"] += len(fold.ops_running)
        return RuntimeFacts(
            telemetry_events=sum(f.count for f in folds) if folds else None,
            phase_timing=combine_timing(f.timer.timing() for f in folds),
            source_reads=sum(len(f.reads) for f in folds) if folds else None,
            sandbox=MappingProxyType(ops) if folds else None,
            sandbox_seconds=sum(seconds) if seconds else None,
            evaluations=sum(len(records) for records in lists) if lists else None,
            journal_state=journal.state if journal else None,
            journal_experiments=len(journal.experiments or ()) if journal else None,
            handoff=handoff.status if handoff else None,
        )

    def _all(self, kind: str, sort_key: Callable[[Any], Any] | None = None) -> tuple[Any, ...]:
        docs = self._documents.get(kind)
        if not docs:
            return ()
        if sort_key is None:
            return tuple(docs[p] for p in sorted(docs))
        return tuple(sorted(docs.values(), key=sort_key))

    def snapshot(self) -> EpisodeState:
        if self._snapshot is not None:
            return self._snapshot
        groups, current, runtime = self._episode_runtime()
        folds = [self._telemetry[p] for p in sorted(self._telemetry) if p in current]
        totals: dict[str, _Tally] = {}
        for fold in folds:
            for phase, tally in fold.totals.items():
                acc = totals.setdefault(phase, _Tally())
                acc.wall += tally.wall
                acc.intervals += tally.intervals
                acc.partial += tally.partial
        phase_totals = {
            phase: PhaseTotal(tally.wall, tally.intervals, "explicit" if tally.partial == 0 else "partial")
            for phase, tally in sorted(totals.items())
        }
        reasons: dict[str, int] = {}
        for fold in folds:
            for reason, count in fold.reasons.items():
                reasons[reason] = reasons.get(reason, 0) + count
        active = None
        open_spans = []
        for fold in folds:
            for (iteration, attempt), (phase, mono, at) in fold.open.items():
                open_spans.append(PhaseSpan(iteration, attempt, phase, mono, None, at, None, "partial", "unclosed", active=True))
        if open_spans:
            active = max(open_spans, key=lambda s: (s.start_at or 0.0, s.start_monotonic or 0.0))
        span_seconds: float | None = None
        orchestration: float | None = None
        for fold in folds:
            if fold.span_seconds is not None:
                span_seconds = (span_seconds or 0.0) + fold.span_seconds
                orchestration = (orchestration or 0.0) + (fold.orchestration or 0.0)
        running_ops = tuple(op for fold in folds for op in fold.ops_running.values())
        evaluations = combine([Prefix(self._evaluations[p]) for p in sorted(self._evaluations) if p in current])
        by_sha: dict[str, list[EvaluationRecord]] = {}
        for record in evaluations:
            sha = record.kernel_sha256
            if sha:
                by_sha.setdefault(sha, []).append(record)
        versions = self._all(ev.MEMORY_VERSION, sort_key=_version_key)
        jobs = self._all(ev.JOB, sort_key=lambda job: job.created_at or "")[::-1]
        profiles = self._all(ev.PROFILE)
        state = EpisodeState(
            campaign_root=self._meta["campaign_root"],
            campaign=self._meta["campaign"],
            worktree=self._meta["worktree"],
            supervisor=self._latest(ev.STATE),
            active_episode=self._latest(ev.ACTIVE_EPISODE),
            attempts=self._all(ev.ATTEMPT),
            journal=self._latest(ev.JOURNAL, current),
            handoff=self._latest(ev.HANDOFF, current),
            runtime=runtime,
            live_memory=self._latest(ev.LIVE_MEMORY),
            telemetry_summaries=self._all(ev.TELEMETRY_SUMMARY),
            git=self._latest(ev.GIT),
            phase_spans=combine([Prefix(f.spans) for f in folds]),
            phase_totals=MappingProxyType(phase_totals),
            partial_reasons=MappingProxyType(reasons),
            active_phase=active,
            open_spans=tuple(open_spans),
            orchestration_seconds=orchestration,
            telemetry_span_seconds=span_seconds,
            source_reads=combine([Prefix(f.reads) for f in folds]),
            sandbox_operations=combine([Prefix(f.ops_done) for f in folds] + [running_ops]),
            running_operations=running_ops,
            telemetry_events=sum(f.count for f in folds),
            phase_timing=combine_timing(f.timer.timing() for f in folds),
            evaluations=evaluations,
            evaluations_by_sha=MappingProxyType({k: tuple(v) for k, v in by_sha.items()}),
            versions=versions,
            incumbent_curve=_incumbent_curve(versions),
            profiles=profiles,
            dominant_kernel=dominant_kernel(profiles),
            abba=self._all(ev.ABBA),
            timeline_receipts=self._all(ev.TIMELINE_RECEIPT),
            timeline_measurements=self._all(ev.TIMELINE_MEASUREMENT),
            measure_runs=MappingProxyType({p: Prefix(r) for p, r in sorted(self._measure_runs.items())}),
            abba_runs=MappingProxyType({p: Prefix(r) for p, r in sorted(self._abba_runs.items())}),
            jobs=jobs,
            job_logs=self._job_logs.snapshot(),
            gpu=self._gpu,
            preflight=self._latest(ev.PREFLIGHT),
            unreadable=tuple(self._unreadable[k] for k in sorted(self._unreadable, key=lambda k: (k[0], k[1] or -1))),
            last_event_at=self._last_at,
            event_count=self._count,
        )
        state = replace(state, abba_comparisons=self._comparisons.abba(state.abba, state.abba_runs),
                        measure_comparisons=self._comparisons.measure(state.measure_runs))
        live = groups.get(None)
        live_journal = self._latest(ev.JOURNAL, live) if live else None
        active_episode = state.active_episode
        state = replace(state, episodes=build_history(
            [*(state.supervisor.attempts or () if state.supervisor else ()), *state.attempts],
            active_episode,
            {n: self._runtime_facts(paths) for n, paths in groups.items() if n is not None},
            self._runtime_facts(live) if live else None,
            active_episode.episode if active_episode else (live_journal.episode if live_journal else None),
            state.abba_comparisons,
        ))
        state = _with_alerts(state)
        self._snapshot = state
        return state


def _version_key(version: MemoryVersion) -> tuple[bool, int]:
    number = getattr(version, "version", None)
    return (number is None, number if isinstance(number, int) else 0)


def _incumbent_curve(versions: tuple[MemoryVersion, ...]) -> tuple[tuple[int, float, str], ...]:
    if not versions:
        return ()
    from console.formats.memory import incumbent_curve

    return tuple(incumbent_curve(versions))


def _with_alerts(state: EpisodeState) -> EpisodeState:
    alerts = evaluate_guards(state)
    return replace(state, alerts=alerts) if alerts else state


def fold(events: Iterable[ev.Event]) -> EpisodeState:
    return Reducer().feed(events).snapshot()


__all__ = ["Reducer", "fold"]
