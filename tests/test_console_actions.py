"""Every operator action explains itself: the GPU preflight dims what this host cannot run and
a pressed dimmed key says why; a job that fails while the console watches toasts its reason;
ABBA from an ``episcope init`` workspace compares the right commits (or says what is missing);
one count of failed jobs; archives open read-only with their job logs.

Real workspaces, real git, real sandbox jobs: nothing here is mocked. This host has no GPU, so
the jobs fail the way a newcomer's do; a test whose premise a GPU host breaks skips there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Log

from console.actions import ACTIONS, JobLauncher
from console.app import EpiscopeApp
from console.commands.init import create_workspace
from console.episode.incumbent import abba_plan
from console.episode.job_outcome import failure_line
from console.episode.session import Session
from console.episode.status_text import render_status
from console.episode.summary import status_document
from console.episode.workspace import resolve_workspace
from console.formats.job_record import list_job_records
from spine_helpers import git
from widgets.header import EpisodeHeader

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"
SIZE = (120, 36)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def workspace(tmp_path):
    return create_workspace(tmp_path / "ws", "row_softmax")


def record_notes(app: EpiscopeApp) -> list[str]:
    """The messages of the app's notifications, as they are raised (the toasts still show)."""
    notes: list[str] = []
    notify = app.notify

    def recording(message, **kwargs):
        notes.append(str(message))
        return notify(message, **kwargs)

    app.notify = recording
    return notes


async def until(pilot, ready, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        await pilot.pause(0.1)
    return bool(ready())


async def test_preflight_dims_the_gpu_keys_and_a_pressed_key_says_why(workspace, tmp_path):
    launcher = JobLauncher(workspace, extra_flags=("--dry-run",), log_dir=tmp_path / "requests")
    app = EpiscopeApp(session=Session(workspace), launcher=launcher)  # samples the GPU for real
    notes = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: app.episode_state.preflight is not None, 20)
        preflight = app.episode_state.preflight
        if preflight.blocks(profiler=True) is None:
            pytest.skip("this host has a GPU, ncu and cupy: nothing to dim")
        for action in ACTIONS:
            why = app.why_blocked(action.name)
            assert why is not None and why == preflight.blocks(profiler=action.profiler), action.name
            assert app.check_action("launch", (action.name,)) is None  # dimmed, not hidden
        await pilot.press("s", "c")
        await pilot.pause(0.2)
        assert launcher.launched == []
        assert f"Profile: survey: not now ({preflight.blocks(profiler=True)})" in notes
        assert f"Correctness run: not now ({preflight.blocks(profiler=False)})" in notes
        # jobs sent to a Ray cluster run on its GPUs: this host's preflight does not decide
        app.launcher = JobLauncher(workspace, extra_flags=("--backend", "ray", "--dry-run"))
        assert app.why_blocked("profile_survey") is None and app.why_blocked("correctness_run") is None
    # the headless status checks the same host and says the same
    out = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(workspace)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["preflight"] == {"gpu": preflight.gpu, "ncu": preflight.ncu, "cupy": preflight.cupy}
    human = subprocess.run([sys.executable, "-m", "console.cli", "status", str(workspace)],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert f"actions   GPU actions dimmed: {preflight.blocks(profiler=True)}" in human.stdout


async def test_a_job_that_fails_while_watched_toasts_its_first_error_line(workspace):
    # A job that failed before the console opened is the episode's past: no toast for it.
    before = JobLauncher(workspace).launch("correctness_run")
    assert before.process.wait(120) is not None
    launcher = JobLauncher(workspace)
    app = EpiscopeApp(session=Session(workspace), launcher=launcher, sample_gpu=False)
    notes = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: app.scanned and len(app.episode_state.jobs) == 1, 20)
        old = app.episode_state.jobs[0]
        if old.state == "succeeded":
            pytest.skip("the evaluator runs on this host: no failure to report")
        await pilot.press("c")
        assert launcher.launched and launcher.launched[0].action == "correctness_run"
        toasted = lambda: [n for n in notes if n.startswith("job ") and " failed: " in n]  # noqa: E731
        assert await until(pilot, toasted, 120), notes
        state = app.episode_state
        new = next(job for job in state.jobs if job.job_id != old.job_id)
        assert toasted() == [f"job {new.job_id} (correctness) failed: {failure_line(new, state.job_logs.get(new.job_id))}"]
        reason = toasted()[0].split(" failed: ", 1)[1]
        assert reason != "command exited with status 1" and not reason.startswith("exit status")  # the job's own words
        document = status_document(state)
        assert document["sandbox"]["failed"] == document["sandbox"]["jobs"]["failed"] == 2  # one count
        assert [job["error"] for job in document["jobs"]] == [failure_line(j, state.job_logs.get(j.job_id))
                                                              for j in state.jobs]
        assert f"{new.job_id}  failed  correctness: {reason}" in render_status(document)  # the human status too


