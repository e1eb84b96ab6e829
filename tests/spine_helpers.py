"""Small builders for spine tests: telemetry lines and real git campaigns with worktrees."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.formats.telemetry import TelemetryRecord, parse_telemetry_line

T0 = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


def telemetry_record(obj: dict) -> TelemetryRecord:
    """``obj`` as it decodes from a line of telemetry.jsonl."""
    return parse_telemetry_line(json.dumps(obj).encode())


def tele(event: str, mono: float, *, iteration="episode-0001", attempt="invocation-1", **extra) -> dict:
    record = {
        "schema_version": "atrex_iteration_event_v1",
        "campaign_id": "demo",
        "iteration_id": iteration,
        "attempt_id": attempt,
        "event": event,
        "timestamp": (T0 + timedelta(seconds=mono)).isoformat(),
        "monotonic_seconds": mono,
        "source": "sandbox" if event.startswith("sandbox") else "agent_marker",
        "measurement": "exact" if event.startswith("sandbox") else "explicit",
    }
    if event in ("phase_started", "phase_completed"):
        extra.setdefault("action", "start" if event == "phase_started" else "end")
        extra.setdefault("marker_id", f"{int(mono * 1000):032x}")
    record.update(extra)
    return record


def line(record: dict) -> bytes:
    return (json.dumps(record, sort_keys=True) + "\n").encode()


def write_lines(path: Path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        for record in records:
            fh.write(record if isinstance(record, bytes) else line(record))


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "episcope test",
            "GIT_AUTHOR_EMAIL": "test@episcope.invalid",
            "GIT_COMMITTER_NAME": "episcope test",
            "GIT_COMMITTER_EMAIL": "test@episcope.invalid",
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "HOME": str(cwd),
        },
    )
    return out.stdout.strip()


def init_with_worktrees(parent: Path, *names: str) -> Path:
    """``episcope init parent/ws`` and a git worktree of each name beside it (under
    ``.atrex_long_horizon_worktrees/ws/``, each on a branch of its own); the worktrees
    directory is returned."""
    import sys

    repo = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "console.cli", "init", str(parent / "ws"), "--problem", "row_softmax"],
                   cwd=repo, check=True, capture_output=True, timeout=120)
    worktrees = parent / ".atrex_long_horizon_worktrees" / "ws"
    for number, name in enumerate(names):
        git(parent / "ws", "worktree", "add", "-q", str(worktrees / name), "-b", f"branch-{number}")
    return worktrees


def make_campaign(tmp: Path, name: str = "demo") -> tuple[Path, Path, str]:
    """A campaign repo with one episode worktree; returns (campaign, worktree, base commit)."""
    campaign = tmp / name
    campaign.mkdir(parents=True)
    git(campaign, "init", "-q", "-b", "main")
    (campaign / "kernel.py").write_text("def kernel(x):\n    return x\n")
    (campaign / "profile_driver.py").write_text("print('driver')\n")
    (campaign / "memory").mkdir()
    (campaign / "memory" / "v0.json").write_text(json.dumps({"version": "v0", "performance": {"latency_us_geomean": 100.0}}))
    (campaign / ".git" / "info" / "exclude").write_text(".atrex_long_horizon/\nprofiles/\nmemory/live.json\n")
    git(campaign, "add", "-A")
    git(campaign, "commit", "-q", "-m", "baseline")
    base = git(campaign, "rev-parse", "HEAD")
    worktree = tmp / ".atrex_long_horizon_worktrees" / name / "e0001-abcdef12"
    worktree.parent.mkdir(parents=True)
    git(campaign, "worktree", "add", "-q", "-b", "atrex/long-e0001-abcdef12", str(worktree))
    (worktree / ".git").exists()
    runtime = campaign / ".atrex_long_horizon"
    runtime.mkdir()
    (runtime / "active_episode.json").write_text(
        json.dumps(
            {
                "episode": 1,
                "memory_version": 0,
                "base_commit": base,
                "episode_branch": "atrex/long-e0001-abcdef12",
                "worktree": str(worktree),
                "mode": "full",
                "fast_trials": 0,
                "phase": "exploring",
            }
        )
    )
    return campaign, worktree, base


def follow_until(session, action, predicate, timeout: float = 15.0) -> list:
    """Follow ``session`` live: run ``action`` once the watcher runs, collect events until
    ``predicate(all)`` holds (TimeoutError after ``timeout`` seconds)."""
    seen: list = []

    async def main() -> None:
        stop = asyncio.Event()

        async def consume() -> None:
            async for batch in session.follow_events(stop):
                seen.extend(batch)
                if predicate(seen):
                    stop.set()

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.3)
        action()
        try:
            await asyncio.wait_for(task, timeout)
        finally:
            stop.set()

    asyncio.run(main())
    return seen
