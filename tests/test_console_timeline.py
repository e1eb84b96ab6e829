"""The intra-kernel timeline screen, the keys of the screens over the dashboard, and the GPU
sampler (N/A without a GPU)."""

from __future__ import annotations

import threading

import pytest
from textual.widgets import DataTable, Static

from console.app import EpiscopeApp
from console.episode import events as ev
from console.episode.replay import Recorder, Replay, load_recording, new_recording_path
from console.episode.session import Session
from console.episode.summary import status_document
from console.gpu.sampler import GpuReading, GpuSampler
from console.screens.dashboard import DashboardScreen
from console.screens.diff import DiffScreen
from console.screens.timeline import TimelineScreen
from console_fixture import build_episode, write_receipt
from widgets.gpu_pane import reading_table
from widgets.timeline_view import OwnerLanes

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def decoded(pilot, screen: TimelineScreen) -> None:
    """Wait for the worker that decodes the capture to report back."""
    for _ in range(200):
        if screen.view is not None or screen.error is not None:
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("the capture never finished decoding")


async def test_timeline_key_opens_lanes_and_site_intervals_and_exports(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    campaign, worktree = build_episode(tmp_path / "ws")
    recorder = Recorder(new_recording_path("demo", campaign), campaign_root=str(campaign), campaign="demo",
                        worktree=str(worktree))
    app = EpiscopeApp(session=Session(campaign, on_event=recorder.record), sample_gpu=False, recorder=recorder)
    async with app.run_test(size=(150, 46)) as pilot:
        for _ in range(100):
            if app.receipts():
                break
            await pilot.pause(0.1)
        await pilot.press("t")
        screen = app.screen
        await decoded(pilot, screen)
        assert isinstance(screen, TimelineScreen) and screen.capture is not None
        lanes = screen.query_one(OwnerLanes)
        assert len(lanes.lanes) == 4  # 2 CTAs x 2 warp writers
        text = lanes.render().plain
        assert "SM0" in text and "cta(1,0,0)" in text and "█" in text
        # The fixture's receipt states no sites: the screen's decode hands them to the state,
        # and the table draws them from there.
        table = screen.query_one("#sites-table", DataTable)
        for _ in range(100):
            if table.row_count:
                break
            await pilot.pause(0.05)
        receipt = screen.receipt(app.episode_state)
        assert receipt is not None and receipt.sites_from == "decoded" and receipt.sites_unknown is None
        assert [(s.name, s.records, s.ranges, s.median_ns) for s in receipt.sites] == [("load", 8, 4, 400.0),
                                                                                       ("store", 8, 4, 400.0)]
        assert status_document(app.session.state)["timeline"][0]["sites"][0]["median_ns"] == 400.0
        site_rows = {str(table.get_row(k)[0]): [str(cell) for cell in table.get_row(k)] for k in table.rows}
        assert set(site_rows) == {"load", "store"}
        assert site_rows["load"][3] == "4" and site_rows["load"][5] == "0.400"  # 400 ns ranges, in µs
        # ... and are recorded: a replay of the session has them as the receipt's sites
        _, events, problems = load_recording(recorder.path)
        assert problems == [] and [e.kind for e in events].count(ev.TIMELINE_SITES) == 1
        # ... on the episode's clock: at its newest event, not at the key press (which made a
        # recording's span run to the hour the operator looked)
        (sites_event,) = [e for e in events if e.kind == ev.TIMELINE_SITES]
        assert sites_event.at == max(e.at for e in events if e.kind != ev.TIMELINE_SITES and e.at is not None)
        replay = Replay(events)
        replay.seek_index(replay.total)
        assert screen.receipt(replay.state()) == receipt
        await pilot.press("e")
        exports = tmp_path / "state" / "episcope" / "exports"
        for _ in range(100):  # the trace is written in a worker
            if exports.is_dir() and any(p.suffix == ".perfetto-trace" for p in exports.iterdir()):
                break
            await pilot.pause(0.05)
        exported = list(exports.iterdir())
        assert len(exported) == 1 and exported[0].stat().st_size > 0
        assert not any(p.is_relative_to(campaign) or p.is_relative_to(worktree) for p in exported)
        await pilot.press("escape")
        assert not isinstance(app.screen, TimelineScreen)


class GatedSession(Session):
    """The real session, whose git refresh (the second half of the console's start-up scan)
    waits until ``gate`` is set: the console is still scanning while it waits."""

    def __init__(self, path, gate: threading.Event) -> None:
        super().__init__(path)
        self.gate = gate

    def refresh(self, changed=None):
        self.gate.wait(30)
        return super().refresh(changed)


def site_names(screen: TimelineScreen) -> list[str]:
    table = screen.query_one("#sites-table", DataTable)
    return [str(table.get_row(key)[0]) for key in table.rows]


async def test_sites_decoded_during_the_start_up_scan_are_folded_once_it_is_in(tmp_path):
    campaign, _ = build_episode(tmp_path / "ws")
    gate = threading.Event()
    app = EpiscopeApp(session=GatedSession(campaign, gate), sample_gpu=False)
    try:
        async with app.run_test(size=(150, 46)) as pilot:
            for _ in range(100):  # the files are read and drawn; git's half of the scan waits
                if app.receipts():
                    break
                await pilot.pause(0.1)
            assert app.receipts() and not app.scanned
            await pilot.press("t")
            screen = app.screen
            await decoded(pilot, screen)
            await pilot.pause(0.2)
            assert isinstance(screen, TimelineScreen) and site_names(screen) == []
            gate.set()
            for _ in range(100):
                if site_names(screen):
                    break
                await pilot.pause(0.05)
            assert app.scanned and site_names(screen) == ["load", "store"]
            assert screen.receipt(app.session.state).sites_from == "decoded"
    finally:
        gate.set()


async def test_a_replay_says_why_the_site_table_is_empty(tmp_path):
    campaign, _ = build_episode(tmp_path / "ws")
    replay = Replay(list(Session(campaign).scan_events(final=True)))
    replay.seek_index(replay.total)
    app = EpiscopeApp(replay=replay, readonly=True, sample_gpu=False)
    async with app.run_test(size=(150, 46)) as pilot:
        await pilot.pause()
        (receipt,) = app.receipts()
        app.open_timeline(receipt)
        await pilot.pause()
        screen = app.screen
        await decoded(pilot, screen)
        assert isinstance(screen, TimelineScreen) and screen.capture is not None and site_names(screen) == []
        note = str(screen.query_one("#sites-note", Static).render())
        assert "this replay holds no per-site statistics" in note
        assert "decodes them" not in note  # the receipt's own reason promises what a replay does not do
        assert screen.receipt(app.episode_state).sites is None  # nothing was folded into the replay


async def test_a_rejected_capture_is_explained_not_fatal(tmp_path):
    receipt = write_receipt(tmp_path / "capture")
    raw = bytearray((tmp_path / "capture" / "raw.bin").read_bytes())
    raw[28] = 1  # status bit: overflow
    (tmp_path / "capture" / "raw.bin").write_bytes(bytes(raw))
    app = EpiscopeApp(sample_gpu=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_timeline(str(receipt))
        await pilot.pause()
        await decoded(pilot, app.screen)
        message = "\n".join(s.text for s in app.screen.query_one("#timeline-error", Static).render_lines(
            app.screen.query_one("#timeline-error", Static).size.region))
        assert "overflow" in message
        assert app.screen.check_action("export", ()) is False


def test_gpu_sampler_never_raises_and_reports_na_without_nvml():
    sampler = GpuSampler()
    reading = sampler.sample()
    sampler.close()
    assert isinstance(reading, GpuReading)
    if not reading.gpus:
        assert reading.unavailable
        assert "N/A" in reading_table(reading).plain
    else:
        assert all(g.index >= 0 for g in reading.gpus)


async def test_screens_over_the_dashboard_leave_on_q_and_offer_no_pane_keys(tmp_path):
    """The timeline and diff screens have no panes: 1-8 and / are neither offered (footer,
    help) nor answered there, and q goes back to the dashboard on both, as Esc does."""
    campaign, _ = build_episode(tmp_path / "ws")
    app = EpiscopeApp(state=Session(campaign).scan(), readonly=True, sample_gpu=False)
    async with app.run_test(size=(150, 46)) as pilot:
        await pilot.pause()
        offered = {binding.binding.action for binding in app.screen.active_bindings.values()}
        assert {"focus_pane(7)", "filter"} <= offered  # the dashboard's
        for key, screen_type in (("t", TimelineScreen), ("D", DiffScreen)):
            await pilot.press(key)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, screen_type)
            if isinstance(screen, TimelineScreen):
                await decoded(pilot, screen)
                depth = len(app.screen_stack)
                await pilot.press("t")  # the open timeline again: nothing stacks on it
                await pilot.pause()
                assert app.screen is screen and len(app.screen_stack) == depth
            actions = {binding.binding.action for binding in screen.active_bindings.values()}
            assert not any(a.startswith("focus_pane") for a in actions) and "filter" not in actions
            assert not any(title.startswith("Go to pane") for title, _, _ in app.palette_commands())
            await pilot.press("f1")
            help_body = app.screen.query_one(Static)
            shown = "\n".join(strip.text for strip in help_body.render_lines(help_body.size.region))
            assert "move to that pane" not in shown and "filter the focused table" not in shown
            assert "back to the dashboard" in shown
            await pilot.press("escape")  # closes help
            await pilot.press("1", "slash")
            assert app.screen is screen
            await pilot.press("q")
            await pilot.pause()
            assert app.is_running and isinstance(app.screen, DashboardScreen)