def test_abba_from_an_init_workspace_says_what_is_missing_then_compares_the_right_commits(workspace):
    first = git(workspace, "rev-parse", "HEAD").strip()
    assert abba_plan(Session(workspace).scan()) == (first, first, "no commit since the base commit")
    kernel = workspace / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# candidate\n")
    plan = abba_plan(Session(workspace).scan())
    assert plan.missing == "kernel.py has uncommitted changes: commit them to compare what you see"
    git(workspace, "commit", "-qam", "candidate")
    head = git(workspace, "rev-parse", "HEAD").strip()
    plan = abba_plan(Session(workspace).scan())
    assert plan == (first, head, None)  # the incumbent is the workspace's first commit: v0's kernel
    job = JobLauncher(workspace).launch("abba_compare", incumbent=plan.incumbent, candidate=plan.candidate)
    assert job.process.wait(300) is not None
    (record,), _ = list_job_records(str(workspace))
    stderr = (Path(workspace) / ".atrex_long_horizon" / "sandbox" / record.job_id / "stderr.log").read_text()
    assert "not a git repository" not in stderr and "untracked" not in stderr
    (verify,) = (workspace / "verification_artifacts" / ".atrex_long_horizon_verify").iterdir()
    request = json.loads((verify / "request-0001.json").read_text())
    # both revisions were taken from the workspace's repository: the staged copy has no .git
    assert request["manifests"]["incumbent"]["commit"] == first
    assert request["manifests"]["candidate"]["commit"] == head
    runs = [json.loads(line) for line in (verify / "runs.jsonl").read_text().splitlines()]
    assert [run["revision"] for run in runs] == ["incumbent", "candidate", "candidate", "incumbent"]


async def refused_as_archive(app: EpiscopeApp, pilot, notes: list[str], key: str, title: str) -> None:
    """Once the archive is scanned, every job action is dimmed for the archive's reason, and
    ``key`` says so when pressed."""
    assert await until(pilot, lambda: app.scanned and app.episode_state.jobs, 20)
    await pilot.pause(0.3)
    for action in ACTIONS:
        assert app.why_blocked(action.name) == "archive: read-only"
        assert app.check_action("launch", (action.name,)) is None
    await pilot.press(key)
    await pilot.pause(0.1)
    assert f"{title}: not now (archive: read-only)" in notes


async def test_an_archive_opens_read_only_and_its_job_logs_come_from_the_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    workspace = resolve_workspace(ARCHIVE)
    assert workspace.archive == ARCHIVE.resolve()
    copy = workspace.campaign_root.parent
    app = EpiscopeApp(session=Session(ARCHIVE, workspace=workspace), readonly=True,
                      readonly_reason="archive: read-only", sample_gpu=False)
    notes = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await refused_as_archive(app, pilot, notes, "b", "Benchmark run")
        header = app.query_one(EpisodeHeader)
        assert "archive: read-only" in "\n".join(strip.text for strip in header.render_lines(header.size.region))
        state = app.episode_state
        # the records name the recording machine's workspace; the logs are the copy's own files
        assert all(not job.workspace.startswith(str(copy)) for job in state.jobs)
        assert all(state.job_logs.get(job.job_id) and state.job_logs[job.job_id].stdout for job in state.jobs)
        with_stderr = next(job for job in state.jobs if state.job_logs[job.job_id].stderr)
        await pilot.press("4")
        table = app.query_one("#jobs-table", DataTable)
        table.move_cursor(row=table.get_row_index(with_stderr.job_id))
        await pilot.pause(0.2)
        shown = "\n".join(app.query_one("#job-log", Log).lines)
        tail = state.job_logs[with_stderr.job_id]
        assert tail.stdout[-1] in shown and "── stderr" in shown and tail.stderr[-1] in shown


