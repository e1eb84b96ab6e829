"""Sandbox work in the campaign view: a job record counts for the episode whose worktree holds
it whichever path opened the campaign, the console's Jobs pane lists the current episode's,
and where only telemetry traced the work (AKA writes no job records) the header, the Jobs
pane and ``status`` give one count and the pane lists the traced operations."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from bundled_example import ARCHIVE, bundled_state, episode_worktree
from console.app import EpiscopeApp
from console.episode.session import Session
from console.episode.state import EpisodeState
from console.episode.summary import running_jobs, status_document
from widgets.common import seconds
from widgets.header import EpisodeHeader
from widgets.jobs_pane import JobsPane

AKA = Path(__file__).resolve().parent / "fixtures" / "aka"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _scan(path: Path | str, cache: Path) -> EpisodeState:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        return Session(str(path)).scan()


@pytest.fixture(scope="module")
def openings(tmp_path_factory) -> dict[str, EpisodeState]:
    """The bundled example opened four ways, all in one unpacked copy."""
    cache = tmp_path_factory.mktemp("cache")
    campaign = Path(bundled_state(cache).campaign_root)
    return {
        "archive": _scan(ARCHIVE, cache),
        "campaign": _scan(campaign, cache),
        "e0001": _scan(episode_worktree(cache, 1), cache),
        "e0002": _scan(episode_worktree(cache, 2), cache),
    }


def test_an_episode_s_sandbox_is_the_same_whichever_path_opened_the_campaign(openings):
    entries = {name: {e["episode"]: e["sandbox"] for e in status_document(state, now=0.0)["episodes"]}
               for name, state in openings.items()}
    assert entries["archive"] == entries["campaign"] == entries["e0001"] == entries["e0002"]
    sandbox = entries["archive"]
    # every job record of each worktree, each counted once (the record stands for its operation)
    assert sandbox[1]["jobs"] == {"succeeded": 16} and sandbox[1]["succeeded"] == 16
    assert sandbox[2]["jobs"] == {"succeeded": 5} and sandbox[2]["succeeded"] == 5
    assert all(s["running"] == s["failed"] == s["cancelled"] == 0 for s in sandbox.values())


def test_the_jobs_pane_lists_the_current_episode_s_jobs(openings):
    """The Jobs pane (``EpisodeState.jobs``, status's ``jobs``) holds the current episode's job
    records: the worktree opened, or the archive's last episode; another episode's are counted
    in its own ``episodes[]`` entry only."""
    for name, number in (("archive", 2), ("campaign", 2), ("e0001", 1), ("e0002", 2)):
        state = openings[name]
        assert state.current_episode is not None and state.current_episode.episode == number, name
        workspaces = {(job.raw.get("workspace") or "").rsplit("/", 1)[-1][:5] for job in state.jobs}
        assert workspaces == {f"e{number:04d}"}, name
        assert len(state.jobs) == (16 if number == 1 else 5), name
        assert state.traced_operations == ()  # every traced operation has its job record
        assert len(status_document(state, now=0.0)["jobs"]) == len(state.jobs)


@pytest.fixture(scope="module")
def inflight(tmp_path_factory) -> EpisodeState:
    return _scan(AKA / "campaign_inflight.tar.gz", tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> EpisodeState:
    return _scan(AKA / "campaign_idle.tar.gz", tmp_path_factory.mktemp("cache"))


def test_aka_sandbox_work_is_listed_from_its_telemetry(inflight, idle):
    for state, running, succeeded in ((inflight, 1, 2), (idle, 0, 3)):
        doc = status_document(state, now=0.0)
        assert state.jobs == () and doc["jobs"] == []  # AKA writes no job records
        assert (doc["sandbox"]["running"], doc["sandbox"]["succeeded"]) == (running, succeeded)
        assert running_jobs(state) == doc["sandbox"]["running"]
        traced = doc["traced_operations"]
        assert len(traced) == running + succeeded == len(state.sandbox_operations)
        assert [t["state"] for t in traced].count("running") == running
        starts = [t["started_at"] for t in traced]
        assert starts == sorted(starts, reverse=True)  # newest first
        for entry in traced:
            assert entry["operation_id"].startswith("sandbox-") and entry["category"] in {"profile", "correctness", "benchmark"}
            if entry["state"] == "succeeded":
                assert entry["duration_seconds"] > 0 and entry["elapsed_seconds"] == entry["duration_seconds"]
                assert entry["exit_status"] == 0
            else:
                assert entry["duration_seconds"] is None
        ended = sum(t["duration_seconds"] for t in traced if t["duration_seconds"] is not None)
        assert ended == pytest.approx(doc["sandbox"]["seconds"])


async def test_the_header_and_jobs_pane_agree_with_status_on_an_aka_campaign(inflight):
    now = inflight.last_event_at + 30
    doc = status_document(inflight, now=now)
    app = EpiscopeApp(state=inflight, readonly=True, sample_gpu=False, clock=lambda: now)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert doc["sandbox"]["running"] == 1 and "jobs 1/4" in app.query_one(EpisodeHeader).lines.plain
        pane = app.query_one(JobsPane)
        assert not pane.empty and pane.border_subtitle == "1/4 slots"
        table = app.query_one("#jobs-table", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        traced = doc["traced_operations"]
        assert [(row[0], row[3]) for row in rows] == [(t["operation_id"], "traced") for t in traced]
        assert [(row[1], row[2], row[5]) for row in rows] == [
            (t["state"], t["category"], "N/A" if t["exit_status"] is None else str(t["exit_status"])) for t in traced]
        on_screen = "\n".join(strip.text for strip in table.render_lines(table.size.region))
        assert "sandbox-32253-2671637715776  running" in on_screen  # the state is not cut at 80 columns
        # the running one's time to the app's clock, an ended one's as the telemetry states it
        assert [row[4] for row in rows] == [seconds(t["elapsed_seconds"]) for t in traced]
        assert traced[0]["elapsed_seconds"] == pytest.approx(now - traced[0]["started_at"])
        await pilot.press("4")
        await pilot.pause()
        title, text = pane.full_text() or ("", "")
        assert title == f"traced operation {doc['traced_operations'][0]['operation_id']}"
        assert "state running" in text and "category benchmark" in text and "no job record" in text


def test_status_of_an_archive_counts_running_time_to_its_last_event(tmp_path):
    """The AKA in-flight campaign's benchmark operation was running when the campaign was
    packed: status on the archive counts its time to the archive's last event (the console's
    archive clock), not to the wall clock of whoever reads it days later."""
    import json
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(AKA / "campaign_inflight.tar.gz")],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    (running,) = [op for op in document["traced_operations"] if op["state"] == "running"]
    assert running["elapsed_seconds"] is not None and 0.0 <= running["elapsed_seconds"] < 60.0


def test_a_long_campaign_lists_its_newest_traced_operations_and_counts_them_all(tmp_path):
    """A snapshot lists the newest TRACED_SHOWN operations no job record names (a long
    campaign traces tens of thousands: listing all made each new event cost a sort of them
    all); the sandbox counts still count every one."""
    import sys

    from console.episode.episodes import TRACED_SHOWN

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from workloads import write_telemetry_workspace

    write_telemetry_workspace(str(tmp_path), 3000)
    state = Session(str(tmp_path)).scan()
    traced = state.traced_operations
    assert len(traced) == TRACED_SHOWN < len(state.sandbox_operations)
    started = [op.started_at for op in traced]
    assert started == sorted(started, reverse=True)
    assert started[0] == max(op.started_at for op in state.sandbox_operations)  # the newest comes first
    document = status_document(state, now=0.0)
    assert len(document["traced_operations"]) == TRACED_SHOWN
    assert document["sandbox"]["succeeded"] == len(state.sandbox_operations)
