"""Folding the event stream into an immutable ``EpisodeState``.

``Reducer.feed`` is the only place events change anything; ``Reducer.snapshot`` hands out
an immutable state that shares the append-only lists through ``views.Prefix`` (O(1)), so
the live console can snapshot after every batch. ``fold(events)`` is the pure one-shot
form used by tests, replay and the headless verbs.

Phase pairing follows FORMATS §2: markers pair per (iteration, attempt) by the writer's
monotonic clock; an overlapping start, a mismatched end, an orphan end or an unclosed
start makes that span ``partial`` and it is kept, never silently dropped. A marker whose phase
is not one of FORMATS §2's seven is no span and takes no part in the pairing, as in AKA's
reader: it is counted as ``invalid_phase_marker``. Orchestration time is each attempt's
telemetry span minus the phase time attributed inside it; sandbox time is reported apart.
Beside its own pairing, each telemetry file also runs AKA's phase reader (phase_timing.py),
whose measurement and reason codes the status reports as AKA would.

The episode fields read one episode's runtime files, the current episode's: the worktree's
(live, or archived once it ended), else, between episodes, the last archived one's
(episodes.py tells them apart by path). ``episodes`` holds every episode's own, archived and
live, and ``current_episode`` is the current one's record: the runtime facts the status
reports at its top level, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import replace

from console.formats.telemetry import TelemetryRecord
from console.formats.telemetry_builders import PHASES
from console.formats.timeline import with_decoded_sites

from . import events as ev
from .comparisons import Comparisons
from .episodes import (
    NO_RUNTIME,
    RuntimeFacts,
    SandboxCounts,
    build_history,
    by_episode,
    campaign_profiles,
    live_episode_number,
    place_episode,
    traced_only,
)
from .guards import evaluate_guards
from .job_logs import JobLogs
from .job_outcome import job_outcome
from .kernels import dominant_kernel, why_no_dominant_kernel
from .phase_timing import INVALID_MARKER, MISMATCHED_END, ORPHAN_END, OVERLAPPING, UNCLOSED, PhaseTimer
from .phase_timing import combine as combine_timing
from .registry import DOCUMENT_KINDS
from .state import EpisodeState, PhaseSpan, PhaseTotal, SandboxOperation, SourceRead
from .views import Prefix, combine

if TYPE_CHECKING:
    from console.formats.abba import AbbaRun
    from console.formats.evaluations import EvaluationRecord
    from console.formats.job_record import JobRecord
    from console.formats.memory import MemoryVersion
    from console.formats.problems import Unreadable
    from console.formats.timeline import MeasureRun

    from .episodes import EpisodeRecord
    from .state import AbbaComparison


# A known phase's name, one string shared by every span of it; a marker of another phase has none.
_PHASE_NAMES: dict[str | None, str] = {phase: phase for phase in PHASES}
# The runtime files an episode's facts read: one that cannot be read makes them unknown, not 0.
_RUNTIME_NAMES = frozenset({"telemetry.jsonl", "evaluations.jsonl", "journal.json", "handoff.json", "job.json"})


class _Clock(msgspec.Struct, gc=False):
    """One attempt's telemetry clock: its monotonic bounds, the phase time attributed
    inside it, and what it last added to the file's time totals.

    A long campaign has an attempt per few dozen records, and every clock lives as long as
    its file's fold. Like the spans, it holds only strings and numbers (never part of a
    cycle), so the cyclic collector need not track it.
    """

    iteration_id: str
    attempt_id: str
    first: float | None = None  # earliest and latest monotonic time: both None or both set
    last: float | None = None
    attributed: float = 0.0
    span_part: float = 0.0
    orchestration_part: float = 0.0


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

    __slots__ = ("clocks", "count", "ids", "open", "ops_by_id", "ops_done", "ops_ended", "ops_running", "ops_seconds",
                 "ops_untimed", "orchestration", "reads", "reasons", "span_seconds", "spans", "timer", "totals")

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
        self.ops_by_id: dict[str, SandboxOperation] = {}  # completed, by operation id (a job record names one)
        self.ops_running: dict[str, SandboxOperation] = {}
        # Completed operations by status, their summed duration and how many state none,
        # counted as they complete: a snapshot must not walk every operation.
        self.ops_ended: dict[str, int] = {}
        self.ops_seconds = 0.0
        self.ops_untimed = 0
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

    def _close(self, clock: _Clock, phase: str, start: float | None, start_at: float | None,
               end: float | None, end_at: float | None, reason: str | None) -> None:
        """Keep a closed span of ``clock``'s attempt (explicit unless a reason says why it is
        partial), and add its wall time to its phase and attempt."""
        self.spans.append(PhaseSpan(iteration_id=clock.iteration_id, attempt_id=clock.attempt_id, phase=phase,
                                    start_monotonic=start, end_monotonic=end, start_at=start_at, end_at=end_at,
                                    measurement="explicit" if reason is None else "partial", reason=reason))
        tally = self.totals.get(phase)
        if tally is None:
            tally = self.totals[phase] = _Tally()
        if start is not None and end is not None:
            tally.wall += end - start
            clock.attributed += end - start
        tally.intervals += 1
        if reason is not None:
            tally.partial += 1
            self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def _ignore_marker(self) -> None:
        """AKA's reader ignores a marker of no known phase (invalid_phase_marker): it opens
        and closes nothing, so it is counted, never paired nor made a phase of its own."""
        self.reasons[INVALID_MARKER] = self.reasons.get(INVALID_MARKER, 0) + 1

    def add(self, records: Sequence[TelemetryRecord]) -> float | None:
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
            if record.iteration_id != iteration_id or record.attempt_id != attempt_id or clock is None:
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
            if event == "phase_started" or event == "phase_completed":
                phase = _PHASE_NAMES.get(record.phase)
                if phase is None:
                    self._ignore_marker()
                elif event == "phase_started":
                    if current is not None:
                        open_phase, start, start_at = current
                        self._close(clock, open_phase, start, start_at, mono, at, OVERLAPPING)
                    current = (phase, mono, at)
                elif current is None:
                    self._close(clock, phase, None, None, mono, at, ORPHAN_END)
                else:
                    open_phase, start, start_at = current
                    current = None
                    self._close(clock, open_phase, start, start_at, mono, at,
                                None if open_phase == phase else MISMATCHED_END)
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
                if record.duration_seconds is None:
                    self.ops_untimed += 1
                else:
                    self.ops_seconds += record.duration_seconds
                done = SandboxOperation(
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
                )
                self.ops_done.append(done)
                self.ops_by_id[op_id] = done
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
            self._document_at[event.path] = at  # dates its verification (comparisons.py)
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

    def fold_telemetry(self, path: str, records: Sequence[TelemetryRecord]) -> None:
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

    def _runtime_groups(self) -> tuple[dict[int | None, set[str]], dict[int | None, set[str]]]:
        """Runtime files by episode (episodes.py): its telemetry, evaluations, journal and
        handoff by the archived episode they are in (None: the live one's), and those of them
        that could not be read; then the sandbox job records by the episode whose worktree
        holds them (``place_episode``; None: the campaign root's own, the live episode's)."""
        unreadable = [path for path, _ in self._unreadable if path.rsplit("/", 1)[-1] in _RUNTIME_NAMES]
        job_paths = [*self._documents.get(ev.JOB, ()), *(p for p in unreadable if p.rsplit("/", 1)[-1] == "job.json")]
        jobs: dict[int | None, set[str]] = {}
        for path in job_paths:
            jobs.setdefault(place_episode(path), set()).add(path)
        files = by_episode([*self._telemetry, *self._evaluations, *self._documents.get(ev.JOURNAL, ()),
                            *self._documents.get(ev.HANDOFF, ()), *(p for p in unreadable if p not in job_paths)])
        return files, jobs

    def _runtime_facts(self, paths: set[str]) -> RuntimeFacts:
        folds = [self._telemetry[p] for p in sorted(paths) if p in self._telemetry]
        lists = [self._evaluations[p] for p in sorted(paths) if p in self._evaluations]
        jobs = self._documents.get(ev.JOB) or {}
        journal, handoff = self._latest(ev.JOURNAL, paths), self._latest(ev.HANDOFF, paths)
        kernels = {record.kernel_sha256 for records in lists for record in records if record.kernel_sha256}
        return RuntimeFacts(
            telemetry_events=sum(f.count for f in folds) if folds else None,
            phase_timing=combine_timing(f.timer.timing() for f in folds),
            source_reads=sum(len(f.reads) for f in folds) if folds else None,
            sandbox=_sandbox_counts(folds, [jobs[p] for p in sorted(paths) if p in jobs]),
            evaluations=sum(len(records) for records in lists) if lists else None,
            evaluation_kernels=len(kernels) if kernels else None,
            journal_state=journal.state if journal else None,
            journal_experiments=len(journal.experiments or ()) if journal else None,
            handoff=handoff.status if handoff else None,
            unreadable=frozenset(path.rsplit("/", 1)[-1] for path, _ in self._unreadable if path in paths),
        )

    def _history(self, comparisons: tuple[AbbaComparison, ...]
                 ) -> tuple[tuple[EpisodeRecord, ...], EpisodeRecord | None, set[str]]:
        """Every episode's record (episodes.build_history), the current one and its runtime
        files. The current episode is the worktree's (the live one, or the archived episode
        whose worktree is still there), else, between episodes, the last archived one. Its
        record and the state's episode fields read the same files.

        Sandbox job records sit in the worktree whatever becomes of the episode, and every
        worktree of the campaign still on disk is read (ingest): each record counts for its
        worktree's episode, whichever path opened the campaign. The live episode's are among
        its live files, and count in its archived record once it is archived."""
        groups, job_groups = self._runtime_groups()
        live = groups.get(None)
        active = self._latest(ev.ACTIVE_EPISODE)
        live_journal = self._latest(ev.JOURNAL, live) if live else None
        live_number = live_episode_number(active, live_journal, self._meta["worktree"])
        live_jobs = set().union(*(paths for n, paths in job_groups.items() if n is None or n == live_number))
        if live_jobs:
            live = (live or set()) | live_jobs
        archived_paths = {n: paths | live_jobs if n == live_number else paths
                          for n, paths in groups.items() if n is not None}
        for number, paths in job_groups.items():  # another worktree's: its own episode's
            if number is not None and number != live_number:
                archived_paths[number] = archived_paths.get(number, set()) | paths
        supervisor = self._latest(ev.STATE)
        records = build_history(
            [*(supervisor.attempts or () if supervisor else ()), *self._all(ev.ATTEMPT)],
            active,
            {n: self._runtime_facts(paths) for n, paths in archived_paths.items()},
            self._runtime_facts(live) if live else None,
            live_number,
            comparisons,
        )
        if not records:
            return records, None, set()
        current = records[-1]
        if live:  # build_history gave the worktree's episode a record: live, or archived under its number
            current = next(r for r in reversed(records) if r.source == "live" or r.episode == live_number)
        if current.source == "live" and live:
            return records, current, live
        if current.episode in archived_paths:  # archived, or running with only its copies read yet
            return records, current, archived_paths[current.episode]
        return records, current, (live or set()) if current.episode == live_number else set()

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
        abba = self._all(ev.ABBA)
        abba_runs = MappingProxyType({p: Prefix(r) for p, r in sorted(self._abba_runs.items())})
        measure_runs = MappingProxyType({p: Prefix(r) for p, r in sorted(self._measure_runs.items())})
        abba_comparisons = self._comparisons.abba(self._documents.get(ev.ABBA) or {}, abba_runs, self._document_at)
        episodes, record, current = self._history(abba_comparisons)
        facts = record.runtime if record is not None else NO_RUNTIME
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
            # The largest first: a line that has to be cut keeps the phases that took the time.
            for phase, tally in sorted(totals.items(), key=lambda item: (-item[1].wall, item[0]))
        }
        reasons: dict[str, int] = {}
        for fold in folds:
            for reason, count in fold.reasons.items():
                reasons[reason] = reasons.get(reason, 0) + count
        active = None
        open_spans = []
        for fold in folds:
            for (iteration, attempt), (phase, mono, at) in fold.open.items():
                open_spans.append(PhaseSpan(iteration, attempt, phase, mono, None, at, None, "partial", UNCLOSED, active=True))
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
        for evaluation in evaluations:
            sha = evaluation.kernel_sha256
            if sha:
                by_sha.setdefault(sha, []).append(evaluation)
        versions = self._all(ev.MEMORY_VERSION, sort_key=_version_key)
        # The Jobs pane's: the current episode's job records (its runtime files), newest first.
        job_records = self._documents.get(ev.JOB) or {}
        jobs = tuple(job_records[p] for p in sorted((p for p in current if p in job_records),
                                                    key=lambda p: (job_records[p].created_at or "", p)))[::-1]
        sandbox_operations = combine([Prefix(f.ops_done) for f in folds] + [running_ops])
        every_profile = campaign_profiles(self._all(ev.PROFILE), record.episode if record is not None else None,
                                          self._meta["worktree"])
        profiles = tuple(tagged.profile for tagged in every_profile if tagged.current)
        state = EpisodeState(
            campaign_root=self._meta["campaign_root"],
            campaign=self._meta["campaign"],
            worktree=self._meta["worktree"],
            supervisor=self._latest(ev.STATE),
            active_episode=self._latest(ev.ACTIVE_EPISODE),
            attempts=self._all(ev.ATTEMPT),
            journal=self._latest(ev.JOURNAL, current),
            handoff=self._latest(ev.HANDOFF, current),
            runtime=record.source if record is not None else None,
            current_episode=record,
            episodes=episodes,
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
            sandbox_operations=sandbox_operations,
            traced_operations=traced_only(sandbox_operations, jobs),
            running_operations=running_ops,
            telemetry_events=facts.telemetry_events,
            evaluations=evaluations,
            evaluations_by_sha=MappingProxyType({k: tuple(v) for k, v in by_sha.items()}),
            versions=versions,
            incumbent_curve=_incumbent_curve(versions),
            profiles=profiles,
            campaign_profiles=every_profile,
            dominant_kernel=dominant_kernel(profiles),
            dominant_kernel_unknown=why_no_dominant_kernel(profiles),
            abba=abba,
            timeline_receipts=with_decoded_sites(self._all(ev.TIMELINE_RECEIPT),
                                                 self._documents.get(ev.TIMELINE_SITES) or {}),
            timeline_measurements=self._all(ev.TIMELINE_MEASUREMENT),
            measure_runs=measure_runs,
            abba_runs=abba_runs,
            abba_comparisons=abba_comparisons,
            measure_comparisons=self._comparisons.measure(measure_runs),
            jobs=jobs,
            job_logs=self._job_logs.snapshot(),
            gpu=self._gpu,
            preflight=self._latest(ev.PREFLIGHT),
            unreadable=tuple(self._unreadable[k] for k in sorted(self._unreadable, key=lambda k: (k[0], k[1] or -1))),
            last_event_at=self._last_at,
            event_count=self._count,
        )
        state = _with_alerts(state)
        self._snapshot = state
        return state


def _sandbox_counts(folds: Sequence[_TelemetryFold], jobs: Sequence[JobRecord]) -> SandboxCounts | None:
    """Each sandbox job counted once: a job record by its outcome (``job_outcome``), a
    telemetry operation only when no job record names its operation id. ``seconds`` sums
    the ended jobs' durations (a record's own, else its operation's); a job that ended
    before it started ran none. None when neither a telemetry file nor a job record is there."""
    if not folds and not jobs:
        return None
    counts = {"running": 0, "succeeded": 0, "failed": 0, "cancelled": 0}
    seconds, untimed = 0.0, 0
    for fold in folds:
        for status, count in fold.ops_ended.items():
            counts[status] += count
        counts["running"] += len(fold.ops_running)
        seconds += fold.ops_seconds
        untimed += fold.ops_untimed
    by_state: dict[str, int] = {}
    named: set[str] = set()
    for job in jobs:
        by_state[job.state] = by_state.get(job.state, 0) + 1
        op = _operation(folds, job.operation_id) if job.operation_id not in named else None
        if op is not None:  # the job record stands for this operation: take the operation out
            named.add(op.operation_id)
            counts[op.status] -= 1
            if op.status != "running":
                if op.duration_seconds is None:
                    untimed -= 1
                else:
                    seconds -= op.duration_seconds
        outcome = job_outcome(job.state)
        counts[outcome] += 1
        duration = job.duration_seconds
        if duration is None and op is not None:
            duration = op.duration_seconds
        if outcome == "running":
            continue
        if duration is None and not job.started_at:
            duration = 0.0
        if duration is None:
            untimed += 1
        else:
            seconds += duration
    return SandboxCounts(running=counts["running"], succeeded=counts["succeeded"], failed=counts["failed"],
                         cancelled=counts["cancelled"], seconds=None if untimed else max(seconds, 0.0),
                         untimed=untimed, jobs=MappingProxyType(by_state))


def _operation(folds: Sequence[_TelemetryFold], operation_id: str | None) -> SandboxOperation | None:
    """The telemetry operation a job record names, completed or still running."""
    if not operation_id:
        return None
    for fold in folds:
        op = fold.ops_by_id.get(operation_id) or fold.ops_running.get(operation_id)
        if op is not None:
            return op
    return None


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
