"""Replay: the virtual clock, marks, git-history times, recordings, and the replay screen."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest
from textual.widgets import Static

from console.app import EpiscopeApp
from console.episode import events as ev
from console.episode.reducer import fold
from console.episode.replay import (
    Recorder,
    Replay,
    episode_events,
    is_recording,
    load_recording,
    new_recording_path,
    recordings_dir,
    version_commit_times,
)
from console.episode.session import Session
from console.episode.summary import episode_facts, running_jobs, status_document
from console_fixture import build_episode
from widgets.replay_bar import ReplayBar

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def replay_of(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    workspace, events = episode_events(campaign)
    replay = Replay(events, campaign_root=str(workspace.campaign_root), campaign=workspace.name,
                    worktree=str(workspace.worktree))
    return campaign, worktree, replay


def test_replay_to_the_end_equals_one_fold(replay_of):
    _, _, replay = replay_of
    replay.seek_index(replay.total)
    state = replay.state()
    whole = fold(replay.events)
    assert state.event_count == whole.event_count == replay.total
    assert dict(state.phase_totals) == dict(whole.phase_totals)
    assert len(state.versions) == len(whole.versions) == 4
    replay.step(-1)
    assert replay.state().event_count == replay.total - 1
    replay.seek_index(0)
    assert replay.state().event_count == 0


def test_events_are_in_time_order_and_versions_sit_at_their_commit_time(replay_of):
    campaign, _, replay = replay_of
    committed = version_commit_times(campaign)
    assert str(campaign / "memory" / "v3.json") in committed
    versions = [e for e in replay.events if e.kind == ev.MEMORY_VERSION]
    assert {e.at for e in versions if e.path in committed} <= set(committed.values())
    times = [t for t in replay.times if t is not None]
    assert times == sorted(times)


def test_virtual_clock_plays_at_its_speed_and_stops_at_the_end(replay_of):
    _, _, replay = replay_of
    assert replay.advance(1.0) is False  # paused: nothing moves
    replay.toggle()
    replay.speed_index = 1  # 0.5x
    start = replay.now
    replay.advance(2.0)
    assert replay.now == pytest.approx(start + 1.0)
    replay.faster(+1)
    assert replay.speed == 1.0
    while replay.playing:
        replay.advance(1e9)
    assert replay.finished and replay.state().event_count == replay.total


def test_marks_jump_to_phase_starts_and_versions(replay_of):
    _, _, replay = replay_of
    phases = [m for m in replay.marks if m.kind == "phase"]
    assert [m.label.split()[0] for m in phases][:2] == ["research", "planning"] or len(phases) >= 4
    first = replay.jump("phase", +1)
    assert first is not None and replay.position == first.index
    assert replay.state().active_phase is not None
    version = replay.jump("version", +1)
    assert version is not None and version.label.startswith("v")
    back = replay.jump("phase", -1)
    assert back is not None and back.index < version.index


def test_recording_round_trip_replays_what_was_watched(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    campaign, worktree = build_episode(tmp_path / "ws")
    path = new_recording_path("demo", campaign)
    assert path.parent == recordings_dir() and tmp_path / "state" in path.parents
    recorder = Recorder(path, campaign_root=str(campaign), campaign="demo", worktree=str(worktree))
    seen = []

    def record(event) -> None:
        seen.append(event)
        recorder.record(event)

    session = Session(campaign, on_event=record)
    live = session.scan()
    recorder.close()
    assert is_recording(path) and not any(p.is_relative_to(campaign) for p in [path])
    header, events, problems = load_recording(path)
    assert header.campaign == "demo" and problems == []
    # Recorded data decodes into the very types the live reads gave.
    assert [(e.kind, type(e.data)) for e in events] == [(e.kind, type(e.data)) for e in seen]
    assert [e.data for e in events if e.kind == ev.TELEMETRY] == [e.data for e in seen if e.kind == ev.TELEMETRY]
    replay = Replay(events, campaign_root=header.campaign_root, campaign=header.campaign, worktree=header.worktree)
    replay.seek_index(replay.total)
    again = replay.state()
    assert again.event_count == live.event_count
    assert dict(again.phase_totals) == dict(live.phase_totals)
    assert [j.job_id for j in again.jobs] == [j.job_id for j in live.jobs]
    assert [v.version for v in again.versions] == [v.version for v in live.versions]
    assert len(again.unreadable) == len(live.unreadable)
    assert [a.code for a in again.alerts] == [a.code for a in live.alerts]
    # A recorded receipt still knows where it lives (its capture files are named relative to it).
    assert [r.path for r in again.timeline_receipts] == [r.path for r in live.timeline_receipts]
    assert live.timeline_receipts[0].path == str(worktree / "timeline" / "capture-1" / "receipt.json")
    # A torn last line (the console died mid-write) is reported, the rest is kept.
    with open(path, "ab") as fh:
        fh.write(b'{"kind": "telemetry", "da\n')
    _, events2, problems2 = load_recording(path)
    assert len(events2) == len(events) and len(problems2) == 1 and problems2[0].offset is not None


def test_a_recorded_event_that_cannot_be_decoded_is_a_problem_at_its_offset(tmp_path):
    """An unknown kind, data its kind's reader rejects, or a line that is no event: each is
    reported with the recording's path and the line's offset; every other event replays."""
    from spine_helpers import tele

    header = b'{"schema": "episcope-recording/v1", "campaign": "demo"}\n'
    good = orjson.dumps({"kind": "telemetry", "path": "/w/t.jsonl", "offset": 0, "at": 1.0,
                         "data": tele("phase_started", 1.0, phase="profile")}) + b"\n"
    unknown = b'{"kind": "no_such_kind", "path": "/w/x", "offset": null, "at": null, "data": {"a": 1}}\n'
    rejected = b'{"kind": "telemetry", "path": "/w/t.jsonl", "offset": 9, "at": 2.0, "data": {"event": "launch"}}\n'
    no_event = b'[1, 2]\n'
    problem = b'{"kind": "unreadable", "path": "/w/t.jsonl", "offset": 5, "at": null,' \
              b' "data": {"path": "/w/t.jsonl", "offset": 5, "error": "invalid JSON"}}\n'
    path = tmp_path / "r.jsonl"
    path.write_bytes(header + good + unknown + rejected + no_event + problem)
    _, events, problems = load_recording(path)
    assert [(e.kind, type(e.data).__name__) for e in events] == [("telemetry", "TelemetryRecord"),
                                                                  ("unreadable", "Unreadable")]
    assert events[1].data.offset == 5
    start = len(header) + len(good)
    offsets = [start, start + len(unknown), start + len(unknown) + len(rejected)]
    assert [(p.path, p.offset) for p in problems] == [(str(path), offset) for offset in offsets]
    assert "no_such_kind" in problems[0].error


async def test_replay_screen_keys_move_the_virtual_clock(replay_of):
    _, _, replay = replay_of
    app = EpiscopeApp(replay=replay, readonly=True, sample_gpu=False)
    async with app.run_test(size=(150, 46)) as pilot:
        await pilot.press("end")
        await pilot.pause()
        assert app.episode_state.event_count == replay.total
        await pilot.press("home")
        await pilot.pause()
        assert app.episode_state.event_count == 0
        await pilot.press("full_stop", "full_stop", "comma")
        await pilot.pause()
        assert replay.position == 1
        await pilot.press("greater_than_sign")
        await pilot.pause()
        assert app.episode_state.active_phase is not None
        await pilot.press("v")
        await pilot.pause()
        assert app.episode_state.versions
        assert app.check_action("launch", ("benchmark_run",)) is None  # replay never launches
        assert app.check_action("toggle_play", ()) is True
        await pilot.press("home", "plus", "plus", "plus", "plus", "plus", "plus", "plus", "plus", "space")
        await pilot.pause(0.5)
        assert replay.position > 0
        await pilot.press("space")
        bar = app.query_one(ReplayBar)
        await pilot.click(ReplayBar, offset=(bar.size.width // 2, 1))
        await pilot.pause()
        assert 0.3 < replay.fraction() < 0.7
        titles = [t for t, _, _ in app.palette_commands()]
        assert any(t.startswith("Jump to version v") for t in titles)
        await pilot.press("question_mark")  # the help names why the keys are dim
        await pilot.pause()
        help_text = " ".join(strip.text for static in app.screen.query(Static)
                             for strip in static.render_lines(static.size.region))
        assert "replay: read-only, actions disabled" in help_text


def test_watch_refuses_a_path_that_is_not_a_workspace(tmp_path):
    out = subprocess.run([sys.executable, "-m", "console.cli", "watch", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "no such directory" in out.stderr


def test_the_bundled_episode_replays_on_its_own_clock(tmp_path, monkeypatch):
    """The recorded H200 episode: every event at the time it happened (the git facts at the
    last change they read, not at the time the archive is opened), so the whole episode spans
    a few minutes; ABBA runs after the jobs that made the kernels; each job is seen running,
    and every job has ended by the end. An episode is archived when AKA writes its attempt
    record, not when the copies of its files (which keep their own times) are first read:
    while it runs, the header names it (episode 2 by its worktree's name, before any
    supervisor document does), with no status taken from episode 1's attempt."""
    from bundled_example import ARCHIVE

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    workspace, events = episode_events(ARCHIVE)
    replay = Replay(events, campaign_root=str(workspace.campaign_root), campaign=workspace.name,
                    worktree=str(workspace.worktree))
    assert all(t is not None for t in replay.times)
    assert replay.times == sorted(replay.times)
    assert 30 < replay.end - replay.start < 600  # seconds, not the days until the archive was opened
    by_kind = {}
    for event in replay.events:
        by_kind.setdefault(event.kind, []).append(event.at)
    # each episode's ABBA runs follow its evaluations: none before the first, the last after the last
    assert min(by_kind[ev.GIT]) <= replay.end and min(by_kind[ev.ABBA_RUN]) > min(by_kind[ev.EVALUATION])
    assert max(by_kind[ev.ABBA_RUN]) > max(by_kind[ev.EVALUATION])
    assert min(by_kind[ev.ABBA_RUN]) <= min(by_kind[ev.ABBA])
    jobs = {e.path for e in replay.events if e.kind == ev.JOB}
    states = {path: [e.data.state for e in replay.events if e.kind == ev.JOB and e.path == path] for path in jobs}
    assert all(seq == ["queued", "running", "succeeded"] for seq in states.values()), states
    archived_at = {e.data.episode: index + 1 for index, e in enumerate(replay.events) if e.kind == ev.ATTEMPT}
    assert sorted(archived_at) == [1, 2]
    worktree_from = next(index + 1 for index, e in enumerate(replay.events)
                         if e.kind == ev.TELEMETRY and e.path.startswith(str(workspace.worktree)))
    assert archived_at[1] < worktree_from < archived_at[2]
    started = next(index + 1 for index, e in enumerate(replay.events) if e.kind == ev.TELEMETRY)
    runs = {1: range(started, archived_at[1]), 2: range(worktree_from, archived_at[2])}
    # Each worktree's job records are read whichever worktree the archive shows: an episode's
    # jobs are in the Jobs pane (state.jobs) while it runs, and counted in the header's slots.
    of_episode = {n: {e.data.job_id for e in replay.events if e.kind == ev.JOB and f"/e{n:04d}-" in e.path} for n in runs}
    assert {n: len(ids) for n, ids in of_episode.items()} == {1: 16, 2: 5}
    shown: dict[int, set[str]] = {n: set() for n in runs}
    # the recorder ran its jobs one at a time; four at once is replayed in test_jobs_sandbox.py
    for index in range(replay.total + 1):
        replay.seek_index(index)
        state = replay.state()
        running = [j for j in state.jobs if j.state == "running"]
        assert len(running) <= 1 and all(j.finished_at is None and j.exit_code is None for j in running)
        traced = [op for op in state.traced_operations if op.status == "running"]
        assert running_jobs(state) == len([j for j in state.jobs if j.state in ("queued", "running")]) + len(traced)
        archived = {r.episode for r in state.episodes if r.source == "archived"}
        assert archived <= {n for n, at in archived_at.items() if at <= index}, (index, archived)
        for number, run in runs.items():
            if index in run:
                facts = episode_facts(state)
                assert (facts["number"], facts["status"], state.current_episode.source) == (number, None, "live"), index
                assert status_document(state)["episodes"][-1]["episode"] == number
                shown[number] |= {job.job_id for job in state.jobs}
                assert {job.job_id for job in state.jobs} <= of_episode[number], index
    assert shown == of_episode and of_episode[1] | of_episode[2] == {e.data.job_id for e in replay.events if e.kind == ev.JOB}
    # by the end every job has ended; the pane holds the last episode's
    assert {j.state for j in replay.state().jobs} == {"succeeded"} and {j.job_id for j in replay.state().jobs} == of_episode[2]
    assert len(jobs) == 21
    # Playing from the start reaches the end in the episode's own span of virtual time.
    replay.seek_index(0)
    replay.toggle()
    replay.advance(replay.end - replay.start)
    assert replay.finished


