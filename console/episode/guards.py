"""The loop's hard boundaries, checked mechanically on every state (DESIGN.md "Guards").

``evaluate_guards`` is pure: it reads an ``EpisodeState`` and returns alerts. A field a
document leaves unknown (``None``) means "cannot tell" and raises no alert.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from console.formats.job_record import MAX_SANDBOX_JOBS

from .numbers import bounded
from .phase_timing import INVALID_MARKER
from .state import Alert, EpisodeState

if TYPE_CHECKING:
    from console.formats.timeline import TimelineMeasurement, TimelineReceipt

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


def read_by_git_rules(path: str) -> bool:
    """Whether a change to ``path`` (relative to the episode worktree) can change what a git
    rule below says: ``kernel.py`` or a protected path. The loop's own ``.atrex_*`` files are
    left out: the loop writes them all the time (telemetry, job records and logs), and they
    are kept out of git, where an untracked one raises no alert."""
    if path.startswith("./"):
        path = path[2:]
    return path == "kernel.py" or (is_protected(path) and not path.startswith(".atrex_"))


# The worktree's files and directories those rules read: stamped on every quiet tick of a
# live session, to catch an edit the file watcher did not report (a file added to a directory
# changes its mtime). Deeper paths are left to the watcher.
GIT_RULE_FILES = ("kernel.py", *sorted(PROTECTED_FILES))
GIT_RULE_DIRS = tuple(d.rstrip("/") for d in PROTECTED_DIRS)


def evaluate_guards(state: EpisodeState) -> tuple[Alert, ...]:
    alerts: list[Alert] = []
    _git_guards(state, alerts)
    _profile_guards(state, alerts)
    _timeline_guards(state, alerts)
    _sandbox_guards(state, alerts)
    _abba_guards(state, alerts)
    _phase_guards(state, alerts)
    return tuple(alerts)


def _git_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    facts = state.git
    if facts is None:
        return
    where = facts.worktree
    if facts.error is not None:
        # The rules below cannot be checked on facts git did not give (an unsafe repository
        # is refused before git runs): said here, where the operator and a script look.
        alerts.append(Alert("git_unreadable", "warning", f"git facts unreadable: {facts.error}", where))
    protected = [p for p in facts.dirty_paths if is_protected(p)]
    protected += [p for p in facts.untracked_paths if is_protected(p) and not p.startswith(".atrex_")]
    for path in protected:
        alerts.append(Alert("protected_path_modified", "error", f"protected path modified: {path}", path))
    changes = facts.candidate_changes
    candidate = facts.candidate_commit
    if candidate and changes is not None and list(changes) != ["kernel.py"]:
        listed = ", ".join(changes) or "nothing"
        alerts.append(
            Alert("candidate_scope", "error", f"candidate {candidate[:12]} changes {listed}; only kernel.py may change", where)
        )
    if candidate and facts.candidate_has_probe:
        alerts.append(
            Alert("instrumented_candidate", "error", f"candidate {candidate[:12]} contains timeline probe markers", where)
        )
    if candidate and facts.candidate_descends_from_base is False:
        alerts.append(Alert("candidate_not_descendant", "error", f"candidate {candidate[:12]} does not descend from base", where))
    handoff_status = state.handoff.status if state.handoff is not None else None
    if facts.kernel_has_probe:
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
    current = state.git.kernel_sha256 if state.git is not None else None
    if not current:
        return
    stale: dict[str, list[str]] = {}  # kernel.py hash a profile was taken on -> its directories
    for profile in state.profiles:
        taken_on = profile.kernel_sha256
        if taken_on and taken_on != current:
            stale.setdefault(taken_on, []).append(profile.dir)
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


def _overheads(state: EpisodeState) -> list[tuple[float, float | None, str | None]]:
    """(overhead %, target % if the document states one, where) of each receipt and measurement."""
    out: list[tuple[float, float | None, str | None]] = []
    receipt: TimelineReceipt
    for receipt in state.timeline_receipts:
        if receipt.overhead_percent is not None:
            out.append((receipt.overhead_percent, receipt.low_overhead_target_percent, receipt.path))
    measurement: TimelineMeasurement
    for measurement in state.timeline_measurements:
        if measurement.overhead_percent is not None:
            out.append((measurement.overhead_percent, None, None))
    return out


def _timeline_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    for overhead, target, path in _overheads(state):
        target = DEFAULT_OVERHEAD_TARGET if target is None else target
        if overhead > target:
            alerts.append(
                Alert("timeline_overhead", "warning", f"timeline overhead {overhead:.2f}% above target {target:g}%", path)
            )
    for path, runs in state.measure_runs.items():
        workloads = {r.workload_identity for r in runs} - {None}
        devices = {r.device_uuid for r in runs} - {None}
        if len(workloads) > 1:
            alerts.append(Alert("workload_drift", "error", f"{len(workloads)} workload identities inside one measurement", path))
        if len(devices) > 1:
            alerts.append(Alert("device_drift", "error", f"{len(devices)} devices inside one measurement", path))


def _sandbox_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    running_jobs = [j for j in state.jobs if j.state == "running"]
    worst = max(len(running_jobs), len(state.running_operations))
    if worst > MAX_SANDBOX_JOBS:
        alerts.append(
            Alert("sandbox_concurrency", "error", f"{worst} sandbox jobs running at once (limit {MAX_SANDBOX_JOBS})", None)
        )


def _abba_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    """A PASS is scored from its own runs (FORMATS §7: each side is the geometric mean of its
    valid runs, and PASS needs an improvement above a minimum of at least 0): a PASS whose
    runs give the candidate no faster than the incumbent would promote a kernel that is not.
    A verification with no valid run on a side cannot tell."""
    for comparison in state.abba_comparisons:
        verdict = comparison.verdict
        incumbent, candidate = comparison.incumbent_geomean_us, comparison.candidate_geomean_us
        if verdict is None or not verdict.passed or incumbent is None or candidate is None:
            continue
        if candidate >= incumbent:
            alerts.append(Alert(
                "abba_verdict_contradicts_runs", "error",
                f"ABBA says PASS, but its valid runs give the candidate {bounded(candidate, '.2f')} us against "
                f"the incumbent's {bounded(incumbent, '.2f')} us (geometric means)", comparison.directory))


def _phase_guards(state: EpisodeState, alerts: list[Alert]) -> None:
    for reason, count in sorted(state.partial_reasons.items()):
        if reason == INVALID_MARKER:  # such a marker makes no span: it is ignored
            message = f"{count} phase marker(s) of no known phase ignored: {reason}"
        else:
            message = f"{count} phase span(s) partial: {reason}"
        alerts.append(Alert("phase_markers_invalid", "warning", message, None))
