"""Pilot tests of the live console: every pane, every key, the action layer's real sandbox."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from msgspec.structs import replace
from textual.widgets import DataTable, Input, Log, Static

from console.actions import ACTIONS, ActionRefused, JobLauncher, sandbox_flags
from console.app import DRAW_SECONDS, EpiscopeApp
from console.episode.session import Session
from console.formats.job_record import MAX_SANDBOX_JOBS, job_record_from_obj, read_job_record
from console.jobs.local import group_members
from console.jobs.request import parse_request
from console_fixture import build_episode
from spine_helpers import git, tele, write_lines
from widgets.abba_stats import AbbaStats
from widgets.gpu_pane import GpuPane
from widgets.header import EpisodeHeader
from widgets.key_bar import KeyBar
from widgets.phase_timeline import PhaseTimeline

SIZE = (150, 46)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def episode(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    return campaign, worktree, Session(campaign).scan()


def texts(widget) -> str:
    """What a widget shows on screen, as plain text."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.size.region))


def rows(app, selector: str) -> list[list[str]]:
    """The rows of a table; none while its pane has not had data (its body is not mounted)."""
    table = next(iter(app.query(selector).results(DataTable)), None)
    if table is None:
        return []
    return [[str(getattr(c, "plain", c)) for c in table.get_row(key)] for key in table.rows]


async def settle(pilot, ready, timeout: float = 5.0) -> None:
    """Let the app work until ``ready()`` holds (a loaded CI machine repaints late)."""
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        await pilot.pause(0.05)


def make_app(state, tmp_path, **kwargs) -> EpiscopeApp:
    kwargs.setdefault("sample_gpu", False)
    return EpiscopeApp(state=state, clock=lambda: state.last_event_at or 0.0, **kwargs)


