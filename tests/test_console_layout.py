"""The dashboard's layout on small terminals and what a newcomer's first keys find there:
data rows before empty panes, the dominant kernel selected, the detail view for cut text,
one colour per phase, ticking job times, a scanning first paint, and ``t`` in sight."""

from __future__ import annotations

import shutil
import threading
from datetime import datetime
from pathlib import Path

import pytest
from msgspec.structs import replace
from textual.widgets import DataTable, Static, TextArea

from bundled_example import bundled_episode_state, bundled_state
from console.app import EpiscopeApp
from console.episode.kernels import dominant_kernel, job_elapsed, profile_shape
from console.episode.session import Session
from console.episode.state import Alert, EpisodeState
from console.episode.summary import status_document
from console.episode.workspace import resolve_workspace
from console.formats.job_record import job_record_from_obj
from console.screens.detail import DetailScreen
from console_fixture import build_episode
from widgets.header import EpisodeHeader
from widgets.key_bar import KeyBar
from widgets.pane import SCANNING, Pane, PaneRow
from widgets.phase_timeline import OTHER_PHASE_STYLE, PHASE_STYLES, PhaseTimeline

pytestmark = pytest.mark.anyio
PHASES = ("profile", "research", "planning", "implementation", "correctness", "benchmark", "recording")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return bundled_state(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def first_episode(tmp_path_factory):
    """The example's first episode: the whole funnel (16 profiles) and 16 jobs."""
    return bundled_episode_state(tmp_path_factory.mktemp("cache"), 1)


INPUT_GENERATOR_SURVEY = Path(__file__).parent / "fixtures" / "profiling" / "input_generator" / "survey"


@pytest.fixture
def with_input_generator(tmp_path):
    """An episode whose survey of shape 0 is a real H200 survey taken before the driver's
    profiled range: the input generator init_curand runs longer than the kernel."""
    campaign, worktree = build_episode(tmp_path)
    shutil.copytree(INPUT_GENERATOR_SURVEY, worktree / "profiles" / "episode_1" / "survey" / "shape-0")
    return Session(campaign).scan()


def example_app(state: EpisodeState, clock=None) -> EpiscopeApp:
    return EpiscopeApp(state=state, readonly=True, sample_gpu=False,
                       clock=clock or (lambda: state.last_event_at + 30))


def shown(widget) -> str:
    """What a widget shows on screen, as plain text."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.size.region))


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_funnel_and_jobs_show_data_rows_and_empty_panes_fold(first_episode, size):
    example = first_episode
    app = example_app(example)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for selector, first in (("#funnel-table", "row_softmax_naive"), ("#jobs-table", example.jobs[0].job_id)):
            table = app.query_one(selector, DataTable)
            assert table.row_count > 0 and table.size.height >= 4  # the header and at least three data rows
            assert first in shown(table)
        gpu, unreadable, versions = (app.query_one(s, Pane) for s in ("#gpu", "#unreadable", "#versions"))
        assert gpu.empty and unreadable.empty and not versions.empty  # no GPU sampled, every record read
        assert shown(unreadable.query_one(".pane-note", Static)).startswith("all reco")  # cut at 80 columns
        assert unreadable.size.width < versions.size.width  # the empty pane gives its width away
        assert not any(row.folded for row in app.query(PaneRow))  # every row has data


async def test_a_row_of_empty_panes_folds_to_one_line(example):
    quiet = replace(example, alerts=(), unreadable=(), versions=(), incumbent_curve=())
    app = example_app(quiet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        low = app.query_one("#row-low", PaneRow)
        assert low.folded and low.size.height == 3
        assert app.query_one("#funnel-table", DataTable).size.height >= 6  # the funnel took the height


async def test_the_dominant_kernel_is_selected_not_the_input_generator(with_input_generator):
    example = with_input_generator
    assert example.dominant_kernel == "row_softmax_naive"
    document = status_document(example)
    assert document["dominant_kernel"] == "row_softmax_naive"
    assert "0" in {p["shape"] for p in document["profiles"]}
    app = example_app(example)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.query_one("#funnel-table", DataTable)
        first = [str(getattr(cell, "plain", cell)) for cell in table.get_row_at(0)]
        assert first[:2] == ["init_curand", "0"]  # the longest survey kernel only fills the inputs
        assert app.selected_kernel() == "row_softmax_naive"
        await pilot.press("2", "down")
        chosen = table.cursor_row
        app.set_state(replace(example, event_count=example.event_count + 1))  # a new state keeps the operator's row
        await pilot.pause(0.3)
        assert table.cursor_row == chosen


def test_dominant_kernel_and_shape_rules(with_input_generator):
    assert dominant_kernel(()) is None
    survey = next(p for p in with_input_generator.profiles if p.dir.endswith("survey/shape-0"))
    assert survey.kernels[0].name == "init_curand" and survey.dominant_kernel == "row_softmax_naive"
    assert dominant_kernel([survey]) == "row_softmax_naive"  # a name no profiler picks is never dominant
    assert dominant_kernel([replace(survey, dominant_kernel=None)]) is None
    assert profile_shape("/w/profiles/episode_1/sol/shape-12") == "12" and profile_shape("/w/profiles/x") is None


def test_every_phase_has_its_own_colour():
    assert set(PHASE_STYLES) == set(PHASES)
    colours = [*PHASE_STYLES.values(), OTHER_PHASE_STYLE]
    assert len(set(colours)) == len(colours)


async def test_enter_shows_cut_text_whole_as_plain_text(example):
    hostile = "[bold red]not markup[/] \x1b]0;owned\x07 " + "x" * 300 + " END"
    state = replace(example, alerts=(Alert("stale_profile", "warning", hostile, "/a/very/long/path"),))
    app = example_app(state)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        text = app.screen.query_one(TextArea).text
        assert "[bold red]not markup[/]" in text and "␛]0;owned␇" in text and text.count("x") >= 300
        assert "END" in text and "/a/very/long/path" in text and "\x1b" not in text
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)
        await pilot.press("4", "enter")  # a job: its whole log
        await pilot.pause()
        assert example.jobs[0].job_id in app.screen.title_text and "── stderr" in app.screen.query_one(TextArea).text
        await pilot.press("q")  # closes the view, does not quit
        assert not isinstance(app.screen, DetailScreen) and app.is_running


async def test_a_running_job_shows_ticking_elapsed_time(example):
    job = job_record_from_obj({**example.jobs[0].raw, "state": "running", "finished_at": None,
                               "started_at": "2026-11-29T08:00:00+00:00"})
    started = 1795939200.0  # 2026-11-29T08:00:00Z
    assert job_elapsed(job, started + 65) == 65.0 and job_elapsed(job, None) is None
    now = [started + 65]
    app = example_app(replace(example, jobs=(job,)), clock=lambda: now[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.query_one("#jobs-table", DataTable)
        assert str(table.get_row_at(0)[4]) == "1m05s"
        now[0] += 60
        await pilot.pause(1.3)  # the app's clock ticks once a second
        assert str(table.get_row_at(0)[4]) == "2m05s"


async def test_the_first_paint_says_scanning(tmp_path):
    campaign, _ = build_episode(tmp_path)
    assert EpiscopeApp(session=Session(campaign), sample_gpu=False).episode_state.scanning
    app = EpiscopeApp(state=EpisodeState(campaign="demo", scanning=True), sample_gpu=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "scanning" in shown(app.query_one(EpisodeHeader))
        for pane in app.query(Pane):
            assert pane.empty and SCANNING in shown(pane.query_one(".pane-note", Static))


async def test_given_a_workspace_the_console_opens_its_session_after_the_first_frame(tmp_path):
    """What ``episcope watch`` does: the first frame says scanning, then the session is opened
    (loading the ingest and the reducer) in the scan's thread, once."""
    campaign, _ = build_episode(tmp_path)
    workspace = resolve_workspace(campaign)
    opened: list[bool] = []

    def open_session() -> Session:
        opened.append(threading.current_thread() is not threading.main_thread())
        return Session(campaign, workspace=workspace)

    app = EpiscopeApp(workspace=workspace, open_session=open_session, sample_gpu=False)
    assert app.episode_state.scanning and app.episode_state.campaign == workspace.name and opened == []
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            if app.scanned and not app.episode_state.scanning:
                break
            await pilot.pause(0.05)
        assert opened == [True]
        assert app.session is not None and app.episode_state.event_count > 0
        assert "scanning" not in shown(app.query_one(EpisodeHeader))
        assert app.focused is not None  # the first focus went to a pane once one had a body


def test_the_files_are_scanned_first_and_the_git_facts_come_with_the_next_refresh(tmp_path):
    """The console draws what the files say before git runs (``Session.scan(git=False)``);
    the refresh after that frame brings the same git facts a whole scan gives."""
    campaign, _ = build_episode(tmp_path)
    files = Session(campaign)
    state = files.scan(git=False)
    assert state.event_count > 0 and state.versions and state.git is None
    files.refresh(None)
    whole = Session(campaign).scan()
    assert whole.git is not None and whole.git.head
    assert files.state.git is not None and files.state.git.head == whole.git.head
    assert files.state.git.branch == whole.git.branch and files.state.versions == whole.versions


async def test_t_is_in_the_key_bar_and_the_palette_at_80_columns(example):
    app = example_app(example)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert " t timeline " in shown(app.query_one(KeyBar))
        titles = [title for title, _, _ in app.palette_commands()]
        assert any("timeline" in title.lower() for title in titles)
        assert any(title.startswith("Show in full") for title in titles)


async def test_the_abba_verdict_leads_at_80_columns(example):
    """The example's last verification was rejected: at 80x24 the gate is on the pane's first
    line and the verdict's reason is a line of its own, not joined by a visible newline mark."""
    app = example_app(example)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = shown(app.query_one("#abba-body", Static)).splitlines()
        assert lines[0].startswith("FAIL -48.20%  ABBA a3762")
        assert lines[1].lstrip().startswith("improvement -48.197% doe") and "␊" not in "".join(lines)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (200, 50)])
