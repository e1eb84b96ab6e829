"""Folding the event stream into an immutable ``EpisodeState``.

``Reducer.feed`` is the only place events change anything; ``Reducer.snapshot`` hands out
an immutable state that shares the append-only lists through ``views.Prefix`` (O(1)), so
the live console can snapshot after every batch. ``fold(events)`` is the pure one-shot
form used by tests, replay and the headless verbs.

Phase pairing follows FORMATS §2: markers pair per (iteration, attempt) by the writer's
monotonic clock; an overlapping start, a mismatched end, an orphan end or an unclosed
start makes that span ``partial`` and it is kept, never silently dropped. Orchestration
time is each attempt's telemetry span minus the phase time attributed inside it; sandbox
time is reported apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType

from msgspec.structs import replace

from console.formats.telemetry import FoldedTelemetry, TelemetryRecord

from . import events as ev
from .comparisons import Comparisons
from .guards import evaluate_guards
from .job_logs import JobLogs
from .registry import DOCUMENT_KINDS
from .state import EpisodeState, PhaseSpan, PhaseTotal, SandboxOperation, SourceRead
from .views import Prefix, combine


class _TelemetryFold:
    """Everything one telemetry file has said (a replaced file starts a fresh fold)."""

    __slots__ = (
        "clocks",
        "count",
        "ids",
        "open",
        "ops_done",
        "ops_running",
        "orchestration",
        "reads",
        "reasons",
        "span_seconds",
        "spans",
        "totals",
    )

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], tuple[str, float | None, float | None]] = {}
        self.spans: list[PhaseSpan] = []
        self.totals: dict[str, list] = {}  # phase -> [wall, intervals, partial_intervals]
        # attempt -> [first_mono, last_mono, interned key, attributed, span part, orchestration part]
        self.clocks: dict[tuple[str, str], list] = {}
        self.span_seconds: float | None = None
        self.orchestration: float | None = None
        self.reads: list[SourceRead] = []
        self.ops_done: list[SandboxOperation] = []
        self.ops_running: dict[str, SandboxOperation] = {}
        self.count = 0
        # Interning: a million records share a handful of ids, phases and categories, so
        # the spans keep one string each instead of one per record.
        self.ids: dict[str, str] = {}
        self.reasons: dict[str, int] = {}  # partial span reason -> count

    def totals_of_time(self) -> tuple[float | None, float | None]:
        """(telemetry span, orchestration) summed over attempts.

        Orchestration is each attempt's span minus the phase time attributed inside it.
        Both sums are kept up to date as each run of an attempt's records ends
        (``_end_run``), while that attempt's clock is still in the cache: summing over
        every attempt here, after a cold scan, walked tens of thousands of clocks spread
        over the heap.
        """
        return self.span_seconds, self.orchestration

    def _clock(self, iteration: str, attempt: str) -> list:
        clock = self.clocks.get((iteration, attempt))
        if clock is None:
            ids = self.ids
            key = (ids.setdefault(iteration, iteration), ids.setdefault(attempt, attempt))
            clock = self.clocks[key] = [None, None, key, 0.0, 0.0, 0.0]
        return clock

    def _close(self, span: PhaseSpan, clock: list) -> None:
        """Keep a closed span, add its wall time to its phase and attempt, and count why it
        is partial if it is."""
        self.spans.append(span)
        total = self.totals.get(span.phase)
        if total is None:
            total = self.totals[span.phase] = [0.0, 0, 0]
        start, end = span.start_monotonic, span.end_monotonic
        if start is not None and end is not None:
            wall = end - start
            total[0] += wall
            clock[3] += wall
        total[1] += 1
        if span.measurement != "explicit":
            total[2] += 1
            self.reasons[span.reason or "partial"] = self.reasons.get(span.reason or "partial", 0) + 1

    def add(self, records: Sequence[FoldedTelemetry | TelemetryRecord], ats: Sequence[float | None]) -> None:
        """Fold records in file order, each with its wall-clock time (``at``).

        This loop runs once per telemetry line of a cold ingest. Consecutive records of
        one attempt (the usual case) form a run: the run looks its attempt up once and
        keeps the attempt's clock bounds and open phase in local variables, written back
        when the run ends.
        """
        intern = self.ids.setdefault
        count = self.count
        iteration = attempt = None
        clock: list = []
        first = last = current = None  # the run's attempt: clock bounds and open phase
        for record, at in zip(records, ats):
            count += 1
            if record.iteration_id != iteration or record.attempt_id != attempt:
                if clock:
                    self._end_run(clock, first, last, current)
                iteration, attempt = record.iteration_id, record.attempt_id
                clock = self._clock(iteration, attempt)
                first, last, (iteration_id, attempt_id) = clock[0], clock[1], clock[2]  # interned ids
                current = self.open.get(clock[2])
            mono = record.monotonic_seconds
            if mono is not None:  # first and last are both None or both set
                if last is None:
                    first = last = mono
                elif mono > last:
                    last = mono
                elif mono < first:
                    first = mono
            event = record.event
            if event == "phase_completed":
                if current is None:
                    self._close(PhaseSpan(iteration_id=iteration_id, attempt_id=attempt_id,
                                          phase=intern(record.phase, record.phase), start_monotonic=None,
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
                current = (intern(record.phase, record.phase), mono, at)
            elif event == "source_read":
                self.reads.append(SourceRead(iteration_id=iteration_id, attempt_id=attempt_id,
                                             source_kind=intern(record.source_kind, record.source_kind),
                                             reference=record.reference, at=at, monotonic=mono))
            elif event == "sandbox_operation_started":
                op_id = record.operation_id or f"unnamed-{count}"
                self.ops_running[op_id] = SandboxOperation(
                    operation_id=op_id, category=intern(record.category, record.category), iteration_id=iteration_id,
                    attempt_id=attempt_id, started_at=at, started_monotonic=mono, duration_seconds=None,
                    status="running",
                )
            else:  # sandbox_operation_completed: the record type admits no other event
                op_id = record.operation_id or f"unnamed-{count}"
                started = self.ops_running.pop(op_id, None)
                category = record.category or (started.category if started else None)
                self.ops_done.append(SandboxOperation(
                    operation_id=op_id,
                    category=intern(category, category),
                    iteration_id=iteration_id,
                    attempt_id=attempt_id,
                    started_at=started.started_at if started else None,
                    started_monotonic=started.started_monotonic if started else None,
                    duration_seconds=record.duration_seconds,
                    status="succeeded" if record.status == "succeeded" else "failed",
                    exit_status=record.exit_status,
                    failure_type=record.failure_type,
                ))
        if clock:
            self._end_run(clock, first, last, current)
        self.count = count

    def _end_run(self, clock: list, first: float | None, last: float | None, current: tuple | None) -> None:
        """Write a run's clock bounds and open phase back, and update the time totals."""
        clock[0], clock[1] = first, last
        if current is None:
            self.open.pop(clock[2], None)
        else:
            self.open[clock[2]] = current
        if first is not None:
            span = last - first
            orchestration = span - clock[3]
            orchestration = max(orchestration, 0.0)
            self.span_seconds = (self.span_seconds or 0.0) + span - clock[4]
            self.orchestration = (self.orchestration or 0.0) + orchestration - clock[5]
            clock[4], clock[5] = span, orchestration


