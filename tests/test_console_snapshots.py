"""SVG snapshots of the main screens at a fixed size, from a deterministic episode, and of the
bundled example at the sizes the layout must hold: 80x24, 100x30 and 200x50."""

from __future__ import annotations

import json

import pytest

from bundled_example import bundled_state
from console.app import EpiscopeApp
from console.episode import events as ev
from console.episode.events import Event
from console.episode.reducer import Reducer
from console.episode.replay import Replay
from console.episode.state import EpisodeState
from console.formats.abba import parse_verdict
from console.formats.job_record import job_record_from_obj
from console.formats.memory import parse_memory_version
from console.formats.problems import Unreadable
from console.formats.telemetry import record_epoch
from console.formats.timeline import read_timeline_receipt
from console.timeline.capture_view import capture_view
from console.timeline.summary import site_statistics
from console_fixture import write_receipt
from spine_helpers import tele, telemetry_record

SIZE = (140, 44)
ROOT = "/episode"
RUNTIME = f"{ROOT}/.atrex_long_horizon"


def episode_events() -> list[Event]:
    events = []
    records = [
        tele("phase_started", 0.0, phase="research"),
        tele("source_read", 5.0, source_kind="gpu_wiki", reference="wiki/hopper.md"),
        tele("phase_completed", 20.0, phase="research"),
        tele("phase_started", 20.0, phase="implementation"),
        tele("sandbox_operation_started", 25.0, operation_id="sandbox-1-1", category="benchmark"),
        tele("sandbox_operation_completed", 40.0, operation_id="sandbox-1-1", category="benchmark",
             duration_seconds=15.0, status="succeeded", exit_status=0),
        tele("phase_completed", 60.0, phase="benchmark"),
        tele("phase_started", 60.0, phase="profile"),
        tele("phase_completed", 80.0, phase="profile"),
        tele("phase_started", 0.0, phase="planning", attempt="invocation-2"),
        tele("phase_completed", 30.0, phase="planning", attempt="invocation-2"),
        tele("phase_started", 30.0, phase="correctness", attempt="invocation-2"),
    ]
    for offset, obj in enumerate(records):
        record = telemetry_record(obj)
        events.append(Event(ev.TELEMETRY, f"{RUNTIME}/telemetry.jsonl", offset * 300, record_epoch(record.timestamp), record))
    base = events[0].at
    events.append(Event(ev.UNREADABLE, f"{RUNTIME}/telemetry.jsonl", 3600, base + 61,
                        Unreadable(f"{RUNTIME}/telemetry.jsonl", 3600, "invalid JSON: unexpected character")))
    for version, latency, gate in ((0, 100.0, "PASS"), (1, 90.0, "PASS"), (2, 80.5, "PASS"), (3, 85.0, "FAIL")):
        memory = parse_memory_version({
            "version": f"v{version}", "performance": {"latency_us_geomean": latency, "measurement_status": "complete",
                                                      "measurement_subject": "candidate"},
            "correctness": {"status": gate}, "quality_gate": {"result": gate}, "git_commit_hash": f"{version:040x}"})
        events.append(Event(ev.MEMORY_VERSION, f"{ROOT}/memory/v{version}.json", None, base + 10 * version, memory))
    for number, state, category in ((1, "succeeded", "benchmark"), (2, "failed", "correctness"), (3, "running", "profile")):
        job = job_record_from_obj({
            "schema": "episcope-sandbox-job/v1", "job_id": f"job-000{number}", "state": state, "argv": ["python", "test_kernel.py"],
            "kind": "run", "workspace": ROOT, "created_at": f"2026-11-29T06:0{number}:00+00:00",
            "started_at": f"2026-11-29T06:0{number}:01+00:00",
            "finished_at": None if state == "running" else f"2026-11-29T06:0{number}:31+00:00",
            "category": category, "slot": number - 1, "exit_code": {"succeeded": 0, "failed": 2}.get(state),
            "result_code": {"succeeded": 0, "failed": 1}.get(state)})
        events.append(Event(ev.JOB, f"{RUNTIME}/sandbox/job-000{number}/job.json", None, base + 40 + number, job))
    runs = [{"revision": r, "repeat": i, "exit_code": 0, "stdout_tail": "", "stderr_tail": "",
             "result": {"all_pass": True, "failures": [], "latency_us_geomean": (100.0 if r == "incumbent" else 90.0) + i}}
            for i, order in enumerate((("incumbent", "candidate"), ("candidate", "incumbent"))) for r in order]
    verdict = parse_verdict({"gate": "PASS", "candidate_latency_us": 90.5, "incumbent_latency_us": 100.5,
                             "improvement_pct": 9.95, "runs": runs, "error": None, "artifact": "verify/0f0f"})
    events.append(Event(ev.ABBA, f"{ROOT}/verification_artifacts/result.json", None, base + 70, verdict))
    return events


def live_app(**kwargs) -> EpiscopeApp:
    reducer = Reducer()
    reducer.set_workspace(ROOT, "demo", ROOT)
    state = reducer.feed(episode_events()).snapshot()
    return EpiscopeApp(state=state, sample_gpu=False, clock=lambda: state.last_event_at + 30, **kwargs)


def quiet(pilot):
    pilot.app.animation_level = "none"


def test_live_dashboard(snap_compare):
    assert snap_compare(live_app(), terminal_size=SIZE, run_before=quiet)


def test_readonly_help(snap_compare):
    assert snap_compare(live_app(readonly=True), terminal_size=SIZE, press=["f1"], run_before=quiet)


def test_replay_midway(snap_compare):
    replay = Replay(episode_events(), campaign_root=ROOT, campaign="demo", worktree=ROOT)
    replay.seek_index(9)
    app = EpiscopeApp(replay=replay, readonly=True, sample_gpu=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=quiet)


def test_kernel_timeline(snap_compare, tmp_path):
    """The timeline of a receipt of the episode, written as the timeline tool writes one now:
    its per-site statistics in the receipt (``episcope.sites``), drawn from the state."""
    receipt = write_receipt(tmp_path / "capture-1")
    written = json.loads(receipt.read_text())
    written.setdefault("episcope", {})["sites"] = site_statistics(capture_view(receipt).capture)
    receipt.write_text(json.dumps(written))
    app = EpiscopeApp(state=EpisodeState(timeline_receipts=(read_timeline_receipt(receipt).value,)), sample_gpu=False)

    async def open_it(pilot):
        quiet(pilot)
        app.open_timeline(str(receipt))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 30), run_before=open_it)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return bundled_state(tmp_path_factory.mktemp("cache"))


def example_app(state, **kwargs) -> EpiscopeApp:
    # The archive opens read-only; the clock stands 30 s after its last event, no GPU is sampled.
    return EpiscopeApp(state=state, readonly=True, sample_gpu=False, clock=lambda: state.last_event_at + 30, **kwargs)


async def settled(pilot):
    """Animations off, and the work the console does after its first frame (the keymap,
    which re-announces the bindings) done before the picture is taken."""
    quiet(pilot)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (200, 50)], ids=lambda size: f"{size[0]}x{size[1]}")
def test_bundled_example(snap_compare, example, size):
    assert snap_compare(example_app(example), terminal_size=size, run_before=settled)


def test_detail_of_a_cut_unreadable_record(snap_compare):
    """Enter on the unreadable record (cut in the 80-column table) shows its path and error whole."""
    assert snap_compare(live_app(), terminal_size=(80, 24), press=["8", "enter"], run_before=quiet)