async def test_job_columns_grow_as_a_job_moves_on(example, size):
    """A job first drawn queued (no time yet) widens its columns when it runs and ends:
    every cell fits its column, whatever the first row held."""
    raw = {**example.jobs[0].raw, "job_id": "20261201T174811Z-fe7f3d"}
    started, finished = "2026-12-01T17:48:11+00:00", "2026-12-01T17:48:23.100000+00:00"
    stages = [
        {**raw, "state": "queued", "started_at": None, "finished_at": None, "exit_code": None, "result_code": None},
        {**raw, "state": "running", "started_at": started, "finished_at": None, "exit_code": None, "result_code": None},
        {**raw, "state": "cancelled", "started_at": started, "finished_at": finished, "exit_code": -15, "result_code": 1},
    ]
    now = datetime.fromisoformat(started).timestamp() + 0.5
    app = example_app(replace(example, jobs=(job_record_from_obj(stages[0]),)), clock=lambda: now)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table = app.query_one("#jobs-table", DataTable)
        for stage in stages[1:]:
            app.set_state(replace(example, jobs=(job_record_from_obj(stage),)))
            await pilot.pause(0.3)
            cells = table.get_row_at(0)
            for column, cell in zip(table.ordered_columns, cells):
                assert column.content_width >= len(str(cell)), (column.label, str(cell))
        row = [str(cell) for cell in table.get_row_at(0)]
        assert (row[1], row[4], row[5]) == ("cancelled", "12.1s", "-15")  # exit: the command's, as status says
        assert "cancelled" in shown(table)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_phase_totals_lead_with_the_largest_and_a_cut_line_says_so(example, size):
    walls = [total.wall_seconds for total in example.phase_totals.values()]
    assert walls == sorted(walls, reverse=True)  # the state's order, which status prints too
    assert list(status_document(example)["phases"]) == list(example.phase_totals)
    app = example_app(example)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        timeline = app.query_one(PhaseTimeline)
        lines = shown(timeline).splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("totals"))
        totals = [line.rstrip() for line in lines[start:] if line.strip()]
        assert totals[0].startswith("totals profile 24.7s ×2  correctness 3.0s ×1")
        assert totals[-1].endswith("…")  # orchestration did not fit (the totals may wrap first)