class Reducer:
    def __init__(self) -> None:
        self._telemetry: dict[str, _TelemetryFold] = {}
        self._evaluations: dict[str, list] = {}
        self._measure_runs: dict[str, list] = {}
        self._abba_runs: dict[str, list] = {}
        self._documents: dict[str, dict[str, object]] = {}  # kind -> path -> parsed value
        self._document_at: dict[str, float | None] = {}
        self._unreadable: dict[tuple[str, int | None], object] = {}
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
        path = None
        records: list = []
        ats: list = []
        for event in events:
            if event.kind == ev.TELEMETRY:
                if event.path != path:
                    if records:
                        self.fold_telemetry(path, records, ats)
                        records, ats = [], []
                    path = event.path
                records.append(event.data)
                ats.append(event.at)
            else:
                if records:
                    self.fold_telemetry(path, records, ats)
                    records, ats = [], []
                path = None
                self.apply(event)
        if records:
            self.fold_telemetry(path, records, ats)
        return self

    def apply(self, event: ev.Event) -> None:
        self._snapshot = None
        kind = event.kind
        if kind == ev.TELEMETRY:
            self.fold_telemetry(event.path, (event.data,), (event.at,))
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

    def fold_telemetry(self, path: str, records: Sequence[FoldedTelemetry | TelemetryRecord],
                       ats: Sequence[float | None]) -> None:
        """Fold telemetry records of one file, each with its time: what ``feed`` does with
        TELEMETRY events, for a cold scan that needs neither their offsets nor Events."""
        self._snapshot = None
        fold = self._telemetry.get(path)
        if fold is None:
            fold = self._telemetry[path] = _TelemetryFold()
        fold.add(records, ats)
        latest = max((at for at in ats if at is not None), default=None)
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

    def _latest(self, kind: str):
        docs = self._documents.get(kind)
        if not docs:
            return None
        path = max(docs, key=lambda p: (self._document_at.get(p) or 0.0, p))
        return docs[path]

    def _all(self, kind: str, sort_key=None) -> tuple:
        docs = self._documents.get(kind)
        if not docs:
            return ()
        if sort_key is None:
            return tuple(docs[p] for p in sorted(docs))
        return tuple(sorted(docs.values(), key=sort_key))

    def snapshot(self) -> EpisodeState:
        if self._snapshot is not None:
            return self._snapshot
        folds = [self._telemetry[p] for p in sorted(self._telemetry)]
        totals: dict[str, list] = {}
        for fold in folds:
            for phase, (wall, intervals, partial) in fold.totals.items():
                acc = totals.setdefault(phase, [0.0, 0, 0])
                acc[0] += wall
                acc[1] += intervals
                acc[2] += partial
        phase_totals = {
            phase: PhaseTotal(wall, intervals, "explicit" if partial == 0 else "partial")
            for phase, (wall, intervals, partial) in sorted(totals.items())
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
        span_seconds = None
        orchestration = None
        for fold in folds:
            span, orch = fold.totals_of_time()
            if span is not None:
                span_seconds = (span_seconds or 0.0) + span
                orchestration = (orchestration or 0.0) + orch
        running_ops = tuple(op for fold in folds for op in fold.ops_running.values())
        evaluations = combine([Prefix(self._evaluations[p]) for p in sorted(self._evaluations)])
        by_sha: dict[str, list] = {}
        for record in evaluations:
            sha = getattr(record, "kernel_sha256", None)
            if sha:
                by_sha.setdefault(sha, []).append(record)
        versions = self._all(ev.MEMORY_VERSION, sort_key=_version_key)
        jobs = self._all(ev.JOB, sort_key=lambda j: getattr(j, "created_at", None) or "")[::-1]
        state = EpisodeState(
            campaign_root=self._meta["campaign_root"],
            campaign=self._meta["campaign"],
            worktree=self._meta["worktree"],
            supervisor=self._latest(ev.STATE),
            active_episode=self._latest(ev.ACTIVE_EPISODE),
            attempts=self._all(ev.ATTEMPT),
            journal=self._latest(ev.JOURNAL),
            handoff=self._latest(ev.HANDOFF),
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
            evaluations=evaluations,
            evaluations_by_sha=MappingProxyType({k: tuple(v) for k, v in by_sha.items()}),
            versions=versions,
            incumbent_curve=_incumbent_curve(versions),
            profiles=self._all(ev.PROFILE),
            abba=self._all(ev.ABBA),
            timeline_receipts=self._all(ev.TIMELINE_RECEIPT),
            timeline_measurements=self._all(ev.TIMELINE_MEASUREMENT),
            measure_runs=MappingProxyType({p: Prefix(r) for p, r in sorted(self._measure_runs.items())}),
            abba_runs=MappingProxyType({p: Prefix(r) for p, r in sorted(self._abba_runs.items())}),
            jobs=jobs,
            job_logs=self._job_logs.snapshot(),
            gpu=self._gpu,
            unreadable=tuple(self._unreadable[k] for k in sorted(self._unreadable, key=lambda k: (k[0], k[1] or -1))),
            last_event_at=self._last_at,
            event_count=self._count,
        )
        state = replace(state, abba_comparisons=self._comparisons.abba(state.abba, state.abba_runs),
                        measure_comparisons=self._comparisons.measure(state.measure_runs))
        state = _with_alerts(state)
        self._snapshot = state
        return state


def _version_key(version) -> tuple:
    number = getattr(version, "version", None)
    return (number is None, number if isinstance(number, int) else 0)


def _incumbent_curve(versions: tuple) -> tuple:
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
