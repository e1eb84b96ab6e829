"""Following a workspace live: appends, atomic replacement, and the real `events --follow`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from console.episode import events as ev
from console.episode.session import Session
from spine_helpers import follow_until, line, make_campaign, tele, write_lines


def test_appended_lines_arrive_once(tmp_path):
    _, worktree, _ = make_campaign(tmp_path)
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    write_lines(path, [tele("phase_started", 1.0, phase="profile")])
    session = Session(worktree)
    session.scan()

    def append() -> None:
        write_lines(path, [tele("phase_completed", 2.0, phase="profile"), tele("phase_started", 3.0, phase="planning")])

    seen = follow_until(session, append, lambda s: sum(e.kind == ev.TELEMETRY for e in s) >= 2)
    telemetry = [e for e in seen if e.kind == ev.TELEMETRY]
    assert [e.data.event for e in telemetry] == ["phase_completed", "phase_started"]
    assert session.state.phase_totals["profile"].intervals == 1
    assert session.state.active_phase.phase == "planning"


def test_a_file_replaced_atomically_mid_follow_is_read_again(tmp_path):
    _, worktree, _ = make_campaign(tmp_path)
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    write_lines(path, [tele("phase_started", 1.0, phase="profile"), tele("phase_completed", 5.0, phase="profile")])
    session = Session(worktree)
    assert session.scan().phase_totals["profile"].wall_seconds == 4.0

    def replace() -> None:
        tmp = path.with_name("telemetry.jsonl.new")
        tmp.write_bytes(line(tele("phase_started", 10.0, phase="research")) + line(tele("phase_completed", 12.0, phase="research")))
        os.replace(tmp, path)

    seen = follow_until(session, replace, lambda s: sum(e.kind == ev.TELEMETRY for e in s) >= 2)
    assert any(e.kind == ev.REMOVED for e in seen)
    state = session.state
    assert "profile" not in state.phase_totals  # what the old file said is gone
    assert state.phase_totals["research"].wall_seconds == 2.0


def test_events_follow_prints_an_appended_line(tmp_path):
    _, worktree, _ = make_campaign(tmp_path)
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    write_lines(path, [tele("phase_started", 1.0, phase="profile")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli", "events", str(worktree), "--follow", "--kind", "telemetry"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        first = json.loads(proc.stdout.readline())
        assert first["data"]["phase"] == "profile"
        time.sleep(0.5)
        write_lines(path, [tele("source_read", 2.0, source_kind="workspace", reference="notes/follow-marker.md")])
        second = json.loads(proc.stdout.readline())
        assert second["data"]["reference"] == "notes/follow-marker.md"
        assert second["offset"] == len(line(tele("phase_started", 1.0, phase="profile")))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