async def test_help_shows_the_header_whole_where_80_columns_cut_it(example):
    app = example_app(example)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        header = shown(app.query_one(EpisodeHeader))
        assert "supervisor candi" in header and "candidate_ready" not in header  # cut at 80 columns
        await pilot.press("question_mark")
        await pilot.pause()
        text = "\n".join(shown(static) for static in app.screen.query(Static))
        assert "read-only, actions disabled" in text and "live mode" not in text
        assert "candidate_ready" in " ".join(text.split())  # the header's lines, wrapped, not cut


async def test_enter_typed_ahead_opens_the_row_the_cursor_moved_to(example):
    """Down then Enter arriving together (keys typed ahead): the detail is of the row Down
    chose, not the one the cursor was on when Enter arrived."""
    from textual import events

    app = example_app(example)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        table = app.query_one("#versions-table", DataTable)
        assert table.cursor_row == 1 and table.row_count == 2  # the newest version is selected first
        app.post_message(events.Key("up", None))
        app.post_message(events.Key("enter", "\r"))
        for _ in range(50):
            await pilot.pause(0.02)
            if isinstance(app.screen, DetailScreen):
                break
        assert isinstance(app.screen, DetailScreen) and app.screen.title_text == "version v0"


@pytest.mark.parametrize("number", ["6", "4"])
async def test_a_pane_key_typed_ahead_moves_the_focus_before_the_keys_after_it(example, number):
    """A pane's number key, Down and Enter arriving together (as a terminal delivers keys
    typed ahead): Down moves the cursor of the pane the number chose and Enter opens its
    row, not the pane that had the focus before."""
    from textual import events

    expected = {"6": "version v1", "4": f"job {example.jobs[1].job_id}"}[number]  # v1 is the newest: Down stays
    app = example_app(example)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.focused, PhaseTimeline)
        for key, character in ((number, number), ("down", None), ("enter", "\r")):
            app.post_message(events.Key(key, character))
        for _ in range(50):
            await pilot.pause(0.02)
            if isinstance(app.screen, DetailScreen):
                break
        assert isinstance(app.screen, DetailScreen) and app.screen.title_text == expected


async def test_a_console_opened_on_a_workspace_gives_the_first_focus_to_the_phases_pane(tmp_path):
    """While the workspace is scanned every pane is empty; the first focus waits for data
    and goes to pane 1, not to the first widget that can take the focus (the ABBA pane)."""
    campaign, _ = build_episode(tmp_path)
    workspace = resolve_workspace(campaign)
    app = EpiscopeApp(workspace=workspace, open_session=lambda: Session(campaign, workspace=workspace),
                      sample_gpu=False)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            if app.scanned and not app.episode_state.scanning and app.focused is not None:
                break
            await pilot.pause(0.05)
        assert isinstance(app.focused, PhaseTimeline)
