"""The one status document (``episcope status --json``) and the JSON form of events.

Agent scripts parse this, so keys are stable and documented (README); ``schema_version``
changes when a key changes meaning. Unknown values are ``null``, never 0.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from .episodes import NO_RUNTIME, RUNTIME_KEYS, RuntimeFacts, operation_elapsed, why_unknown
from .events import Event
from .job_outcome import failure_line, job_outcome
from .kernels import job_elapsed, profile_shape
from .state import EpisodeState

if TYPE_CHECKING:
    from console.formats.problems import Unreadable
    from console.formats.supervisor import Attempt, SupervisorState
    from console.gpu.sampler import GpuReading

    from .episodes import EpisodeRecord
    from .preflight import Preflight

T = TypeVar("T")

SCHEMA_VERSION = "episcope-status/v4"


def to_jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if hasattr(value, "_asdict"):
            raw = getattr(value, "raw", None)
            return raw if isinstance(raw, dict) else {k: to_jsonable(v) for k, v in value._asdict().items()}
        return [to_jsonable(v) for v in value]
    fields = getattr(value, "__struct_fields__", None)  # a record without its own to_json
    if fields is not None:
        return {k: to_jsonable(getattr(value, k)) for k in fields}
    return str(value)


def event_to_json(event: Event) -> dict[str, Any]:
    return {"kind": event.kind, "path": event.path, "offset": event.offset, "at": event.at, "data": to_jsonable(event.data)}


def _all_attempts(state: EpisodeState) -> list[Attempt]:
    """The supervisor's attempt records, then the archived episodes' own."""
    listed = state.supervisor.attempts if state.supervisor is not None else None
    return [*(listed or ()), *state.attempts]


def _first(*values: T | None) -> T | None:
    """The first value that is known."""
    return next((v for v in values if v is not None), None)


def episode_facts(state: EpisodeState) -> dict[str, Any]:
    """Which episode this is and where it stands (shared by the status document and the header).

    A fact comes from the active episode while there is one, else from the current
    episode's record (its number even before a supervisor document names it; its mode and
    status from its own attempt record once it is archived, never an earlier episode's),
    the journal or the git facts.
    """
    active, journal, handoff, git = state.active_episode, state.journal, state.handoff, state.git
    record = state.current_episode
    if active is not None:
        number, mode, phase, status = active.episode, active.mode, active.phase, active.terminal_status
        branch, memory_version = active.episode_branch, active.memory_version
        # where the worktree is now: an archive's copy, not the path the supervisor recorded
        worktree = state.worktree or active.worktree
    else:
        number = _first(record.episode if record else None, journal.episode if journal else None)
        mode = record.mode if record else None
        phase = None
        status = record.status if record else None
        branch = _first(journal.episode_branch if journal else None, git.branch if git else None)
        worktree = state.worktree
        memory_version = journal.memory_version if journal else None
    return {
        "number": number,
        "mode": mode,
        "phase": phase,
        "status": status,
        "branch": branch,
        "worktree": worktree,
        "memory_version": memory_version,
        "journal_state": journal.state if journal else None,
        "handoff": handoff.status if handoff else None,
        "candidate_commit": handoff.candidate_commit if handoff else journal.candidate_commit if journal else None,
        "head": git.head if git else None,
        "runtime": state.runtime,
    }


def _phases(state: EpisodeState, runtime: RuntimeFacts, unknown: dict[str, str]) -> dict[str, Any] | None:
    """episcope's own pairing of the current episode's phases; None without a telemetry file
    to measure them in (no phases measured is ``{}``), ``unknown`` saying why."""
    if runtime.telemetry_events is None:
        unknown["phases"] = unknown["telemetry_events"]
        return None
    phases = {
        phase: {"wall_seconds": total.wall_seconds, "intervals": total.intervals, "measurement": total.measurement}
        for phase, total in state.phase_totals.items()
    }
    for span in state.open_spans:
        # An open phase has no interval yet: AKA's reader calls that unavailable.
        entry = phases.setdefault(span.phase, {"wall_seconds": None, "intervals": 0, "measurement": "unavailable"})
        entry["active"] = True
    return phases


def _latency(value: float | None) -> float | None:
    """A stated latency, or None where it is not one (NaN, infinite, zero or negative)."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def _last_evaluation(state: EpisodeState, unknown: dict[str, str]) -> dict[str, Any] | None:
    if not state.evaluations:
        return None
    record = state.evaluations[-1]
    stated = record.result.latency_us_geomean
    if stated is not None and _latency(stated) is None:
        unknown["evaluations.last.latency_us_geomean"] = f"the evaluation states {stated!r}, not a latency"
    return {
        "kernel_sha256": record.kernel_sha256,
        "all_pass": record.result.all_pass,
        "latency_us_geomean": _latency(stated),
        "timestamp": record.timestamp,
        "schema_version": record.schema_version,
        "gateway_kind": record.gateway_kind,
        "job_id": record.job_id,
    }


