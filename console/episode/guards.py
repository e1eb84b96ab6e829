"""The loop's hard boundaries, checked mechanically on every state (DESIGN.md "Guards").

``evaluate_guards`` is pure: it reads an ``EpisodeState`` and returns alerts. It reads the
documents of other modules by attribute with defaults, so a missing field means "cannot
tell" and never raises.
"""

from __future__ import annotations

import os

from console.formats.job_record import MAX_SANDBOX_JOBS

from .state import Alert, EpisodeState

DEFAULT_OVERHEAD_TARGET = 10.0

PROTECTED_FILES = frozenset(
    {
        "profile_driver.py",
        "test_kernel.py",
        "reference.py",
        "input.py",
        "definition.json",
        "workload.jsonl",
        "agent_problem.json",
        "shapes.json",
    }
)
PROTECTED_DIRS = ("memory/", "eval/", ".claude/", ".qoder/", ".agents/")


def is_protected(path: str) -> bool:
    if path.startswith("./"):
        path = path[2:]
    if path in PROTECTED_FILES:
        return True
    if path.startswith(PROTECTED_DIRS):
        return True
    return path.startswith(".atrex_")


def _get(obj, name, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def evaluate_guards(state: EpisodeState) -> tuple[Alert, ...]:
    alerts: list[Alert] = []
    _git_guards(state, alerts)
    _profile_guards(state, alerts)
    _timeline_guards(state, alerts)
    _sandbox_guards(state, alerts)
    _phase_guards(state, alerts)
    return tuple(alerts)


def _git_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    facts = state.git
    if facts is None:
        return
    where = _get(facts, "worktree")
    protected = [p for p in _get(facts, "dirty_paths", ()) if is_protected(p)]
    protected += [p for p in _get(facts, "untracked_paths", ()) if is_protected(p) and not p.startswith(".atrex_")]
    for path in protected:
        alerts.append(Alert("protected_path_modified", "error", f"protected path modified: {path}", path))
    changes = _get(facts, "candidate_changes")
    candidate = _get(facts, "candidate_commit")
    if candidate and changes is not None and list(changes) != ["kernel.py"]:
        listed = ", ".join(changes) or "nothing"
        alerts.append(
            Alert("candidate_scope", "error", f"candidate {candidate[:12]} changes {listed}; only kernel.py may change", where)
        )
    if candidate and _get(facts, "candidate_has_probe"):
        alerts.append(
            Alert("instrumented_candidate", "error", f"candidate {candidate[:12]} contains timeline probe markers", where)
        )
    if candidate and _get(facts, "candidate_descends_from_base") is False:
        alerts.append(Alert("candidate_not_descendant", "error", f"candidate {candidate[:12]} does not descend from base", where))
    handoff_status = _get(state.handoff, "status")
    if _get(facts, "kernel_has_probe"):
        severity = "error" if handoff_status == "candidate_ready" else "warning"
        alerts.append(
            Alert(
                "instrumented_kernel",
                severity,
                "kernel.py carries timeline probe markers; restore the probe-free kernel before hand-off",
                where,
            )
        )


def _profile_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    current = _get(state.git, "kernel_sha256")
    if not current:
        return
    stale: dict[str, list[str]] = {}  # kernel.py hash a profile was taken on -> its directories
    for profile in state.profiles:
        taken_on = _get(profile, "kernel_sha256")
        if taken_on and taken_on != current:
            stale.setdefault(taken_on, []).append(str(_get(profile, "dir")))
    # One alert per earlier kernel.py, not one per directory: a funnel of a dozen profiles
    # of the previous kernel is one fact for the operator.
    for taken_on, directories in sorted(stale.items()):
        count = len(directories)
        noun = "profile was" if count == 1 else f"{count} profiles were"
        alerts.append(
            Alert(
                "stale_profile",
                "warning",
                f"{noun} taken on kernel.py {taken_on[:12]}; kernel.py is now {current[:12]}",
                directories[0] if count == 1 else os.path.commonpath(directories),
            )
        )


def _overhead_of(document) -> tuple[float | None, float | None]:
    measurement = _get(document, "measurement") or _get(document, "measurement_summary") or document
    overhead = _get(measurement, "overhead_percent")
    target = _get(document, "low_overhead_target_percent") or _get(measurement, "low_overhead_target_percent")
    if isinstance(overhead, dict):
        overhead = overhead.get("point") or overhead.get("value")
    if not isinstance(overhead, (int, float)) or isinstance(overhead, bool):
        overhead = None
    if not isinstance(target, (int, float)) or isinstance(target, bool):
        target = None
    return overhead, target


def _timeline_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    for document in (*state.timeline_receipts, *state.timeline_measurements):
        overhead, target = _overhead_of(document)
        target = DEFAULT_OVERHEAD_TARGET if target is None else target
        if overhead is not None and overhead > target:
            path = _get(document, "path")
            alerts.append(
                Alert("timeline_overhead", "warning", f"timeline overhead {overhead:.2f}% above target {target:g}%", path)
            )
    for path, runs in state.measure_runs.items():
        workloads = {_get(r, "workload_identity") for r in runs} - {None}
        devices = {_get(_get(r, "device_identity"), "uuid") for r in runs} - {None}
        if len(workloads) > 1:
            alerts.append(Alert("workload_drift", "error", f"{len(workloads)} workload identities inside one measurement", path))
        if len(devices) > 1:
            alerts.append(Alert("device_drift", "error", f"{len(devices)} devices inside one measurement", path))


def _sandbox_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    running_jobs = [j for j in state.jobs if _get(j, "state") == "running"]
    worst = max(len(running_jobs), len(state.running_operations))
    if worst > MAX_SANDBOX_JOBS:
        alerts.append(
            Alert("sandbox_concurrency", "error", f"{worst} sandbox jobs running at once (limit {MAX_SANDBOX_JOBS})", None)
        )


def _phase_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    for reason, count in sorted(state.partial_reasons.items()):
        alerts.append(Alert("phase_markers_invalid", "warning", f"{count} phase span(s) partial: {reason}", None))