async def test_every_pane_shows_the_episode(episode, tmp_path):
    campaign, worktree, state = episode
    app = make_app(state, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        header = texts(app.query_one(EpisodeHeader))
        assert "demo" in header and "exploring" in header and "1/4" in header  # one running job
        assert "v2 80.500" in header  # the incumbent: best accepted version
        lanes = app.query_one(PhaseTimeline).render().plain
        assert "ep0001/#1" in lanes and "ep0001/#2" in lanes
        assert "▒" in lanes  # the mismatched end is a partial span, kept
        assert "▶" in lanes  # correctness is still running
        assert "▲" in lanes and "·" in lanes  # the sandbox job and the source read
        versions = rows(app, "#versions-table")
        assert [r[0] for r in versions] == ["v0", "v1", "v2", "v3"]
        assert versions[3][3] == "FAIL"
        jobs = rows(app, "#jobs-table")
        # the job records, then the telemetry operation no job record names
        assert [r[0] for r in jobs] == ["job-0003", "job-0002", "job-0001", "sandbox-1-1"]
        assert [r[3] for r in jobs][-1] == "traced" and "traced" not in [r[3] for r in jobs][:-1]
        # "exit" is the command's exit status (as status and `episcope jobs` EXIT), not result_code (1)
        assert jobs[0][1] == "running" and jobs[1][5] == "2"
        log = app.query_one(Log)
        assert any("warmup=3" in line for line in log.lines)
        abba = texts(app.query_one(AbbaStats).query_one("#abba-body", Static))
        assert "PASS" in abba and "n=2" in abba and "+9.95%" in abba and "[0.8911, 0.9100] 67% CI, n=2/2" in abba
        # The gate's statistic (ratio of geometric means), and why the interval is not 95%.
        assert "geomean cand/inc 0.9005 (-9.95%)" in abba and "(too few runs for 95%)" in abba
        unreadable = rows(app, "#unreadable-table")
        assert any(r[0].endswith("telemetry.jsonl") and r[1].isdigit() for r in unreadable)
        alerts = rows(app, "#alerts-table")
        assert any("partial: mismatched_phase_end" in r[1] for r in alerts)
        assert "N/A" in texts(app.query_one(GpuPane).query_one(".pane-note", Static))  # folded: no GPU here


async def test_selecting_a_job_follows_its_log(episode, tmp_path):
    campaign, worktree, _ = episode
    app = EpiscopeApp(session=Session(campaign), sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: app.scanned and len(rows(app, "#jobs-table")) == 3)
        await pilot.press("4", "down")
        await pilot.pause(0.6)
        log = app.query_one(Log)
        assert any("correctness mismatch" in line for line in log.lines)
        # New lines of the selected job's log arrive as events of the followed workspace
        # (the pane reads no file), stdout's and stderr's both.
        job = worktree / ".atrex_long_horizon" / "sandbox" / "job-0002"
        with open(job / "stdout.log", "a") as fh:
            fh.write("retrying shape 4\n")
        with open(job / "stderr.log", "a") as fh:
            fh.write("warning: \x1b]0;owned\x07 slow\n")
        await settle(pilot, lambda: any("slow" in line for line in log.lines))
        assert any("retrying shape 4" in line for line in log.lines)
        assert "warning: ␛]0;owned␇ slow" in log.lines  # control characters made visible
        assert app.episode_state.job_logs["job-0002"].stdout[-1] == "retrying shape 4"


async def test_number_keys_tab_and_escape_move_between_panes(episode, tmp_path):
    app = make_app(episode[2], tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        assert app.focused.id == "versions-table"
        await pilot.press("7")
        assert app.focused.id == "alerts-table"
        await pilot.press("1")
        assert isinstance(app.focused, PhaseTimeline)
        await pilot.press("tab")
        assert app.focused is not None and not isinstance(app.focused, PhaseTimeline)
        await pilot.click("#unreadable-table")
        assert app.focused.id == "unreadable-table"


async def test_slash_filters_the_focused_table(episode, tmp_path):
    app = make_app(episode[2], tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6", "slash")
        assert app.query_one("#filter", Input).has_focus
        await pilot.press("v", "2")
        await pilot.pause()
        assert [r[0] for r in rows(app, "#versions-table")] == ["v2"]
        await pilot.press("enter")
        assert app.focused.id == "versions-table"
        assert rows(app, "#jobs-table") and len(rows(app, "#jobs-table")) == 4  # other tables untouched (3 jobs, 1 traced)
        await pilot.press("escape")  # esc on a filtered pane clears its filter
        await pilot.pause()
        assert len(rows(app, "#versions-table")) == 4


async def test_help_screen_lists_keys_and_closes_with_escape(episode, tmp_path):
    app = make_app(episode[2], tmp_path, readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        from console.screens.help import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        shown = texts(app.screen.query_one(Static))
        assert "read-only" in shown and "Benchmark run" in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)


async def test_readonly_dims_and_refuses_every_action(episode, tmp_path):
    _, worktree, state = episode
    launcher = JobLauncher(worktree)
    app = make_app(state, tmp_path, readonly=True, launcher=launcher)
    async with app.run_test(size=SIZE) as pilot:
        for action in ACTIONS:
            assert app.check_action("launch", (action.name,)) is None  # shown dimmed
            await pilot.press(action.key)
        await pilot.press("4", "x")
        await pilot.pause()
        assert launcher.launched == []
        assert app.check_action("cancel_job", ()) is None
        assert not any(title.startswith(("Benchmark", "Profile", "Cancel")) for title, _, _ in app.palette_commands())
        bar = app.query_one(KeyBar)
        enabled = {description: on for _, _, description, on in bar.shown}
        assert not any(enabled[action.label] for action in ACTIONS) and enabled["help"] and enabled["quit"]


async def test_key_bar_stays_put_on_focus_changes_and_answers_clicks(episode, tmp_path):
    _, worktree, state = episode
    app = make_app(state, tmp_path, launcher=JobLauncher(worktree))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.query_one(KeyBar)
        shown = bar.shown
        await pilot.press("6", "7", "tab", "1")
        await pilot.pause()
        assert bar.shown is shown  # nothing the bar shows depends on which pane has focus
        start = next(start for start, _, entry in bar.spans if entry[2] == "help")
        await pilot.click(KeyBar, offset=(start + 1, 0))
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"


async def test_four_job_limit_is_visible_and_enforced(episode, tmp_path):
    _, worktree, state = episode
    running = [job_record_from_obj({**j.raw, "job_id": f"job-9{i}", "state": "running"}) for i, j in enumerate(state.jobs * 2)][:4]
    busy = replace(state, jobs=tuple(running))
    launcher = JobLauncher(worktree)
    app = make_app(busy, tmp_path, launcher=launcher)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert f"{MAX_SANDBOX_JOBS}/{MAX_SANDBOX_JOBS}" in texts(app.query_one(EpisodeHeader))
        assert app.why_blocked("benchmark_run") == "4/4 jobs running"
        await pilot.press("b")
        assert launcher.launched == []


PROFILE_FIXTURES = Path(__file__).parent / "fixtures" / "profiling" / "bank_conflict"


def _profiled(state, worktree):
    """The state with real survey / sol / deep results of one kernel, read by the profiling
    module from directories inside the worktree."""
    from console.profiling.result import load_profile_dir

    profiles = []
    for level in ("deep", "survey", "sol"):
        target = worktree / "profiles" / "episode_1" / level
        shutil.copytree(PROFILE_FIXTURES / level, target, dirs_exist_ok=True)
        result, problems = load_profile_dir(target)
        assert result is not None and problems == ()
        profiles.append(result)
    return replace(state, profiles=tuple(profiles))


async def test_deep_profile_targets_the_kernel_selected_in_the_funnel(episode, tmp_path):
    _, worktree, state = episode
    launcher = JobLauncher(worktree, extra_flags=("--dry-run",), log_dir=tmp_path / "out")
    app = make_app(state, tmp_path, launcher=launcher)
    async with app.run_test(size=SIZE) as pilot:
        assert app.why_blocked("profile_deep") == "select a kernel in the funnel"
        app.set_state(_profiled(state, worktree))
        await settle(pilot, lambda: len(rows(app, "#funnel-table")) == 4)
        funnel = rows(app, "#funnel-table")
        assert [row[0] for row in funnel] == ["smem_column_read", "cupy_fill", "smem_column_read", "smem_column_read"]
        assert [row[-1] for row in funnel] == ["survey", "survey", "sol", "deep"]  # the funnel, top down
        assert funnel[0][2] == "2122.94" and funnel[0][3] == "N/A"  # survey times kernels only: SOL unknown
        assert funnel[3][3:7] == ["5.0", "99.9", "96.2", "memory"]
        await pilot.press("2", "down")
        assert app.selected_kernel() == "cupy_fill"
        await pilot.press("d")
        assert launcher.launched and "--kernel-regex" in launcher.launched[0].argv
        assert launcher.launched[0].argv[launcher.launched[0].argv.index("--kernel-regex") + 1] == "^cupy_fill$"
        launcher.launched[0].process.wait(30)
        await pilot.press("down", "down")  # the deep profile explains itself
        detail = texts(app.query_one("#funnel-detail", Static))
        assert "deep" in detail and "mio_throttle 208.8" in detail and "bank-conflicts" in detail
        assert "LOCALIZE analysis/source_metrics_line_run.txt" in detail and "SYMPTOMS memory-bound" in detail


def test_every_action_is_a_request_the_sandbox_accepts(tmp_path):
    for action in ACTIONS:
        flags = sandbox_flags(action.name, episode=3, kernel="gemm_kernel", workspace=str(tmp_path),
                              incumbent="a" * 40, candidate="b" * 40, stamp="20260101T000000Z")
        request, dry = parse_request(flags, environ={})
        assert not dry and request.workspace == str(tmp_path)
        if action.name.startswith("profile_"):
            assert request.kind == "profile" and request.sync[0].startswith("profiles/episode_3/")
        if action.name in ("correctness_run", "benchmark_run"):
            assert request.kind == "run" and "test_kernel.py" in request.argv
        if action.name == "abba_compare":
            # tools/abba.py's own command line: both commits, output under the worktree, the
            # workspace's repository (the staged copy has no .git), the evaluator after --
            assert request.argv[1].endswith("tools/abba.py") and request.sync == ("verification_artifacts",)
            tail = list(request.argv[2:])
            assert tail[:6] == ["--incumbent-commit", "a" * 40, "--candidate-commit", "b" * 40,
                                "--output-dir", "verification_artifacts"]
            assert tail[6:] == ["--repo", str(tmp_path.resolve()), "--", "python", "test_kernel.py"]
        if action.name == "timeline_measure":
            assert request.argv[1].endswith("skills/autonomous-gpu-kernel-timeline/scripts/timeline.py")
            assert request.argv[2] == "measure" and request.sync == ("timeline",)
            from console.timeline.tool import build_parser

            measure = build_parser().parse_args(list(request.argv[2:]))  # the timeline tool accepts it
            assert json.loads(measure.baseline_command) == ["python", "bench.py"]
            assert measure.baseline_source == "clean_kernel.py" and measure.instrumented_source == "kernel.py"
            assert measure.output == "timeline/measurement-20260101T000000Z.json"
    with pytest.raises(ActionRefused):
        sandbox_flags("abba_compare", workspace=str(tmp_path), incumbent="a" * 40)
    assert "--multi-seed" in sandbox_flags("correctness_run")
    assert "--multi-seed" not in sandbox_flags("benchmark_run")


async def test_each_key_launches_its_sandbox_job(episode, tmp_path):
    campaign, worktree, state = episode
    out = tmp_path / "out"
    launcher = JobLauncher(worktree, extra_flags=("--dry-run",), log_dir=out)
    app = make_app(_profiled(state, worktree), tmp_path, launcher=launcher)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # Nothing to compare or measure yet: the worktree is at its base commit, with no probe.
        assert app.why_blocked("abba_compare") == "no commit since the base commit"
        assert app.why_blocked("timeline_measure") == "no clean_kernel.py or bench.py in the worktree (timeline skill)"
        base = state.git.base_commit
        (worktree / "kernel.py").write_text("# candidate\n")
        git(worktree, "commit", "-q", "-am", "candidate")
        (worktree / "clean_kernel.py").write_text("# before the probe\n")
        (worktree / "bench.py").write_text("# prints one sample line\n")
        state = Session(campaign).scan()
        app.set_state(_profiled(state, worktree))
        await pilot.pause(0.3)
        head = state.git.head
        assert head != base and app.abba_commits() == (base, head)
        for action in ACTIONS:
            await pilot.press(action.key)
            assert launcher.launched[-1].action == action.name, action.name
            launcher.launched[-1].process.wait(30)
    requests = [json.loads(p.read_text()) for p in sorted(out.iterdir())]
    assert len(requests) == len(ACTIONS)
    kinds = sorted(r["kind"] for r in requests)
    assert kinds.count("profile") == 4 and kinds.count("run") == 2 and kinds.count("dev") == 2
    abba = next(r["argv"] for r in requests if any(a.endswith("abba.py") for a in r["argv"]))
    assert abba[abba.index("--incumbent-commit") + 1] == base and abba[abba.index("--candidate-commit") + 1] == head


async def test_command_palette_lists_what_makes_sense_now(episode, tmp_path):
    _, worktree, state = episode
    launcher = JobLauncher(worktree, extra_flags=("--dry-run",), log_dir=tmp_path / "out")
    app = make_app(state, tmp_path, launcher=launcher)
    async with app.run_test(size=SIZE) as pilot:
        titles = [t for t, _, _ in app.palette_commands()]
        assert "Benchmark run" in titles and not any(t.startswith("Profile: deep") for t in titles)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"benchmark run")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert [j.action for j in launcher.launched] == ["benchmark_run"]
        launcher.launched[0].process.wait(30)


def _sleepy_worktree(worktree: Path) -> None:
    # The benchmark command of this episode just waits: a job that is still running.
    (worktree / "test_kernel.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")


def _wait(predicate, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return None


def _record(worktree: Path):
    root = worktree / ".atrex_long_horizon" / "sandbox"
    for directory in sorted(root.iterdir()):
        if directory.name.startswith("job-"):
            continue
        record = read_job_record(directory / "job.json").value
        if record is not None and record.pgid:
            return record
    return None


async def test_cancel_asks_first_then_ends_the_job_group(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    _sleepy_worktree(worktree)
    session = Session(campaign)
    launcher = JobLauncher(worktree)
    app = EpiscopeApp(session=session, launcher=launcher, sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        await pilot.press("b")
        record = _wait(lambda: _record(worktree))
        assert record is not None and group_members(record.pgid)
        await pilot.pause(0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                r[0] == record.job_id for r in rows(app, "#jobs-table")):
            await pilot.pause(0.2)
        await pilot.press("4")
        table = app.query_one("#jobs-table", DataTable)
        table.move_cursor(row=[k.value for k in table.rows].index(record.job_id))
        await pilot.press("x")
        from console.screens.confirm import ConfirmScreen

        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # declined: nothing happens
        assert group_members(record.pgid)
        await pilot.press("x", "y")
        final = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            final = read_job_record(worktree / ".atrex_long_horizon" / "sandbox" / record.job_id / "job.json").value
            if final.terminal:
                break
            await pilot.pause(0.2)
        assert final.state == "cancelled"
        assert _wait(lambda: not group_members(record.pgid), 10)
    launcher.shutdown()


async def test_quitting_leaves_no_job_process_behind(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    _sleepy_worktree(worktree)
    launcher = JobLauncher(worktree)
    app = EpiscopeApp(session=Session(campaign), launcher=launcher, sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b")
        record = _wait(lambda: _record(worktree))
        assert record is not None and group_members(record.pgid)
        sandbox_pid = launcher.launched[0].process.pid
        await pilot.press("q")  # a job of this console runs: quitting asks first
        from console.screens.confirm import ConfirmScreen

        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen) and group_members(record.pgid)
        await pilot.press("q", "y")
    assert not group_members(record.pgid)
    assert not group_members(sandbox_pid)


async def test_live_view_follows_appended_telemetry(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    app = EpiscopeApp(session=Session(campaign), sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 10
        while app.episode_state.event_count == 0 and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert "ep0001/#1" in app.query_one(PhaseTimeline).render().plain
        write_lines(worktree / ".atrex_long_horizon" / "telemetry.jsonl",
                    [tele("phase_started", 500.0, iteration="episode-0002", phase="research")])
        deadline = time.monotonic() + 10
        while "ep0002/#1" not in app.query_one(PhaseTimeline).render().plain and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert "ep0002/#1" in app.query_one(PhaseTimeline).render().plain
        # A broken line shows up in the unreadable list; the console keeps going.
        telemetry = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
        offset = str(telemetry.stat().st_size)
        with open(telemetry, "ab") as fh:
            fh.write(b"not json at all\n")

        def shown() -> bool:
            return any(r[0].endswith("telemetry.jsonl") and r[1] == offset for r in rows(app, "#unreadable-table"))

        deadline = time.monotonic() + 10
        while not shown() and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert shown()


async def test_a_flood_of_events_costs_a_few_draws_and_keys_stay_prompt(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    app = EpiscopeApp(session=Session(campaign), sample_gpu=False)
    telemetry = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: app.scanned and app.episode_state.event_count > 0, 10)
        events_before, draws_before = app.episode_state.event_count, app.draws
        started = time.monotonic()
        key_seconds = []
        for burst in range(40):  # 2,000 events in 40 appends, about one every 50 ms
            write_lines(telemetry, [tele("phase_started", 600.0 + burst * 50 + k, iteration=f"episode-{burst + 2:04d}",
                                         phase="research") for k in range(50)])
            await pilot.pause(0.05)
            if burst % 10 == 5:
                pressed = time.monotonic()
                await pilot.press("6" if burst % 20 == 5 else "7")
                key_seconds.append(time.monotonic() - pressed)
                assert app.focused.id == ("versions-table" if burst % 20 == 5 else "alerts-table")
        await settle(pilot, lambda: app.episode_state.event_count >= events_before + 2000, 20)
        elapsed = time.monotonic() - started
        assert app.episode_state.event_count == events_before + 2000  # every event, once
        assert "ep0041/#1" in app.query_one(PhaseTimeline).render().plain
        # Batches collapse: draws are bounded by the draw interval, not by the batches.
        assert app.draws - draws_before <= elapsed / DRAW_SECONDS + 2
        assert max(key_seconds) < 1.0, key_seconds


def squeezed(text: str) -> str:
    """Text without any white space: wrapped lines compare equal to the words they hold."""
    return "".join(text.split())


def help_text(app) -> str:
    from console.screens.help import HelpScreen

    assert isinstance(app.screen, HelpScreen)
    return texts(app.screen.query_one(Static))


def every_binding():
    from console.screens.base import ConsoleScreen
    from console.screens.confirm import ConfirmScreen
    from console.screens.help import HelpScreen
    from console.screens.timeline import TimelineScreen
    from widgets.replay_bar import ReplayBar

    for owner in (EpiscopeApp, ConsoleScreen, HelpScreen, ConfirmScreen, TimelineScreen, ReplayBar):
        yield from ((owner, binding) for binding in owner.BINDINGS)


def test_every_binding_has_an_id_the_keymap_can_name():
    ids = [binding.id for _, binding in every_binding()]
    assert all(ids), [(owner.__name__, binding.key) for owner, binding in every_binding() if not binding.id]
    assert len(ids) == len(set(ids))


async def test_help_is_generated_from_the_active_bindings(episode, tmp_path):
    _, worktree, state = episode
    app = make_app(state, tmp_path, launcher=JobLauncher(worktree))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6", "f1")
        shown = help_text(app)
        # Every binding of the live console is listed with what it does, hidden ones too (t, 1-8, Esc).
        for binding in EpiscopeApp.BINDINGS:
            if not binding.id.startswith("replay."):
                assert squeezed(binding.tooltip) in squeezed(shown), binding.id
        assert "1 2 3 4 5 6 7 8" in shown and "in Versions" in shown  # the focused pane's own keys
        assert "play / pause" not in shown  # replay keys exist only in replay
        # Keys Textual binds itself (Tab, Shift+Tab, Ctrl+C) read like the console's own.
        from console.screens.base import ConsoleScreen

        for binding in ConsoleScreen.BINDINGS:
            assert squeezed(binding.tooltip) in squeezed(shown), binding.id
        assert "Focus Next" not in shown and "Copy selected text" not in shown
        # A refused action says why.
        assert squeezed("ABBA compare") in squeezed(shown)
        assert squeezed("[no commit since the base commit]") in squeezed(shown)
        await pilot.press("escape")


async def test_replay_help_lists_the_replay_keys(tmp_path):
    from console.episode.replay import Replay, episode_events

    campaign, _ = build_episode(tmp_path)
    workspace, events = episode_events(campaign)
    replay = Replay(events, campaign_root=str(workspace.campaign_root), campaign=workspace.name)
    app = EpiscopeApp(replay=replay, sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        shown = help_text(app)
        assert "replay mode" in shown
        for tooltip in ("play / pause", "faster / slower", "step to the next / previous event",
                        "jump to the next / previous phase start", "start / end of the episode"):
            assert squeezed(tooltip) in squeezed(shown)
        assert "[replay]" in shown  # job keys are dimmed, with the reason


def write_config(tmp_path, monkeypatch, text: str):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = tmp_path / "config" / "episcope" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def toasts(app) -> str:
    """What the notifications on screen say (white space squeezed out: toasts wrap)."""
    from textual.widgets._toast import Toast

    return squeezed("".join(texts(toast) for toast in app.screen.query(Toast))).replace("▌", "")


async def test_keymap_from_the_config_file_remaps_keys_footer_and_help(episode, tmp_path, monkeypatch):
    _, worktree, state = episode
    write_config(tmp_path, monkeypatch, '[keymap]\n"job.benchmark_run" = "B"\n"app.help" = "h"\n')
    launcher = JobLauncher(worktree, extra_flags=("--dry-run",), log_dir=tmp_path / "out")
    app = make_app(state, tmp_path, launcher=launcher)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("b")
        assert launcher.launched == []  # the default key is gone
        await pilot.press("B")
        assert [job.action for job in launcher.launched] == ["benchmark_run"]
        launcher.launched[0].process.wait(30)
        keys = {description: key for key, _, description, _ in app.query_one(KeyBar).shown}
        assert keys["bench"] == "B" and keys["help"] == "h"
        await pilot.press("f1")
        assert not type(app.screen).__name__ == "HelpScreen"  # f1 was remapped as well
        await pilot.press("h")
        shown = help_text(app)
        assert "\nB " in shown and "Benchmark run" in shown


async def test_a_bad_config_is_one_warning_and_default_keys(episode, tmp_path, monkeypatch):
    write_config(tmp_path, monkeypatch, "[keymap\nnot toml at all")
    app = make_app(episode[2], tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, lambda: "config.toml" in toasts(app))
        assert squeezed("default keys in use:") in toasts(app) and squeezed("config.toml not read (") in toasts(app)
        await pilot.press("f1")
        assert type(app.screen).__name__ == "HelpScreen"
    write_config(tmp_path, monkeypatch, '[keymap]\n"job.nonsense" = "z"\n"app.help" = 3\n"app.filter" = "F"\n')
    app = make_app(episode[2], tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, lambda: "ignored" in toasts(app))
        assert squeezed("keymap entries ignored: 'job.nonsense', 'app.help' (unknown binding id") in toasts(app)
        await pilot.press("6", "F")  # the good entry still applies
        assert app.query_one("#filter", Input).has_focus


async def test_a_number_key_on_an_empty_pane_says_why_and_enter_answers_for_that_pane(episode, tmp_path):
    app = make_app(replace(episode[2], alerts=()), tmp_path)
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kwargs: (said.append(message), notify(message, **kwargs))[1]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6", "7")
        await pilot.pause()
        assert said == ["nothing to focus in pane 7 (Alerts): no alerts"]
        assert type(app._focused_pane()).__name__ == "AlertsPane"  # not still on the versions pane
        await pilot.press("enter")
        await pilot.pause()
        assert type(app.screen).__name__ != "DetailScreen"  # the versions pane's detail did not open
        assert said[-1] == "Alerts: nothing to show (no alerts)"
        await pilot.press("tab")  # Tab passes empty panes by: it leaves this one for a pane with data
        assert type(app._focused_pane()).__name__ != "AlertsPane"


async def test_help_wraps_to_an_80_column_terminal_dimmed_keys_reasons_included(episode, tmp_path):
    _, worktree, state = episode
    app = make_app(state, tmp_path, readonly=True, readonly_reason="archive: read-only, nothing runs here")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        screen = app.screen
        body = screen.query_one(Static)
        assert body.region.right <= 80  # the box fits the terminal
        shown = squeezed(help_text(app))
        for row in screen.rows:
            assert squeezed(row.text) in shown  # each line whole: wrapped, not cut at the box's edge
            if row.why:
                assert squeezed(f"[{row.why}]") in shown


async def test_keys_typed_right_after_slash_reach_the_filter(episode, tmp_path):
    """A fast typist's keys arrive before the filter line is laid out: they are the filter's
    text, never actions of the table they were typed over (``a`` is ABBA's key)."""
    from textual import events

    app = make_app(episode[2], tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        for key, character in (("slash", "/"), ("v", "v"), ("2", "2")):
            app.post_message(events.Key(key, character))  # all queued before any is handled
        await pilot.pause()
        await pilot.pause()
        assert app.query_one("#filter", Input).value == "v2"
        assert [r[0] for r in rows(app, "#versions-table")] == ["v2"]
        await pilot.press("slash")  # in a text box a slash is text: the filter's ...
        assert app.query_one("#filter", Input).value == "v2/"
        await pilot.press("enter", "ctrl+p")
        await pilot.pause()
        await pilot.press("slash")  # ... and the command palette's
        palette = app.screen.query_one(Input)
        assert palette.id != "filter" and palette.value == "/"