def _incumbent(state: EpisodeState) -> dict[str, Any] | None:
    if not state.incumbent_curve:
        return None
    version = state.incumbent_curve[-1][0]
    record = next((v for v in state.versions if v.version == version), None)
    return {
        "version": version,
        "latency_us_geomean": record.latency_us_geomean if record else None,
        "performance_score": record.performance_score if record else None,
    }


def _versions(state: EpisodeState) -> list[dict[str, Any]]:
    attempts = _all_attempts(state)
    by_version = {a.version: a for a in attempts if a.version is not None}
    out = []
    for v in state.versions:
        attempt = by_version.get(v.version) if v.version is not None else None
        out.append(
            {
                "version": v.version,
                "latency_us_geomean": v.latency_us_geomean,
                "performance_score": v.performance_score,
                "accepted": attempt.accepted if attempt else None,
                "status": (attempt.status if attempt else None) or v.long_horizon_status,
                "correctness": v.correctness_status,
                "measurement_subject": v.measurement_subject,
                "git_commit_hash": v.git_commit_hash,
                "candidate_commit": v.long_horizon.candidate_commit if v.long_horizon else None,
                "quality_gate": None if v.quality_gate is None
                else {"result": v.quality_gate.result, "failure_reason": v.quality_gate.failure_reason},
            }
        )
    return out


def _profiles(state: EpisodeState) -> list[dict[str, Any]]:
    """Every profile of the campaign, oldest episode first, each with its episode; ``current``
    marks the current episode's (the console's funnel shows only those)."""
    out = []
    for tagged in state.campaign_profiles:
        profile = tagged.profile
        diagnosed = profile.patterns_unknown is None
        out.append({
            "dir": profile.dir,
            "episode": tagged.episode,
            "current": tagged.current,
            "level": profile.level,
            "shape": profile_shape(profile.dir),
            "kernels": [k.name for k in profile.kernels],
            "bottleneck": profile.bottleneck,
            "symptoms": list(profile.symptoms) if diagnosed else None,
            "localize": list(profile.localize),
            "kernel_sha256": profile.kernel_sha256,
            "patterns": [{"id": p[0], "severity": p[1], "label": p[2]} for p in profile.patterns] if diagnosed else None,
            "patterns_unknown": profile.patterns_unknown,
            "kernel_count": profile.kernel_count,
            "kernels_omitted": profile.kernels_omitted,
            "job": None if profile.job_id is None else {"job_id": profile.job_id, "status": profile.job_status},
            "aka_patterns": None if profile.aka_patterns is None else [p.to_json() for p in profile.aka_patterns],
            "aka_patterns_unknown": profile.aka_patterns_unknown,
        })
    return out


def _episodes(state: EpisodeState) -> list[dict[str, Any]]:
    """The campaign view: each episode's entry."""
    return [episode_entry(state, record) for record in state.episodes]


def episode_entry(state: EpisodeState, record: EpisodeRecord) -> dict[str, Any]:
    """One episode as ``episodes[]`` has it: its record and the directories of its profiles
    (the history screen's detail shows this very entry)."""
    entry = record.to_json()
    entry["profiles"] = [p.profile.dir for p in state.campaign_profiles if p.episode == record.episode]
    return entry


def _runtime(state: EpisodeState) -> tuple[RuntimeFacts, dict[str, str]]:
    """The current episode's runtime facts and why each unknown one is null: the very
    record ``episodes`` lists for it, so the top level and ``episodes[]`` agree."""
    record = state.current_episode
    if record is None:
        runtime, reasons = NO_RUNTIME, why_unknown(NO_RUNTIME, number=None, archived=False, attempt=None)
    else:
        runtime, reasons = record.runtime, record.unknown
    return runtime, {key: reasons[key] for key in RUNTIME_KEYS if key in reasons}


def running_jobs(state: EpisodeState) -> int:
    """The sandbox jobs of the current episode running or queued, counted as
    ``sandbox.running`` counts them: its job records by their outcome and the running
    telemetry operations no record names (``traced_operations``), i.e. the Jobs pane's rows.
    The header's and the Jobs pane's slot count, so neither contradicts ``status``."""
    return (sum(1 for job in state.jobs if job_outcome(job.state) == "running")
            + sum(1 for op in state.traced_operations if op.status == "running"))


