"""The human form of the status document (``episcope status`` without --json).

It prints what the JSON says: a null is "unknown", never 0 (with the JSON's reason where
the reader needs it to act), an open phase ``unavailable`` and a broken one ``partial`` as
AKA's reader has them, with its reason codes, each version's quality gate, and the
campaign's episodes, oldest first. Phase names, paths, alert
messages and the rest come from agent-written files: every line goes through ``visible`` so
no control sequence reaches the terminal, and is cut at ``MAX_LINE`` characters so a
megabyte-long name cannot flood it (``--json`` keeps every string whole).
"""

from __future__ import annotations

import math
from typing import Any

from .numbers import bounded
from .text import visible

MAX_LINE = 400


def _fmt(value: object, unit: str = "", digits: int = 1) -> str:
    # NaN and infinities are null in the JSON (jsonio), so unknown here too
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "unknown"
    if isinstance(value, float):
        return f"{bounded(value, f'.{digits}f')}{unit}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{bounded(value)}{unit}"
    return f"{value}{unit}"


def _short(path: str | None, *roots: str | None) -> str:
    """A path relative to the worktree or campaign when it lies inside one."""
    if not path:
        return "unknown"
    for root in roots:
        if root and (path == root or path.startswith(root.rstrip("/") + "/")):
            return path[len(root.rstrip("/")) + 1 :] or "."
    return path


def render_status(doc: dict[str, Any]) -> str:
    lines = []
    roots = (doc["episode"]["worktree"], doc["campaign"]["root"])
    campaign = doc["campaign"]
    episode = doc["episode"]
    lines.append(f"campaign  {campaign['name']}  ({campaign['root']})")
    lines.append(
        f"episode   {_fmt(episode['number'])}  mode {_fmt(episode['mode'])}  phase {_fmt(episode['phase'])}"
        f"  status {_fmt(episode['status'])}"
        f"  branch {_fmt(episode['branch'])}"
    )
    if episode["worktree"]:
        lines.append(f"worktree  {episode['worktree']}")
    git = doc["git"]
    if git is not None and git["error"] is not None:  # why branch, HEAD and the worktrees may be missing
        lines.append(f"git       unreadable: {git['error']}")
    active = doc["active_phase"]
    if active:
        lines.append(f"active    {active['phase']} ({active['iteration_id']}/{active['attempt_id']})")
    lines.append(_phase_timing(doc["phase_timing"], doc["unknown"]))
    if doc["phases"] is None:
        lines.append(f"  {_unknown('phases', doc['unknown'])}")
    for phase, entry in (doc["phases"] or {}).items():
        # AKA's measurement word: explicit goes without saying; partial, or unavailable (open)
        mark = "" if entry["measurement"] == "explicit" else f"  {entry['measurement']}"
        lines.append(f"  {phase:<15} {_fmt(entry['wall_seconds'], ' s'):>12}  x{entry['intervals']}{mark}")
    lines.append(f"  {'orchestration':<15} {_fmt(doc['orchestration_seconds'], ' s'):>12}")
    sandbox = doc["sandbox"]
    if sandbox is None:
        lines.append(f"sandbox   unknown  source reads {_fmt(doc['source_reads'])}")
    else:
        lines.append(
            f"sandbox   running {sandbox['running']}  succeeded {sandbox['succeeded']}  failed {sandbox['failed']}"
            f"  cancelled {sandbox['cancelled']}  seconds {_fmt(sandbox['seconds'], '', 1)}"
            f"  source reads {_fmt(doc['source_reads'])}"
        )
    evals = doc["evaluations"]
    last = evals["last"]
    if last:
        lines.append(
            f"evals     {_fmt(evals['count'])}  last: all_pass {_fmt(last['all_pass'])}  "
            f"{_fmt(last['latency_us_geomean'], ' us', 2)}  kernel {(last['kernel_sha256'] or 'unknown')[:12]}"
        )
    else:
        lines.append(f"evals     {'unknown' if evals['count'] is None else 'none'}")
    incumbent = doc["incumbent"]
    if incumbent:
        lines.append(
            f"incumbent v{incumbent['version']}  {_fmt(incumbent['latency_us_geomean'], ' us', 2)}"
            f"  score {_fmt(incumbent['performance_score'], '', 3)}"
        )
    for version in doc["versions"]:
        gate = version["quality_gate"]
        lines.append(
            f"  v{version['version']:<4} {_fmt(version['latency_us_geomean'], ' us', 2):>12}  "
            f"{_fmt(version['status'])}  correctness {_fmt(version['correctness'])}"
            f"  gate {_fmt(gate and gate['result'])}"
        )
        if gate and gate["failure_reason"]:
            lines.append(f"          {gate['failure_reason']}")
    lines.extend(_episodes(doc["episodes"]))
    for profile in doc["profiles"]:
        if not profile["current"]:  # the current episode's, as the console's funnel shows
            continue
        symptoms = "unknown" if profile["symptoms"] is None else ", ".join(profile["symptoms"]) or "none"
        lines.append(
            f"profile   {_short(profile['dir'], *roots)}  level {_fmt(profile['level'])}  bottleneck {_fmt(profile['bottleneck'])}"
            f"  symptoms {symptoms}"
        )
    for verification in doc["abba"]:
        lines.append(
            f"abba      {_fmt(verification['gate'])}  incumbent {_fmt(verification['incumbent_latency_us'], ' us', 2)}"
            f"  candidate {_fmt(verification['candidate_latency_us'], ' us', 2)}"
            f"  improvement {_fmt(verification['improvement_pct'], ' %', 2)}"
        )
        lines.append(f"          {verification['ratio']['label']}")
    for measure in doc["measures"]:
        lines.append(f"measure   {_short(measure['path'], *roots)}  {measure['ratio']['label']}")
    for job in doc["jobs"]:
        if job["state"] in ("queued", "running"):
            lines.append(f"job       {job['job_id']}  {job['state']}  {_fmt(job['category'] or job['kind'])}")
        elif job["error"] is not None:
            lines.append(f"job       {job['job_id']}  {job['state']}  {_fmt(job['category'] or job['kind'])}: {job['error']}")
    gpu = doc["gpu"]
    if gpu is not None:
        if gpu["gpus"] is None:
            lines.append(f"gpu       N/A ({gpu['unavailable']})")
        for card in gpu["gpus"] or ():
            lines.append(
                f"gpu {card['index']:<5} {_fmt(card['name'])}  util {_fmt(card['utilization_pct'], ' %', 0)}"
                f"  memory {_fmt(card['memory_used_mib'], '', 0)}/{_fmt(card['memory_total_mib'], ' MiB', 0)}"
                f"  power {_fmt(card['power_w'], ' W', 0)}  temp {_fmt(card['temperature_c'], ' C', 0)}"
            )
    preflight = doc["preflight"]
    if preflight is not None:
        missing = [preflight[check] for check in ("gpu", "ncu", "cupy") if preflight[check]]
        lines.append(f"actions   GPU actions dimmed: {'; '.join(missing)}" if missing else "actions   GPU actions can run here")
    for alert in doc["alerts"]:
        where = f"  ({_short(alert['path'], *roots)})" if alert["path"] else ""
        lines.append(f"ALERT     [{alert['severity']}] {alert['code']}: {alert['message']}{where}")
    for problem in doc["unreadable"]:
        where = problem["path"] if problem["offset"] is None else f"{problem['path']}@{problem['offset']}"
        lines.append(f"UNREADABLE {where}: {problem['error']}")
    return "".join(_bounded(visible(line)) + "\n" for line in lines)


