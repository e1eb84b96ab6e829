"""The one status document (``episcope status --json``) and the JSON form of events.

Agent scripts parse this, so keys are stable and documented (README); ``schema_version``
changes when a key changes meaning. Unknown values are ``null``, never 0.
"""

from __future__ import annotations

from typing import Any

from .events import Event
from .state import EpisodeState

SCHEMA_VERSION = "episcope-status/v1"


def _get(obj, name, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


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


def event_to_json(event: Event) -> dict:
    return {"kind": event.kind, "path": event.path, "offset": event.offset, "at": event.at, "data": to_jsonable(event.data)}


def _latest_attempt(state: EpisodeState):
    attempts = [*(_get(state.supervisor, "attempts") or ()), *state.attempts]
    numbered = [a for a in attempts if _get(a, "episode") is not None]
    return max(numbered, key=lambda a: _get(a, "episode")) if numbered else None


def episode_facts(state: EpisodeState) -> dict:
    """Which episode this is and where it stands (shared by the status document and the header)."""
    active = state.active_episode
    journal = state.journal
    # Once an episode is archived its active_episode.json is gone; its attempt record
    # still says what it was.
    attempt = None if active is not None else _latest_attempt(state)
    return {
        "number": _get(active, "episode", _get(journal, "episode", _get(attempt, "episode"))),
        "mode": _get(active, "mode", _get(attempt, "mode")),
        "phase": _get(active, "phase"),
        "status": _get(active, "terminal_status", _get(attempt, "status")),
        "branch": _get(active, "episode_branch", _get(journal, "episode_branch", _get(state.git, "branch"))),
        "worktree": _get(active, "worktree", state.worktree),
        "memory_version": _get(active, "memory_version", _get(journal, "memory_version")),
        "journal_state": _get(journal, "state"),
        "handoff": _get(state.handoff, "status"),
        "candidate_commit": _get(state.handoff, "candidate_commit", _get(journal, "candidate_commit")),
        "head": _get(state.git, "head"),
    }


def _phases(state: EpisodeState) -> dict:
    phases = {
        phase: {"wall_seconds": total.wall_seconds, "intervals": total.intervals, "measurement": total.measurement}
        for phase, total in state.phase_totals.items()
    }
    for span in state.open_spans:
        entry = phases.setdefault(span.phase, {"wall_seconds": None, "intervals": 0, "measurement": "partial"})
        entry["active"] = True
    return phases


def _last_evaluation(state: EpisodeState) -> dict | None:
    if not state.evaluations:
        return None
    record = state.evaluations[-1]
    result = _get(record, "result")
    return {
        "kernel_sha256": _get(record, "kernel_sha256"),
        "all_pass": _get(result, "all_pass"),
        "latency_us_geomean": _get(result, "latency_us_geomean"),
        "timestamp": _get(record, "timestamp"),
        "schema_version": _get(record, "schema_version"),
    }


def _incumbent(state: EpisodeState) -> dict | None:
    if not state.incumbent_curve:
        return None
    entry = state.incumbent_curve[-1]
    version = entry[0]
    record = next((v for v in state.versions if _get(v, "version") == version), None)
    return {
        "version": version,
        "latency_us_geomean": _get(record, "latency_us_geomean"),
        "performance_score": _get(record, "performance_score"),
    }


def _attempts_by_version(state: EpisodeState) -> dict:
    attempts = [*(_get(state.supervisor, "attempts") or ()), *state.attempts]
    return {_get(a, "version"): a for a in attempts if _get(a, "version") is not None}


def _versions(state: EpisodeState) -> list[dict]:
    by_version = _attempts_by_version(state)
    out = []
    for v in state.versions:
        attempt = by_version.get(_get(v, "version"))
        out.append(
            {
                "version": _get(v, "version"),
                "latency_us_geomean": _get(v, "latency_us_geomean"),
                "performance_score": _get(v, "performance_score"),
                "accepted": _get(attempt, "accepted"),
                "status": _get(attempt, "status") or _get(v, "long_horizon_status"),
                "correctness": _get(v, "correctness_status"),
                "measurement_subject": _get(v, "measurement_subject"),
                "git_commit_hash": _get(v, "git_commit_hash"),
            }
        )
    return out


def _profiles(state: EpisodeState) -> list[dict]:
    out = []
    for profile in state.profiles:
        kernels = _get(profile, "kernels", ()) or ()
        out.append(
            {
                "dir": _get(profile, "dir"),
                "level": _get(profile, "level"),
                "kernels": [_get(k, "name") for k in kernels],
                "bottleneck": _get(profile, "bottleneck"),
                "symptoms": list(_get(profile, "symptoms", ()) or ()),
                "localize": list(_get(profile, "localize", ()) or ()),
                "kernel_sha256": _get(profile, "kernel_sha256"),
            }
        )
    return out


def _sandbox(state: EpisodeState) -> dict:
    counts = {"running": 0, "succeeded": 0, "failed": 0}
    for op in state.sandbox_operations:
        counts[op.status] = counts.get(op.status, 0) + 1
    jobs: dict[str, int] = {}
    for job in state.jobs:
        job_state = _get(job, "state") or "unknown"
        jobs[job_state] = jobs.get(job_state, 0) + 1
    seconds = [op.duration_seconds for op in state.sandbox_operations if op.duration_seconds is not None]
    counts["seconds"] = sum(seconds) if seconds else None
    counts["jobs"] = jobs
    return counts


def _abba(state: EpisodeState) -> list[dict]:
    return [
        {
            "gate": _get(v, "gate"),
            "candidate_latency_us": _get(v, "candidate_latency_us"),
            "incumbent_latency_us": _get(v, "incumbent_latency_us"),
            "improvement_pct": _get(v, "improvement_pct"),
            "runs": len(_get(v, "runs", ()) or ()),
            "artifact": _get(v, "artifact"),
        }
        for v in state.abba
    ]


def _timeline(state: EpisodeState) -> list[dict]:
    return [
        {
            "path": _get(r, "path"),
            "evidence_class": _get(r, "evidence_class"),
            "stage": _get(r, "stage"),
            "workload_identity": _get(r, "workload_identity"),
        }
        for r in state.timeline_receipts
    ]


def status_document(state: EpisodeState) -> dict:
    supervisor = state.supervisor
    active = state.active_phase
    return {
        "schema_version": SCHEMA_VERSION,
        "campaign": {"name": state.campaign, "root": state.campaign_root},
        "episode": episode_facts(state),
        "active_phase": None
        if active is None
        else {"phase": active.phase, "iteration_id": active.iteration_id, "attempt_id": active.attempt_id, "started_at": active.start_at},
        "phases": _phases(state),
        "orchestration_seconds": state.orchestration_seconds,
        "telemetry_events": state.telemetry_events,
        "source_reads": len(state.source_reads),
        "sandbox": _sandbox(state),
        "evaluations": {"count": len(state.evaluations), "kernels": len(state.evaluations_by_sha), "last": _last_evaluation(state)},
        "incumbent": _incumbent(state),
        "versions": _versions(state),
        "supervisor": None
        if supervisor is None
        else {k: _get(supervisor, k) for k in ("episodes", "accepted", "rejected", "pivoted", "blocked", "protocol_failures", "interrupted", "tokens", "consecutive_without_promotion")},
        "journal": None
        if state.journal is None
        else {"state": _get(state.journal, "state"), "experiments": len(_get(state.journal, "experiments", ()) or ())},
        "profiles": _profiles(state),
        "abba": _abba(state),
        "timeline": _timeline(state),
        "git": to_jsonable(state.git),
        "alerts": [a.to_json() for a in state.alerts],
        "unreadable": [to_jsonable(u) for u in state.unreadable],
    }
