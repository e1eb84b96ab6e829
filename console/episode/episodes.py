"""Every episode of a campaign, live or archived: the campaign view.

While an episode runs, its runtime files (telemetry, evaluations, journal, handoff) sit in
the episode worktree's ``.atrex_long_horizon/`` and its ABBA directory under
``verification_artifacts/.atrex_long_horizon_verify/<uuid>/``. When it ends, the supervisor
copies them to ``.atrex_long_horizon/episodes/eNNNN/episode_runtime/`` and
``episodes/eNNNN/verification_runtime/<uuid>/``, records the outcome in
``episodes/eNNNN/attempt.json`` and removes ``active_episode.json`` (FORMATS §7). A file's
path therefore says which episode it belongs to (``archived_episode``); every other runtime
file belongs to the episode running now.

An ``EpisodeRecord`` is one row of the history: what the episode's own files say. A value
no file gives is ``None``, and ``unknown`` says why, never 0.

Profiles outlive their episode too: AKA archives an ended episode's worktree files, its
``profiles/`` among them, under ``episodes/eNNNN/archive/worktree_files/``, and a worktree
still on disk keeps its own (``eNNNN-<hex>``). ``place_episode`` reads a profile's episode
from that place (and a sandbox job record's: it counts for the episode whose worktree holds
it); ``campaign_profiles`` tags every profile with it and says which are the current
episode's (the funnel and the dominant kernel read only those).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

import msgspec

from console.profiling.result import ProfileResult

from .locations import EPISODE_WORKTREE_NAME
from .phase_timing import PhaseTiming

if TYPE_CHECKING:
    from console.formats.job_record import JobRecord
    from console.formats.journal import Journal
    from console.formats.supervisor import ActiveEpisode, Attempt

    from .state import AbbaComparison, SandboxOperation

# At most nine digits, as in a worktree's name (locations.EPISODE_WORKTREE_NAME)
_ARCHIVED = re.compile(r"(?:^|[/\\])\.atrex_long_horizon[/\\]episodes[/\\]e([0-9]{1,9})[/\\]")
# <parent>/.atrex_long_horizon_worktrees/<campaign>/eNNNN-<hex>/
_WORKTREE = re.compile(r"(?:^|[/\\])\.atrex_long_horizon_worktrees[/\\][^/\\]+[/\\]" + EPISODE_WORKTREE_NAME + r"[/\\]")
# A worktree or an ended episode's files, whatever they are named
_EPISODE_PLACE = re.compile(r"(?:^|[/\\])\.atrex_long_horizon(?:_worktrees[/\\]|[/\\]episodes[/\\])")


def archived_episode(path: str) -> int | None:
    """The episode number of a file under ``.atrex_long_horizon/episodes/eNNNN/``, else None."""
    found = _ARCHIVED.search(path)
    return int(found.group(1)) if found else None


def worktree_episode(worktree: str | None) -> int | None:
    """The episode a worktree is named after (AKA creates ``eNNNN-<hex>`` when the episode
    starts, before any file in it), else None."""
    found = _WORKTREE.search(os.path.join(worktree, "")) if worktree else None
    return int(found.group(1)) if found else None


def live_episode_number(active: ActiveEpisode | None, journal: Journal | None, worktree: str | None) -> int | None:
    """The number of the episode whose worktree files are read: what the supervisor's
    active_episode.json says, else the episode's journal, else the worktree's name. The
    journal is first written late in an episode and active_episode.json may be missing
    (an archive, a supervisor between writes); the name is there from the start."""
    for number in (active.episode if active else None, journal.episode if journal else None):
        if number is not None:
            return number
    return worktree_episode(worktree)


def place_episode(path: str) -> int | None:
    """The episode a profile directory's or a job record's place names: an ended episode's
    archived worktree files, or a worktree named after its episode; None: neither (a campaign
    root's own profiles/ or sandbox/)."""
    found = _ARCHIVED.search(path) or _WORKTREE.search(path)
    return int(found.group(1)) if found else None


class CampaignProfile(msgspec.Struct, frozen=True):
    """One profile of the campaign, tagged with its episode."""

    episode: int | None  # None: no episode is known for it
    current: bool  # the current episode's: what the funnel shows
    profile: ProfileResult


def campaign_profiles(profiles: Iterable[ProfileResult], current: int | None,
                      worktree: str | None) -> tuple[CampaignProfile, ...]:
    """Every profile, oldest episode first (by directory within one), each with its episode.

    A profile is the current episode's when its place names that episode, when it is in the
    worktree shown, or when it is the campaign root's own (profiles/ there, where an episode
    without a worktree works). A worktree or an ended episode's directory not named after an
    episode is no episode's."""
    inside = os.path.join(worktree, "") if worktree else None
    tagged = []
    for profile in profiles:
        number = place_episode(profile.dir)
        in_root = number is None and not _EPISODE_PLACE.search(profile.dir)
        shown = in_root or (inside is not None and profile.dir.startswith(inside))
        is_current = shown or (number is not None and number == current)
        tagged.append(CampaignProfile(number if number is not None else current if shown else None, is_current, profile))
    return tuple(sorted(tagged, key=lambda p: (p.episode is None, p.episode or 0, p.profile.dir)))


def by_episode(paths: Iterable[str]) -> dict[int | None, set[str]]:
    """Runtime files grouped by the archived episode they belong to (None: the live one)."""
    groups: dict[int | None, set[str]] = {}
    for path in paths:
        groups.setdefault(archived_episode(path), set()).add(path)
    return groups


TRACED_SHOWN = 100  # the newest traced operations a state lists (an AKA episode traces tens)


def traced_only(operations: Sequence[SandboxOperation], jobs: Iterable[JobRecord]) -> tuple[SandboxOperation, ...]:
    """The newest TRACED_SHOWN telemetry sandbox operations no job record names, newest
    first: the sandbox work the Jobs pane and ``status`` list beside the job records (AKA
    writes no job record, so on its campaigns these are all there is). ``SandboxCounts``
    counts every one of them. Read from the end of ``operations`` (file order, the running
    ones last), so a snapshot of a long campaign costs what it shows, not what it holds."""
    named = {job.operation_id for job in jobs if job.operation_id}
    newest: list[SandboxOperation] = []
    for index in range(len(operations) - 1, -1, -1):
        if len(newest) == TRACED_SHOWN:
            break
        operation = operations[index]
        if operation.operation_id not in named:
            newest.append(operation)
    return tuple(sorted(newest, key=lambda op: op.started_at or 0.0, reverse=True))


def operation_elapsed(operation: SandboxOperation, now: float | None) -> float | None:
    """A traced operation's time: its stated duration once completed, else the time since it
    started until ``now`` (None: neither is known)."""
    if operation.status != "running":
        return operation.duration_seconds
    if operation.started_at is None or now is None:
        return None
    return max(now - operation.started_at, 0.0)


class SandboxCounts(msgspec.Struct, frozen=True):
    """Each sandbox job of an episode counted once (reducer.py counts them): a job
    record by its outcome, a telemetry sandbox operation only when no job record names it."""

    running: int  # queued too
    succeeded: int
    failed: int  # failed, timed out or lost: ended without a result
    cancelled: int
    seconds: float | None  # summed over the ended jobs counted; None: one of them states no duration
    untimed: int  # ended jobs that state no duration
    jobs: Mapping[str, int]  # the job records by their exact state

    def to_json(self) -> dict[str, object]:
        return {"running": self.running, "succeeded": self.succeeded, "failed": self.failed,
                "cancelled": self.cancelled, "seconds": self.seconds, "jobs": dict(self.jobs)}


class RuntimeFacts(msgspec.Struct, frozen=True):
    """What one episode's runtime files say (the reducer folds them); None: no file says it."""

    telemetry_events: int | None  # None: no telemetry file
    phase_timing: PhaseTiming | None
    source_reads: int | None
    sandbox: SandboxCounts | None  # None: neither a telemetry file nor a job record
    evaluations: int | None  # None: no evaluations file
    evaluation_kernels: int | None  # distinct kernel_sha256 named; None: no evaluation names one
    journal_state: str | None
    journal_experiments: int | None
    handoff: str | None  # the handoff's status
    unreadable: frozenset[str] = frozenset()  # names of its runtime files that could not be read


class Verification(msgspec.Struct, frozen=True):
    directory: str | None
    gate: str | None  # None until result.json is in
    improvement_pct: float | None


NO_RUNTIME = RuntimeFacts(None, None, None, None, None, None, None, None, None)


class EpisodeRecord(msgspec.Struct, frozen=True):
    episode: int | None
    source: str  # "live" (runs now) | "archived" (episodes/eNNNN/)
    version: int | None  # the memory version it records
    mode: str | None
    phase: str | None  # the supervisor's phase of a live episode (active_episode.json)
    status: str | None  # the terminal status: candidate_ready | pivot | blocked | invalid_handoff ...
    accepted: bool | None
    gate: str | None  # the supervisor's verdict: PASS | FAIL | ERROR
    improvement_pct: float | None
    candidate_commit: str | None
    promotion_commit: str | None
    tokens: int | None
    runtime: RuntimeFacts
    verifications: tuple[Verification, ...]
    unknown: Mapping[str, str]  # field -> why it is null

    def to_json(self) -> dict[str, object]:
        runtime = self.runtime
        return {
            "episode": self.episode,
            "source": self.source,
            "version": self.version,
            "mode": self.mode,
            "phase": self.phase,
            "status": self.status,
            "accepted": self.accepted,
            "gate": self.gate,
            "improvement_pct": self.improvement_pct,
            "candidate_commit": self.candidate_commit,
            "promotion_commit": self.promotion_commit,
            "tokens": self.tokens,
            "telemetry_events": runtime.telemetry_events,
            "phase_timing": None if runtime.phase_timing is None else runtime.phase_timing.to_json(),
            "source_reads": runtime.source_reads,
            "sandbox": None if runtime.sandbox is None else runtime.sandbox.to_json(),
            "evaluations": runtime.evaluations,
            "journal": None if runtime.journal_state is None and runtime.journal_experiments is None
            else {"state": runtime.journal_state, "experiments": runtime.journal_experiments},
            "handoff": runtime.handoff,
            "verifications": [msgspec.to_builtins(v) for v in self.verifications],
            "unknown": dict(self.unknown),
        }


def build_history(
    attempts: Iterable[Attempt],
    active: ActiveEpisode | None,
    archived: Mapping[int, RuntimeFacts],
    live: RuntimeFacts | None,
    live_number: int | None,
    comparisons: Sequence[AbbaComparison],
) -> tuple[EpisodeRecord, ...]:
    """One record per episode, oldest first: each archived one (an attempt record, archived
    runtime files or an archived ABBA directory), then the live one when there is one and it
    is not one of those already (its worktree outliving its archive).

    AKA fills ``episodes/eNNNN/`` before the episode has ended: its ABBA directory while it
    verifies, and its runtime files copied with their own times, so a replay reads them at
    the moments they were first written; ``attempt.json`` is what it writes when the episode
    is archived. The newest episode with neither an attempt record nor a later episode
    started is therefore still running: its record is the live one (the worktree's files
    when they are read, else those copies), not an archived one."""
    by_number: dict[int, Attempt] = {}
    for attempt in attempts:  # later records of an episode (its attempt.json) win
        if attempt.episode is not None:
            by_number[attempt.episode] = attempt
    checks: dict[int | None, list[Verification]] = {}
    for comparison in comparisons:
        verdict = comparison.verdict
        number = archived_episode(comparison.directory) if comparison.directory else None
        checks.setdefault(number, []).append(Verification(
            comparison.directory, verdict.gate if verdict else None, verdict.improvement_pct if verdict else None))
    numbers = sorted({*by_number, *archived, *(n for n in checks if n is not None)})
    running = live is not None or active is not None
    # An episode of unknown number running now may be a later one: the newest stays archived.
    unended = numbers[-1] if numbers and numbers[-1] not in by_number and (
        not running or live_number == numbers[-1]) else None
    if live is not None and live_number in numbers:
        # The worktree's episode has files in its archive: one record, its own checks too.
        checks.setdefault(live_number, []).extend(checks.pop(None, []))
    records = [
        _record(n, "archived", by_number.get(n), None,
                archived.get(n) or (live if n == live_number and live is not None else NO_RUNTIME), checks.get(n, []))
        for n in numbers if n != unended
    ]
    if unended is not None:
        runtime = live if live is not None else archived.get(unended, NO_RUNTIME)
        records.append(_record(unended, "live", None, active, runtime, checks.get(unended, [])))
    elif running and live_number not in numbers:
        records.append(_record(live_number, "live", None, active, live or NO_RUNTIME, checks.get(None, [])))
    return tuple(records)


def _record(number: int | None, source: str, attempt: Attempt | None, active: ActiveEpisode | None,
            runtime: RuntimeFacts, verifications: list[Verification]) -> EpisodeRecord:
    verdict = attempt.verification if attempt is not None else None
    version = attempt.version if attempt is not None else (active.memory_version if active is not None else None)
    return EpisodeRecord(
        episode=number,
        source=source,
        version=version,
        mode=attempt.mode if attempt is not None else (active.mode if active is not None else None),
        phase=active.phase if active is not None else None,
        status=attempt.status if attempt is not None else (active.terminal_status if active is not None else None),
        accepted=attempt.accepted if attempt is not None else None,
        gate=verdict.gate if verdict is not None else None,
        improvement_pct=verdict.improvement_pct if verdict is not None else None,
        candidate_commit=attempt.candidate_commit if attempt is not None else None,
        promotion_commit=attempt.promotion_commit if attempt is not None else None,
        tokens=attempt.tokens if attempt is not None else None,
        runtime=runtime,
        verifications=tuple(verifications),
        unknown=why_unknown(runtime, number=number, archived=source == "archived", attempt=attempt),
    )


# The runtime facts' keys, as the status document names them: ``unknown`` gives a reason for
# each that is null, the episode's own in ``episodes[]``, the current episode's at the top level.
RUNTIME_KEYS = ("telemetry_events", "phase_timing", "source_reads", "sandbox", "sandbox.seconds",
                "evaluations", "evaluations.kernels", "journal", "handoff")


def runtime_directory(number: int | None, *, archived: bool) -> str:
    """Where an episode's runtime files are, as a reason names it."""
    if archived and number is not None:
        return f"episodes/e{number:04d}/episode_runtime/"
    return "the episode worktree's .atrex_long_horizon/"


def why_unknown(runtime: RuntimeFacts, *, number: int | None, archived: bool, attempt: Attempt | None) -> Mapping[str, str]:
    """A reason for each runtime fact and outcome no file gave."""
    where = runtime_directory(number, archived=archived)

    def missing(name: str, what: str) -> str:
        if name in runtime.unreadable:
            return f"{name} in {where} could not be read (see unreadable)"
        return f"no {what} in {where}"

    reasons: dict[str, str] = {}
    if runtime.telemetry_events is None:
        for key in ("telemetry_events", "phase_timing", "source_reads"):
            reasons[key] = missing("telemetry.jsonl", "telemetry.jsonl")
    sandbox = runtime.sandbox
    if sandbox is None:
        reasons["sandbox"] = reasons["sandbox.seconds"] = (
            f"{missing('telemetry.jsonl', 'telemetry.jsonl')}, and no sandbox job record")
    elif sandbox.seconds is None:
        reasons["sandbox.seconds"] = f"{sandbox.untimed} ended sandbox job(s) state no duration"
    if runtime.evaluations is None:
        reasons["evaluations"] = reasons["evaluations.kernels"] = missing("evaluations.jsonl", "evaluation recorded")
    elif runtime.evaluation_kernels is None:
        reasons["evaluations.kernels"] = "no evaluation names its kernel (kernel_sha256)"
    if runtime.journal_state is None and runtime.journal_experiments is None:
        reasons["journal"] = f"no readable journal.json in {where}"
    if runtime.handoff is None:
        reasons["handoff"] = f"no readable handoff.json in {where}"
    if attempt is None:
        outcome = "the episode is still running" if not archived else "no readable attempt.json for this episode"
        for key in ("accepted", "gate", "tokens"):
            reasons[key] = outcome
    else:
        if attempt.verification is None:
            reasons["gate"] = "the attempt records no verification"
        for key in ("accepted", "tokens"):
            if getattr(attempt, key) is None:
                reasons[key] = f"the attempt records no {key}"
    return MappingProxyType(reasons)