def _abba(state: EpisodeState) -> list[dict[str, Any]]:
    """One entry per verification: the verdict's fields (null until result.json is in) and
    the one comparison statistic the console draws."""
    out = []
    for comparison in state.abba_comparisons:
        verdict = comparison.verdict
        out.append(
            {
                "directory": comparison.directory,
                "gate": verdict.gate if verdict else None,
                "candidate_latency_us": verdict.candidate_latency_us if verdict else None,
                "incumbent_latency_us": verdict.incumbent_latency_us if verdict else None,
                "improvement_pct": verdict.improvement_pct if verdict else None,
                "error": verdict.error if verdict else None,
                "runs": comparison.runs,
                "invalid_runs": comparison.invalid_runs,
                "artifact": verdict.artifact if verdict else None,
                "samples_us": {"incumbent": list(comparison.incumbent_us), "candidate": list(comparison.candidate_us)},
                "geomean_us": {"incumbent": comparison.incumbent_geomean_us, "candidate": comparison.candidate_geomean_us},
                "ratio": msgspec.to_builtins(comparison.ratio),
            }
        )
    return out


def _measures(state: EpisodeState) -> list[dict[str, Any]]:
    return [
        {
            "path": m.path,
            "samples_ms": {"baseline": list(m.baseline_ms), "instrumented": list(m.instrumented_ms)},
            "median_ms": {"baseline": m.baseline_median_ms, "instrumented": m.instrumented_median_ms},
            "ratio": msgspec.to_builtins(m.ratio),
            "reported": None if m.reported is None else {
                "overhead_percent": m.reported.overhead_percent,
                "interval_low_percent": m.reported.interval_low_percent,
                "interval_high_percent": m.reported.interval_high_percent,
                "verdict": m.reported.verdict,
            },
        }
        for m in state.measure_comparisons
    ]


def _timeline(state: EpisodeState) -> list[dict[str, Any]]:
    return [
        {
            "path": r.path,
            "evidence_class": r.evidence_class,
            "stage": r.stage,
            "workload_identity": r.workload_identity,
            "sites": msgspec.to_builtins(r.sites),
            "sites_from": r.sites_from,
            "sites_unknown": r.sites_unknown,
        }
        for r in state.timeline_receipts
    ]


def _attempts(state: EpisodeState) -> list[dict[str, Any]]:
    """The supervisor's record of each ended episode (state.json ``attempts``)."""
    listed = state.supervisor.attempts if state.supervisor is not None else None
    return [
        {
            "episode": a.episode,
            "version": a.version,
            "mode": a.mode,
            "status": a.status,
            "accepted": a.accepted,
            "violation": a.violation,
            "tokens": a.tokens,
            "resume_count": a.resume_count,
            "gate": a.verification.gate if a.verification else None,
            "improvement_pct": a.verification.improvement_pct if a.verification else None,
            "candidate_commit": a.candidate_commit,
            "promotion_commit": a.promotion_commit,
            "telemetry": None if a.telemetry is None
            else {"measurement": a.telemetry.measurement, "reason_codes": list(a.telemetry.reason_codes or ())},
        }
        for a in listed or ()
    ]


def _live_memory(state: EpisodeState) -> dict[str, Any] | None:
    live = state.live_memory
    if live is None:
        return None
    return {
        "version": live.version,
        "episode": live.episode,
        "phase": live.phase,
        "journal_state": live.journal_state,
        "experiment_count": live.experiment_count,
        "candidate_commit": live.candidate_commit,
        "canonical_memory_recorded": live.canonical_memory_recorded,
        "updated_at": live.updated_at,
    }


def _telemetry_summaries(state: EpisodeState) -> list[dict[str, Any]]:
    """Each archived episode's token use by phase, as its telemetry.summary.json says."""
    out = []
    for summary in state.telemetry_summaries:
        block = summary.phase_tokens
        phases = {}
        for name, entry in ((block.phases or {}) if block else {}).items():
            phases[name] = {
                "total_tokens": entry.usage.total_tokens if entry.usage else None,
                "interval_count": entry.interval_count,
                "measurement": entry.measurement,
                "reason": entry.reason,
            }
        out.append({
            "episode": summary.episode,
            "version": summary.version,
            "control_tokens": summary.control_tokens,
            "measurement": summary.measurement,
            "reason_codes": list(summary.reason_codes or ()),
            "phases": phases,
        })
    return out


def _supervisor(supervisor: SupervisorState | None) -> dict[str, Any] | None:
    if supervisor is None:
        return None
    return {
        "episodes": supervisor.episodes,
        "accepted": supervisor.accepted,
        "rejected": supervisor.rejected,
        "pivoted": supervisor.pivoted,
        "blocked": supervisor.blocked,
        "protocol_failures": supervisor.protocol_failures,
        "interrupted": supervisor.interrupted,
        "tokens": supervisor.tokens,
        "consecutive_without_promotion": supervisor.consecutive_without_promotion,
    }


