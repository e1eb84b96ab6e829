"""What the panes draw is in the state: GPU readings and job log tails arrive as events
(recorded and replayed like the rest), and the measure comparison is the tool's own
statistic, computed once in the domain."""

from __future__ import annotations

import json

import pytest

from console.episode import events as ev
from console.episode.job_logs import TAIL_LINES
from console.episode.reducer import Reducer, fold
from console.episode.replay import Recorder, Replay, load_recording
from console.episode.session import Session
from console.episode.summary import status_document
from console.formats.timeline import parse_measure_run_line
from console.gpu.sampler import NVML_PATH, GpuReading, GpuSample, GpuSampler
from console.timeline.measure import statistics
from console_fixture import RUNTIME, build_episode

READING = GpuReading(1000.0, (GpuSample(0, "NVIDIA H200", "GPU-1", utilization_pct=97.0, memory_used_mib=1024.0,
                                        power_w=412.5, temperature_c=61.0),))


def gpu_event(reading: GpuReading) -> ev.Event:
    return ev.Event(ev.GPU, NVML_PATH, None, reading.sampled_at, reading)


def test_the_latest_gpu_reading_is_in_the_state_and_in_status():
    later = GpuReading(1002.0, (GpuSample(0, "NVIDIA H200", "GPU-1", utilization_pct=12.0),))
    state = fold([gpu_event(READING), gpu_event(later)])
    assert state.gpu == later
    gpu = status_document(state)["gpu"]
    assert gpu["sampled_at"] == 1002.0 and gpu["unavailable"] is None
    (card,) = gpu["gpus"]
    assert card["utilization_pct"] == 12.0 and card["power_w"] is None  # unknown stays null, never 0


def test_status_says_why_no_gpu_was_read():
    reading = GpuSampler().sample()  # this machine's real NVML answer
    doc = status_document(fold([]), gpu=reading)
    if reading.unavailable is not None:
        assert doc["gpu"]["gpus"] is None and doc["gpu"]["unavailable"] == reading.unavailable
    else:
        assert all(card["index"] >= 0 for card in doc["gpu"]["gpus"])
    assert status_document(fold([]))["gpu"] is None  # no reading taken: null, not zeros


def test_job_logs_fold_into_tails_per_job_and_stream():
    stdout = ".atrex_long_horizon/sandbox/job-7/stdout.log"
    stderr = ".atrex_long_horizon/sandbox/job-7/stderr.log"
    lines = [ev.Event(ev.JOB_LOG, stdout, i * 8, None, f"line {i}") for i in range(TAIL_LINES + 5)]
    reducer = Reducer().feed([*lines, ev.Event(ev.JOB_LOG, stderr, 0, None, "boom")])
    tail = reducer.snapshot().job_logs["job-7"]
    assert tail.stdout[0] == "line 5" and tail.stdout[-1] == f"line {TAIL_LINES + 4}" and len(tail.stdout) == TAIL_LINES
    assert tail.stderr == ("boom",)
    reducer.feed([ev.Event(ev.REMOVED, stdout, None, None, ev.JOB_LOG)])  # truncated: read anew
    assert reducer.snapshot().job_logs["job-7"].stdout == ()


def test_gpu_readings_and_job_logs_replay_from_a_recording(tmp_path):
    campaign, worktree = build_episode(tmp_path / "ws")
    (worktree / RUNTIME / "sandbox" / "job-0002" / "stderr.log").write_text('odd "quoted" \\ line\n')
    recording = tmp_path / "recording.jsonl"
    recorder = Recorder(recording, campaign_root=str(campaign), campaign="demo", worktree=str(worktree))
    session = Session(campaign, on_event=recorder.record)
    session.scan()
    live = session.add([gpu_event(READING)])
    recorder.close()
    _, events, problems = load_recording(recording)
    assert problems == []
    replayed = Replay(events)
    replayed.seek_index(replayed.total)
    state = replayed.state()
    assert state.gpu == live.gpu == READING  # the very type a live reading has
    assert state.job_logs == live.job_logs
    assert state.job_logs["job-0002"].stderr == ('odd "quoted" \\ line',)


