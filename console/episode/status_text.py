"""The human form of the status document (``episcope status`` without --json)."""

from __future__ import annotations


def _fmt(value, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def _short(path: str | None, *roots: str | None) -> str:
    """A path relative to the worktree or campaign when it lies inside one."""
    if not path:
        return "unknown"
    for root in roots:
        if root and (path == root or path.startswith(root.rstrip("/") + "/")):
            return path[len(root.rstrip("/")) + 1 :] or "."
    return path


def render_status(doc: dict) -> str:
    lines = []
    roots = (doc["episode"].get("worktree"), doc["campaign"].get("root"))
    campaign = doc["campaign"]
    episode = doc["episode"]
    lines.append(f"campaign  {campaign['name']}  ({campaign['root']})")
    lines.append(
        f"episode   {_fmt(episode['number'])}  mode {_fmt(episode['mode'])}  phase {_fmt(episode['phase'])}"
        f"  status {_fmt(episode.get('status'))}"
        f"  branch {_fmt(episode['branch'])}"
    )
    if episode.get("worktree"):
        lines.append(f"worktree  {episode['worktree']}")
    active = doc.get("active_phase")
    if active:
        lines.append(f"active    {active['phase']} ({active['iteration_id']}/{active['attempt_id']})")
    lines.append("phases")
    for phase, entry in doc["phases"].items():
        mark = "" if entry["measurement"] == "explicit" else "  (partial)"
        lines.append(f"  {phase:<15} {_fmt(entry['wall_seconds'], ' s'):>12}  x{entry['intervals']}{mark}")
    lines.append(f"  {'orchestration':<15} {_fmt(doc['orchestration_seconds'], ' s'):>12}")
    sandbox = doc["sandbox"]
    lines.append(
        f"sandbox   running {sandbox['running']}  succeeded {sandbox['succeeded']}  failed {sandbox['failed']}"
        f"  source reads {doc['source_reads']}"
    )
    evals = doc["evaluations"]
    last = evals["last"]
    if last:
        lines.append(
            f"evals     {evals['count']}  last: all_pass {_fmt(last['all_pass'])}  "
            f"{_fmt(last['latency_us_geomean'], ' us', 2)}  kernel {(last['kernel_sha256'] or 'unknown')[:12]}"
        )
    else:
        lines.append("evals     none")
    incumbent = doc["incumbent"]
    if incumbent:
        lines.append(
            f"incumbent v{incumbent['version']}  {_fmt(incumbent['latency_us_geomean'], ' us', 2)}"
            f"  score {_fmt(incumbent['performance_score'], '', 3)}"
        )
    for version in doc["versions"]:
        lines.append(
            f"  v{version['version']:<4} {_fmt(version['latency_us_geomean'], ' us', 2):>12}  "
            f"{_fmt(version['status'])}  correctness {_fmt(version['correctness'])}"
        )
    for profile in doc["profiles"]:
        lines.append(
            f"profile   {_short(profile['dir'], *roots)}  level {_fmt(profile['level'])}  bottleneck {_fmt(profile['bottleneck'])}"
            f"  symptoms {', '.join(profile['symptoms']) or 'none'}"
        )
    for verdict in doc["abba"]:
        lines.append(
            f"abba      {_fmt(verdict['gate'])}  incumbent {_fmt(verdict['incumbent_latency_us'], ' us', 2)}"
            f"  candidate {_fmt(verdict['candidate_latency_us'], ' us', 2)}  improvement {_fmt(verdict['improvement_pct'], ' %', 2)}"
        )
    for alert in doc["alerts"]:
        where = f"  ({_short(alert['path'], *roots)})" if alert.get("path") else ""
        lines.append(f"ALERT     [{alert['severity']}] {alert['code']}: {alert['message']}{where}")
    for problem in doc["unreadable"]:
        where = problem["path"] if problem["offset"] is None else f"{problem['path']}@{problem['offset']}"
        lines.append(f"UNREADABLE {where}: {problem['error']}")
    return "\n".join(lines) + "\n"