@pytest.mark.parametrize("inside", ["e0001 worktree", "e0001 worktree's profiles", "campaign", "copy"])
async def test_a_path_inside_an_archives_unpacked_copy_opens_read_only(tmp_path, monkeypatch, inside):
    """The README's way to open the example's first episode (its worktree in the unpacked
    copy), or any other directory of the copy, is the archive as much as the .tar.gz is:
    ``watch`` opens it read-only, for the archive's reason."""
    from console.cli import build_parser
    from console.commands.watch import console_app

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    opened = resolve_workspace(ARCHIVE)
    (first,) = opened.campaign_root.parent.glob(f".atrex_long_horizon_worktrees/{opened.name}/e0001-*")
    path = {"e0001 worktree": first, "e0001 worktree's profiles": first / "profiles",
            "campaign": opened.campaign_root, "copy": opened.campaign_root.parent}[inside]
    args = build_parser().parse_args(["watch", str(path), "--no-record"])
    workspace = resolve_workspace(args.path)
    assert workspace.archive == opened.campaign_root.parent.resolve()
    assert workspace.worktree == (first if inside.startswith("e0001") else opened.worktree)
    app = console_app(args, workspace)
    assert app.readonly and app.launcher is None
    notes = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await refused_as_archive(app, pilot, notes, "c", "Correctness run")
        header = app.query_one(EpisodeHeader)
        shown = "\n".join(strip.text for strip in header.render_lines(header.size.region))
        assert "READ-ONLY" in shown and "LIVE" not in shown and "archive: read-only" in shown
        assert f"episode {1 if inside.startswith('e0001') else 2}" in shown


async def test_an_archived_open_phase_ends_at_the_archives_last_event(tmp_path, monkeypatch):
    """An archive is a frozen record: its supervisor stopped mid-benchmark, and status gives
    that open phase no duration. The console's "now" is the archive's newest event, so the
    phase is drawn for as long as the record shows, not until this machine's clock (it was
    ``▶ 8h38m benchmark`` and grew every minute)."""
    from console.cli import build_parser
    from console.commands.watch import console_app
    from widgets.phase_timeline import PhaseTimeline

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive = ROOT / "tests" / "fixtures" / "aka" / "campaign_inflight.tar.gz"
    args = build_parser().parse_args(["watch", str(archive), "--no-record"])
    app = console_app(args, resolve_workspace(args.path))
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: app.scanned and app.episode_state.active_phase is not None, 20)
        await pilot.pause(0.3)
        state = app.episode_state
        assert state.active_phase.phase == "benchmark"
        assert status_document(state)["phases"]["benchmark"]["wall_seconds"] is None
        timeline = app.query_one(PhaseTimeline)
        assert timeline.now == state.last_event_at < time.time() - 3600
        lane = next(line for line in timeline.render().plain.splitlines() if "▶" in line)
        assert lane.split("▶")[1].split() == ["5.2s", "benchmark"]  # the lane as the record shows it


def test_the_preflight_is_recorded_and_replayed(tmp_path):
    from console.episode import events as ev
    from console.episode.preflight import PREFLIGHT_PATH, check_preflight
    from console.episode.replay import Recorder, Replay, load_recording
    from console.gpu.sampler import GpuSampler

    sampler = GpuSampler()
    try:
        reading = sampler.sample()
    finally:
        sampler.close()
    preflight = check_preflight(reading)
    recorder = Recorder(tmp_path / "recording.jsonl", campaign_root=str(tmp_path), campaign="x", worktree=None)
    recorder.record(ev.Event(ev.PREFLIGHT, PREFLIGHT_PATH, None, reading.sampled_at, preflight))
    recorder.close()
    _, events, problems = load_recording(tmp_path / "recording.jsonl")
    assert problems == [] and [e.data for e in events] == [preflight]
    replay = Replay(events)
    replay.seek_index(replay.total)
    assert replay.state().preflight == preflight