def _unknown(key: str, unknown: dict[str, str]) -> str:
    """The word unknown, with the reason the JSON gives for the null."""
    reason = unknown.get(key)
    return f"unknown ({reason})" if reason else "unknown"


def _phase_timing(timing: dict[str, Any] | None, unknown: dict[str, str]) -> str:
    """The heading of the phases: AKA's measurement of the episode and its reason codes."""
    if timing is None:
        return f"phases    measurement {_unknown('phase_timing', unknown)}"
    codes = timing["reason_codes"]
    return f"phases    measurement {timing['measurement']}" + (f"  reasons {', '.join(codes)}" if codes else "")


def _episodes(episodes: list[dict[str, Any]]) -> list[str]:
    """The campaign's history, oldest first: one line per episode (its outcome, the
    supervisor's verdict, its memory version), and a second line for its phase measurement
    when that is not explicit."""
    if not episodes:
        return []
    lines = ["episodes"]
    for record in episodes:
        number = f"e{record['episode']:04d}" if isinstance(record["episode"], int) else "e?"
        version = f"v{record['version']}" if record["version"] is not None else "unknown"
        # A running episode has no terminal status yet: its supervisor phase says where it is.
        outcome = record["status"] or (f"phase {record['phase']}" if record["phase"] else "unknown")
        accepted = {True: "accepted", False: "rejected", None: "accepted unknown"}[record["accepted"]]
        improvement = record["improvement_pct"]
        change = f"  improvement {_fmt(improvement, ' %', 2)}" if improvement is not None else ""
        lines.append(f"  {number} {record['source']:<8} {version:<4} {outcome}  {accepted}"
                     f"  gate {_fmt(record['gate'])}{change}")
        timing = record["phase_timing"]
        if timing is None:
            lines.append(f"        measurement {_unknown('phase_timing', record['unknown'])}")
        elif timing["measurement"] != "explicit":
            codes = ", ".join(timing["reason_codes"])
            lines.append(f"        measurement {timing['measurement']}" + (f"  reasons {codes}" if codes else ""))
    return lines


def _bounded(line: str) -> str:
    if len(line) <= MAX_LINE:
        return line
    return f"{line[:MAX_LINE]}… ({len(line) - MAX_LINE} more characters)"
