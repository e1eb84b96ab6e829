"""The loop's git rules on a real `episcope init` workspace: live as soon as a file they read
changes, and with a base to compare a candidate against even where no episode names one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.cli import main
from console.episode import events as ev
from console.episode.incumbent import incumbent_commit
from console.episode.session import Session
from console.episode.workspace import resolve_workspace
from spine_helpers import follow_until, git, make_campaign, tele, write_lines

ARCHIVE = Path(__file__).resolve().parents[1] / "examples" / "episodes" / "row_softmax-h200.tar.gz"


@pytest.fixture
def ws(tmp_path) -> Path:
    target = tmp_path / "ws"
    assert main(["init", str(target), "--problem", "row_softmax"]) == 0
    return target


def codes(state) -> list[str]:
    return [alert.code for alert in state.alerts]


def status_alerts(ws: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(ws)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)["alerts"]


def protected_alerts(state) -> list[str]:
    return [alert.path for alert in state.alerts if alert.code == "protected_path_modified"]


@pytest.mark.parametrize("edit", ["test_kernel.py", "reference.py", "profile_driver.py", "eval/extra_case.py"])
def test_an_edit_to_a_protected_path_alone_is_flagged_live(ws, edit):
    session = Session(ws)
    assert protected_alerts(session.scan()) == []

    def change() -> None:
        path = ws / edit
        path.parent.mkdir(exist_ok=True)
        with open(path, "a") as fh:
            fh.write("# edited\n")

    # Nothing else changes: not kernel.py, not HEAD, not the index.
    follow_until(session, change, lambda seen: protected_alerts(session.state) == [edit], timeout=8)
    assert [a["path"] for a in status_alerts(ws) if a["code"] == "protected_path_modified"] == [edit]


def test_an_episode_worktree_s_protected_edit_is_flagged_live(tmp_path):
    _, worktree, _ = make_campaign(tmp_path)
    session = Session(worktree)
    assert protected_alerts(session.scan()) == []

    def change() -> None:
        with open(worktree / "profile_driver.py", "a") as fh:
            fh.write("# edited\n")

    follow_until(session, change, lambda seen: protected_alerts(session.state) == ["profile_driver.py"], timeout=8)


def test_a_protected_edit_and_its_undo_each_re_read_git_but_telemetry_lines_do_not(ws):
    session = Session(ws)
    session.scan()
    telemetry = ws / ".atrex_long_horizon" / "telemetry.jsonl"
    write_lines(telemetry, [tele("phase_started", 1.0, phase="profile")])
    events = session.refresh([str(telemetry)])
    assert [e.kind for e in events] == [ev.TELEMETRY]  # an appended line runs no git

    (ws / "test_kernel.py").write_text((ws / "test_kernel.py").read_text() + "# edited\n")
    assert [e.kind for e in session.refresh([str(ws / "test_kernel.py")])] == [ev.GIT]
    assert protected_alerts(session.state) == ["test_kernel.py"]
    git(ws, "checkout", "--", "test_kernel.py")
    assert [e.kind for e in session.refresh([str(ws / "test_kernel.py")])] == [ev.GIT]
    assert protected_alerts(session.state) == []


def test_a_quiet_tick_catches_a_protected_edit_the_watcher_did_not_report(ws):
    session = Session(ws)
    session.scan()
    assert session.refresh(None) == []  # nothing changed: no git run
    (ws / "reference.py").write_text((ws / "reference.py").read_text() + "# edited\n")
    assert [e.kind for e in session.refresh(None)] == [ev.GIT]
    assert protected_alerts(session.state) == ["reference.py"]


def hand_off(ws: Path) -> str:
    candidate = git(ws, "rev-parse", "HEAD")
    runtime = ws / ".atrex_long_horizon"
    runtime.mkdir(exist_ok=True)
    (runtime / "handoff.json").write_text(json.dumps({"status": "candidate_ready", "candidate_commit": candidate}))
    return candidate


def test_a_committed_evaluator_change_in_an_init_workspace_is_out_of_scope(ws):
    first = git(ws, "rev-parse", "HEAD")
    with open(ws / "test_kernel.py", "a") as fh:
        fh.write("# t\n")
    with open(ws / "kernel.py", "a") as fh:
        fh.write("# k\n")
    git(ws, "commit", "-qam", "candidate")
    candidate = hand_off(ws)

    state = Session(ws).scan(final=True)
    assert state.git.base_commit is None  # no episode names one
    assert state.git.candidate_base == first == incumbent_commit(state)  # what ABBA runs against
    assert state.git.candidate_changes == ("kernel.py", "test_kernel.py")
    assert "candidate_scope" in codes(state)
    scope = [a for a in status_alerts(ws) if a["code"] == "candidate_scope"]
    assert [a["message"] for a in scope] == [f"candidate {candidate[:12]} changes kernel.py, test_kernel.py; "
                                             "only kernel.py may change"]


def test_the_incumbent_memory_version_s_commit_comes_before_the_first_commit(ws):
    # A tracked change after init (README.md), then the incumbent's commit, then a candidate
    # that changes only kernel.py from there: in scope against the incumbent, not the first commit.
    with open(ws / "README.md", "a") as fh:
        fh.write("notes\n")
    git(ws, "commit", "-qam", "notes")
    incumbent = git(ws, "rev-parse", "HEAD")
    (ws / "memory" / "v0.json").write_text(json.dumps(
        {"version": 0, "performance": {"latency_us": 100.0}, "git_commit_hash": incumbent}))
    with open(ws / "kernel.py", "a") as fh:
        fh.write("# k\n")
    git(ws, "commit", "-qam", "candidate")
    hand_off(ws)

    state = Session(ws).scan(final=True)
    assert state.git.candidate_base == incumbent == incumbent_commit(state)
    assert state.git.candidate_changes == ("kernel.py",)
    assert "candidate_scope" not in codes(state)


def test_a_live_session_picks_up_a_new_incumbent_version_as_the_base(ws):
    with open(ws / "README.md", "a") as fh:
        fh.write("notes\n")
    git(ws, "commit", "-qam", "notes")
    incumbent = git(ws, "rev-parse", "HEAD")
    with open(ws / "kernel.py", "a") as fh:
        fh.write("# k\n")
    git(ws, "commit", "-qam", "candidate")
    hand_off(ws)
    session = Session(ws)
    assert "candidate_scope" in codes(session.scan())  # against the first commit: README.md changed too

    def record_version() -> None:
        (ws / "memory" / "v0.json").write_text(json.dumps(
            {"version": 0, "performance": {"latency_us": 100.0}, "git_commit_hash": incumbent}))

    follow_until(session, record_version, lambda seen: session.state.git.candidate_base == incumbent, timeout=8)
    assert "candidate_scope" not in codes(session.state)


def test_an_archive_s_git_facts_stay_on_the_episode_s_clock(tmp_path, monkeypatch):
    # Unpacking gives directories (memory/, eval/) the time of unpacking; the git facts are
    # as of the files they are read from, which keep the episode's times.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    unpacked_from = time.time()
    workspace = resolve_workspace(ARCHIVE)
    assert (workspace.episode_root / "memory").stat().st_mtime >= unpacked_from - 1  # the premise
    git_events = [event for event in Session(ARCHIVE, workspace=workspace).scan_events(final=True) if event.kind == ev.GIT]
    assert len(git_events) == 1 and git_events[0].at < unpacked_from - 60