def _jobs(state: EpisodeState, now: float) -> list[dict[str, Any]]:
    """Each sandbox job, newest first, with the last lines of its stdout and stderr; a
    running job's elapsed time is counted to ``now``."""
    out = []
    for job in state.jobs:
        tail = state.job_logs.get(job.job_id)
        out.append(
            {
                "job_id": job.job_id,
                "state": job.state,
                "category": job.category,
                "kind": job.kind,
                "slot": job.slot,
                "argv": None if job.argv is None else list(job.argv),
                "created_at": job.created_at,
                "started_at": job.started_at,
                "finished_at": job.finished_at,
                "duration_seconds": job.duration_seconds,
                "elapsed_seconds": job_elapsed(job, now),
                "exit_code": job.exit_code,
                "result_code": job.result_code,
                "error": failure_line(job, tail) if job_outcome(job.state) == "failed" else None,
                "log_tail": {
                    "stdout": list(tail.stdout) if tail else [],
                    "stderr": list(tail.stderr) if tail else [],
                },
            }
        )
    return out


def _traced_operations(state: EpisodeState, now: float) -> list[dict[str, Any]]:
    """The newest of the current episode's telemetry sandbox operations no job record names,
    newest first (what the Jobs pane lists as traced rows); a running one's time is counted
    to ``now``."""
    return [
        {
            "operation_id": op.operation_id,
            "category": op.category,
            "state": op.status,
            "started_at": op.started_at,
            "duration_seconds": op.duration_seconds,
            "elapsed_seconds": operation_elapsed(op, now),
            "exit_status": op.exit_status,
            "failure_type": op.failure_type,
        }
        for op in state.traced_operations
    ]


def _gpu(reading: GpuReading | None) -> dict[str, Any] | None:
    """The GPUs as NVML read them, or ``gpus: null`` with the reason none could be read;
    ``null`` when no reading was taken (a replay of a recording without GPU readings)."""
    if reading is None:
        return None
    return {
        "sampled_at": reading.sampled_at,
        "gpus": [msgspec.to_builtins(gpu) for gpu in reading.gpus] if reading.unavailable is None else None,
        "unavailable": reading.unavailable,
    }


def _unreadable(problem: Unreadable) -> dict[str, Any]:
    return {"path": problem.path, "offset": problem.offset, "error": problem.error}


def status_document(state: EpisodeState, gpu: GpuReading | None = None, preflight: Preflight | None = None, now: float | None = None) -> dict[str, Any]:
    """The status document; ``gpu`` is a reading taken for it (the headless status samples
    once), else the state's latest reading; ``preflight`` likewise (the host's checks made
    with that reading); ``now`` (unix seconds, default the clock) is what running jobs'
    elapsed time is counted to."""
    active = state.active_phase
    reading = state.gpu if gpu is None else gpu
    checks = state.preflight if preflight is None else preflight
    clock = time.time() if now is None else now  # one moment for every running time
    runtime, unknown = _runtime(state)
    if state.dominant_kernel_unknown is not None:
        unknown["dominant_kernel"] = state.dominant_kernel_unknown
    return {
        "schema_version": SCHEMA_VERSION,
        "campaign": {"name": state.campaign, "root": state.campaign_root},
        "episode": episode_facts(state),
        "active_phase": None
        if active is None
        else {"phase": active.phase, "iteration_id": active.iteration_id, "attempt_id": active.attempt_id, "started_at": active.start_at},
        "phases": _phases(state, runtime, unknown),
        "phase_timing": None if runtime.phase_timing is None else runtime.phase_timing.to_json(),
        "orchestration_seconds": state.orchestration_seconds,
        "telemetry_events": runtime.telemetry_events,
        "source_reads": runtime.source_reads,
        "sandbox": None if runtime.sandbox is None else runtime.sandbox.to_json(),
        "evaluations": {"count": runtime.evaluations, "kernels": runtime.evaluation_kernels,
                        "last": _last_evaluation(state, unknown)},
        "incumbent": _incumbent(state),
        "versions": _versions(state),
        "supervisor": _supervisor(state.supervisor),
        "attempts": _attempts(state),
        "episodes": _episodes(state),
        "live_memory": _live_memory(state),
        "telemetry_summaries": _telemetry_summaries(state),
        "journal": None
        if state.journal is None
        else {"state": state.journal.state, "experiments": len(state.journal.experiments or ())},
        "profiles": _profiles(state),
        "dominant_kernel": state.dominant_kernel,
        "abba": _abba(state),
        "measures": _measures(state),
        "timeline": _timeline(state),
        "jobs": _jobs(state, clock),
        "traced_operations": _traced_operations(state, clock),
        "gpu": _gpu(reading),
        "preflight": None if checks is None else msgspec.to_builtins(checks),
        "git": None if state.git is None else msgspec.to_builtins(state.git),
        "alerts": [msgspec.to_builtins(a) for a in state.alerts],
        "unreadable": [_unreadable(u) for u in state.unreadable],
        "unknown": unknown,
    }
