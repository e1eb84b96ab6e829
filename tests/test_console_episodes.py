"""The console's campaign history (``h``): every episode of a campaign AKA's own code wrote
(tests/fixtures/aka/), drawn from the state's records, each opened whole with Enter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from msgspec.structs import replace
from textual import events
from textual.widgets import DataTable

from console.app import EpiscopeApp
from console.episode.session import Session
from console.episode.state import EpisodeState
from console.episode.summary import status_document
from console.screens.detail import DetailScreen
from console.screens.episodes import EpisodesScreen, record_lines
from widgets.key_bar import KeyBar

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "aka"
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> EpisodeState:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        return Session(str(FIXTURES / "campaign_idle.tar.gz")).scan()


def make_app(state: EpisodeState) -> EpiscopeApp:
    # An archive opens read-only; the clock stands 30 s after its last event, no GPU is sampled.
    return EpiscopeApp(state=state, readonly=True, sample_gpu=False, clock=lambda: (state.last_event_at or 0.0) + 30)


def rows(screen: EpisodesScreen) -> list[list[str]]:
    table = screen.query_one(DataTable)
    return [[str(getattr(cell, "plain", cell)) for cell in table.get_row(key)] for key in table.rows]


async def settle(pilot, ready, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        await pilot.pause(0.05)


async def test_h_lists_every_episode_as_status_json_has_it(idle):
    episodes = status_document(idle, now=0.0)["episodes"]
    assert [(e["episode"], e["status"], e["accepted"], e["gate"], e["version"]) for e in episodes] == [
        (1, "candidate_ready", True, "PASS", 1), (2, "candidate_ready", False, "FAIL", 2)]
    app = make_app(idle)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EpisodesScreen)
        assert rows(screen) == [
            ["e0001", "archived", "v1", "candidate_ready", "yes", "PASS", "41.49", "explicit"],
            ["e0002", "archived", "v2", "candidate_ready", "no", "FAIL", "-63.68", "partial"],
        ]
        assert screen.query_one(DataTable).virtual_size.width <= 80  # every column fits 80 columns
        # Both keys at once, as a terminal delivers keys typed ahead: Enter opens the row Down chose.
        app.post_message(events.Key("down", None))
        app.post_message(events.Key("enter", "\r"))
        await settle(pilot, lambda: isinstance(app.screen, DetailScreen))
        detail = app.screen
        assert isinstance(detail, DetailScreen) and detail.title_text == "episode e0002 (archived)"
        lines = detail.text.splitlines()
        for line in ("gate: FAIL", "accepted: false", "improvement_pct: -63.68070995980847",
                     "phase_timing.reason_codes: orphan_phase_end", "promotion_commit: null",
                     f"verifications[0].directory: {episodes[1]['verifications'][0]['directory']}"):
            assert line in lines
        # The record whole: every field of episodes[], its profiles too (README).
        assert f"profiles: {episodes[1]['profiles'][0]}" in lines
        assert lines == list(record_lines(episodes[1]))
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("h")  # h (or Esc, q) leaves the history as it opened it
        await pilot.pause()
        assert type(app.screen).__name__ == "DashboardScreen"


async def test_h_is_in_the_key_bar_and_the_palette_at_80_columns(idle):
    app = make_app(idle)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        (entry,) = [shown for shown in bar.shown if shown[2] == "history"]
        assert entry[:2] == ("h", "h") and entry[3] is True
        assert " h history " in str(bar.render())
        (command,) = [c for c in app.palette_commands() if c[0] == "Campaign history: every episode (h)"]
        assert command[1] == "outcome, verdict and version of each"


async def test_the_history_follows_the_state_the_app_is_given(idle):
    first = replace(idle, episodes=idle.episodes[:1])
    app = make_app(first)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert [row[0] for row in rows(screen)] == ["e0001"]
        app.set_state(idle)  # the second episode ends while the history is open
        await settle(pilot, lambda: len(rows(screen)) == 2)
        assert [row[0] for row in rows(screen)] == ["e0001", "e0002"]
        assert "2 episodes" in str(screen.query_one("#episodes-title").render())


async def test_without_episodes_h_is_dimmed_and_says_why():
    app = make_app(EpisodeState(campaign="c", campaign_root="/c"))
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kwargs: (said.append(message), notify(message, **kwargs))[1]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        (entry,) = [shown for shown in app.screen.query_one(KeyBar).shown if shown[2] == "history"]
        assert entry[3] is False  # dimmed
        await pilot.press("h")
        await pilot.pause()
        assert type(app.screen).__name__ == "DashboardScreen"
        assert said[-1] == "episodes: not now (no episode in this campaign yet)"
        (command,) = [c for c in app.palette_commands() if c[0] == "Campaign history: every episode (h)"]
        assert command[1] == "no episode in this campaign yet"


async def test_agent_written_text_is_shown_as_text(idle):
    """An outcome is agent-written: markup stays text, control characters are made visible."""
    record = replace(idle.episodes[0], status="[b]done[/b]\x1b[2J\u202e")
    app = make_app(replace(idle, episodes=(record,)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h")
        await pilot.pause()
        assert rows(app.screen)[0][3] == "[b]done[/b]␛[2J\\u202e"
        await pilot.press("enter")
        await pilot.pause()
        assert "status: [b]done[/b]␛[2J\\u202e" in app.screen.text.splitlines()


def test_every_screen_binding_has_its_own_id():
    ids = list(EpiscopeApp().binding_ids())
    assert "app.episodes" in ids and "episodes.back" in ids and "episodes.detail" in ids
    assert len(ids) == len(set(ids))


def test_the_history_at_80x24(snap_compare, idle):
    async def open_it(pilot):
        pilot.app.animation_level = "none"
        await pilot.press("h")
        await pilot.pause()

    assert snap_compare(make_app(idle), terminal_size=(80, 24), run_before=open_it)