def without_raw(value):
    """A record's fields with every ``raw`` (the object it was read from) left out, nested
    records too: a recorded ABBA verdict is read back from its fields, not from the run
    payload the live read scored."""
    import msgspec

    if isinstance(value, msgspec.Struct):
        return {name: without_raw(getattr(value, name)) for name in value.__struct_fields__ if name != "raw"}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_asdict"):
        return [without_raw(item) for item in value]
    if isinstance(value, dict):
        return {key: without_raw(item) for key, item in value.items()}
    return value


def test_a_recording_of_the_bundled_episode_replays_its_abba_verdicts(tmp_path, monkeypatch):
    """The example's result.json files are AKA's run payloads, scored when read (with the
    repeat count of the request beside them). A console recording of the example replays
    both verdicts as the live read scored them, every event decodes to the value the live
    read gave, and nothing of the recording is unreadable."""
    from bundled_example import ARCHIVE

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from console.episode.workspace import resolve_workspace

    workspace = resolve_workspace(ARCHIVE)
    recorder = Recorder(new_recording_path(workspace.name, workspace.campaign_root),
                        campaign_root=str(workspace.campaign_root),
                        campaign=workspace.name, worktree=str(workspace.worktree))
    seen = []

    def record(event) -> None:
        seen.append(event)
        recorder.record(event)

    live = Session(ARCHIVE, workspace=workspace, on_event=record).scan(final=True)
    recorder.close()
    header, events, problems = load_recording(recorder.path)
    assert problems == []
    assert [(e.kind, e.path, e.offset, e.at) for e in events] == [(e.kind, e.path, e.offset, e.at) for e in seen]
    assert [without_raw(e.data) for e in events] == [without_raw(e.data) for e in seen]

    replay = Replay(events, campaign_root=header.campaign_root, campaign=header.campaign, worktree=header.worktree)
    replay.seek_index(replay.total)
    again = replay.state()
    verdicts = [(c.verdict.gate, round(c.verdict.improvement_pct, 2)) for c in live.abba_comparisons if c.verdict]
    assert sorted(verdicts) == [("FAIL", -48.2), ("PASS", 97.34)]
    assert [without_raw(c) for c in again.abba_comparisons] == [without_raw(c) for c in live.abba_comparisons]
    assert [without_raw(v) for v in again.abba] == [without_raw(v) for v in live.abba]
    assert again.unreadable == live.unreadable == ()