def test_measure_comparison_is_the_tools_own_statistic():
    runs = []
    latencies = {"baseline": [1.00, 1.02, 0.99, 1.01, 1.00, 1.03], "instrumented": [1.05, 1.06, 1.04, 1.07, 1.05, 1.08]}
    for index in range(6):
        for variant in ("baseline", "instrumented"):
            runs.append({"schema": "atrex-autonomous-timeline-measure-run/v1", "event": "run", "variant": variant,
                         "latency_ms": latencies[variant][index], "block": index // 2, "ordinal": index,
                         "workload_identity": "w", "device_identity": {"uuid": "GPU-1"}})
    path = "timeline/measurement.runs.jsonl"
    events = [ev.Event(ev.MEASURE_RUN, path, i, None, parse_measure_run_line(json.dumps(r))) for i, r in enumerate(runs)]
    (comparison,) = fold(events).measure_comparisons
    tool = statistics(runs, ["ABBA", "BAAB", "ABBA"], 10.0)
    assert (comparison.ratio.estimate - 1.0) * 100.0 == pytest.approx(tool["overhead_percent"])
    assert (comparison.ratio.low - 1.0) * 100.0 == pytest.approx(tool["interval"]["low_percent"])
    assert (comparison.ratio.high - 1.0) * 100.0 == pytest.approx(tool["interval"]["high_percent"])
    assert comparison.ratio.coverage == pytest.approx(tool["interval"]["coverage"])
    assert comparison.baseline_median_ms == pytest.approx(tool["baseline_ms"])


def test_drift_inside_one_measurement_is_an_alert():
    path = "timeline/measurement.runs.jsonl"
    lines = [{"schema": "atrex-autonomous-timeline-measure-run/v1", "event": "run", "variant": "baseline",
              "latency_ms": 1.0, "workload_identity": workload, "device_identity": {"uuid": uuid}}
             for workload, uuid in (("w1", "GPU-1"), ("w2", "GPU-2"))]
    events = [ev.Event(ev.MEASURE_RUN, path, i, None, parse_measure_run_line(json.dumps(r))) for i, r in enumerate(lines)]
    codes = {alert.code for alert in fold(events).alerts}
    assert {"workload_drift", "device_drift"} <= codes


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_live_console_records_its_gpu_readings_and_the_pane_draws_the_state(tmp_path):
    from textual.widgets import Static

    from console.app import EpiscopeApp

    campaign, worktree = build_episode(tmp_path / "ws")
    recording = tmp_path / "recording.jsonl"
    recorder = Recorder(recording, campaign_root=str(campaign), campaign="demo", worktree=str(worktree))
    app = EpiscopeApp(session=Session(campaign, on_event=recorder.record), recorder=recorder, sample_gpu=True)
    async with app.run_test(size=(150, 46)) as pilot:
        for _ in range(200):
            if app.episode_state.gpu is not None:
                break
            await pilot.pause(0.05)
        reading = app.episode_state.gpu
        assert reading is not None
        await pilot.pause(0.3)
        if reading.unavailable is not None:
            # No GPU: the pane folds to its note line, which says why (Enter shows it uncut).
            shown = str(app.query_one("#gpu .pane-note", Static).render())
            assert "N/A" in shown and reading.unavailable[:20] in shown
        else:
            body = app.query_one("#gpu-body", Static)
            shown = "\n".join(strip.text for strip in body.render_lines(body.size.region))
            assert reading.gpus[0].name[:10] in shown
    _, events, _ = load_recording(recording)
    recorded = [e.data for e in events if e.kind == ev.GPU]
    assert reading in recorded and all(isinstance(r, GpuReading) for r in recorded)
