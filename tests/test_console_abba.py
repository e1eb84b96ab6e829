"""The ABBA pane follows a real tools/abba.py run: samples of each side as runs.jsonl grows,
geometric means, the ratio with its interval, then the verdict when result.json lands. The
numbers come from the state (``console.episode.comparisons``), the same ones ``status --json``
prints."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Static, TextArea

from console.app import EpiscopeApp
from console.episode import events as ev
from console.episode.registry import artifact_at
from console.episode.session import Session
from console.episode.summary import status_document
from console.screens.detail import DetailScreen
from console.stats.ratio import latency_ratio
from console_fixture import build_episode
from spine_helpers import git
from widgets.abba_stats import AbbaStats

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.anyio

# An evaluator that runs only when the test opens its gate, so each run lands on its own.
EVALUATOR = '''
import json, os, pathlib, time
gates = pathlib.Path(os.environ["ABBA_GATES"])
n = len(list(gates.glob("ran-*")))
while not (gates / f"go-{n}").exists():
    time.sleep(0.02)
(gates / f"ran-{n}").touch()
latency = (90.0 if "fast" in pathlib.Path("kernel.py").read_text() else 100.0) + n * 0.5
print("[test_kernel] RESULT_JSON=" + json.dumps({"all_pass": True, "failures": [], "latency_us_geomean": latency}))
'''


@pytest.fixture
def anyio_backend():
    return "asyncio"


def classify(rel: str) -> str | None:
    artifact = artifact_at(rel)
    return artifact.kind if artifact is not None else None


def test_verification_files_are_classified():
    verify = "verification_artifacts/.atrex_long_horizon_verify/0f0f"
    assert classify(f"{verify}/runs.jsonl") == ev.ABBA_RUN
    assert classify(f"{verify}/result.json") == ev.ABBA
    assert classify(f"{verify}/request-0001.json") is None
    assert classify("elsewhere/runs.jsonl") is None


def ratio_interval(a, b, center="median"):
    r = latency_ratio(a, b, center=center)
    return r.estimate, r.low, r.high, r.coverage


def test_ratio_interval_is_hodges_lehmann_on_log_latency():
    inc, cand = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8], [90.0, 91.0, 89.5, 90.4, 90.1, 90.8]
    ratio, low, high, coverage = ratio_interval(inc, cand)
    assert ratio == pytest.approx(90.25 / 100.1)
    assert coverage == pytest.approx(0.95, abs=0.02) and low < ratio < high < 1.0
    # The ABBA gate's statistic: the ratio of geometric means, with the same interval.
    geomean, g_low, g_high, g_coverage = ratio_interval(inc, cand, "geomean")
    assert geomean == pytest.approx(math.exp(sum(map(math.log, cand)) / 6 - sum(map(math.log, inc)) / 6))
    assert (g_low, g_high, g_coverage) == (low, high, coverage)
    # Two runs a side (one ABBA schedule): only the widest interval, with its real coverage.
    ratio, low, high, coverage = ratio_interval([100.0, 101.5], [90.5, 91.0])
    assert (low, high) == (pytest.approx(90.5 / 101.5), pytest.approx(91.0 / 100.0))
    assert coverage == pytest.approx(1 - 2 / math.comb(4, 2))
    assert ratio_interval([100.0], [90.0])[1:] == (None, None, None)
    assert ratio_interval([], [90.0]) == (None, None, None, None)
    # The label says what the numbers are, and why the interval is not 95%.
    label = latency_ratio([100.0, 101.5], [90.5, 91.0], names="cand/inc").lines
    assert label == ("geomean cand/inc 0.9008 (-9.92%)", "[0.8916, 0.9100] 67% CI, n=2/2", "(too few runs for 95%)")


async def test_abba_pane_shows_runs_as_they_arrive_then_the_verdict(tmp_path):
    campaign, worktree = build_episode(tmp_path / "ws")
    (worktree / "test_kernel.py").write_text(EVALUATOR)
    git(worktree, "add", "test_kernel.py")
    git(worktree, "commit", "-q", "-m", "evaluator")
    incumbent = git(worktree, "rev-parse", "HEAD").strip()
    (worktree / "kernel.py").write_text("# fast\n")
    git(worktree, "commit", "-q", "-am", "candidate")
    candidate = git(worktree, "rev-parse", "HEAD").strip()
    gates = tmp_path / "gates"
    gates.mkdir()
    app = EpiscopeApp(session=Session(campaign), sample_gpu=False)
    async with app.run_test(size=(150, 46)) as pilot:
        pane = app.query_one(AbbaStats)

        async def shown(*needles: str) -> str:
            for _ in range(150):
                # The body is mounted with the pane's first data (after the scan).
                body = next(iter(pane.query("#abba-body").results(Static)), None)
                text = "" if body is None else "\n".join(s.text for s in body.render_lines(body.size.region))
                if all(n in text for n in needles):
                    return text
                await pilot.pause(0.1)
            raise AssertionError(f"{needles} never shown; pane says:\n{text}")

        await shown("ABBA 0f0f")  # the finished one the episode already holds
        abba = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / "abba.py"), "--incumbent-commit", incumbent,
             "--candidate-commit", candidate, "--output-dir", "verification_artifacts", "--",
             sys.executable, "test_kernel.py"],
            cwd=worktree, env={"ABBA_GATES": str(gates), "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            (gates / "go-0").touch()
            text = await shown("1 run(s)", "incumbent n=1 geomean 100.000 µs", "waiting for result.json")
            assert "candidate n=0 geomean N/A" in text and "0f0f" not in text  # the new verification took over
            (gates / "go-1").touch()
            text = await shown("2 run(s)", "candidate n=1 geomean 90.500")
            assert "geomean cand/inc 0.9050" in text
            (gates / "go-2").touch()
            (gates / "go-3").touch()
            text = await shown("4 run(s)", "PASS")
            assert "incumbent n=2 geomean 100.747" in text and "candidate n=2 geomean 90.750" in text
            assert "   100 101.5 " in text and "   90.5 91 " in text  # the samples, in arrival order
            # two a side: the widest interval, with its coverage explained
            assert "geomean cand/inc 0.9008 (-9.92%)" in text and "[0.8916, 0.9100] 67% CI, n=2/2" in text
            assert "(too few runs for 95%)" in text
            assert re.search(r"PASS \+9\.92%  ABBA \S+  4 run\(s\)", text)
            # status --json prints the very numbers the pane drew.
            (entry,) = [a for a in status_document(app.episode_state)["abba"] if a["directory"] == pane.shown_dir]
            assert entry["gate"] == "PASS" and entry["runs"] == 4 and entry["ratio"]["n_a"] == 2
            assert all(line in text for line in entry["ratio"]["lines"])
            assert entry["samples_us"] == {"incumbent": [100.0, 101.5], "candidate": [90.5, 91.0]}
            assert abba.wait(30) == 0 and "__ATREX_LONG_HORIZON_ABBA_RESULT__=" in abba.stdout.read()
        finally:
            if abba.poll() is None:
                abba.kill()
                abba.wait()


def _verification(worktree: Path, name: str, gate: str, improvement: float, modified: float) -> None:
    """A copy of the fixture's finished verification under ``name``, with its own verdict,
    its files last written at ``modified``."""
    verify = worktree / "verification_artifacts" / ".atrex_long_horizon_verify"
    directory = verify / name
    if name != "0f0f":
        shutil.copytree(verify / "0f0f", directory)
    verdict = json.loads((directory / "result.json").read_text())
    verdict.update(gate=gate, improvement_pct=improvement, artifact=str(directory))
    (directory / "result.json").write_text(json.dumps(verdict))
    os.utime(directory / "result.json", (modified, modified))


async def test_verifications_are_newest_first_whatever_their_names_and_each_is_reachable(tmp_path):
    """Directory names say nothing of age (AKA names them by uuid): the state orders the
    verifications by their files' times, newest first, and status, the pane and its detail
    follow that order."""
    campaign, worktree = build_episode(tmp_path / "ws")
    now = time.time()
    _verification(worktree, "0f0f", "FAIL", -3.0, now - 3600)  # the middle one
    _verification(worktree, "8888", "PASS", 12.5, now - 60)  # the newest
    _verification(worktree, "ffff", "ERROR", None, now - 7200)  # the oldest, last by name
    state = Session(campaign).scan()
    names = [Path(c.directory).name for c in state.abba_comparisons]
    assert names == ["8888", "0f0f", "ffff"]
    assert [Path(a["directory"]).name for a in status_document(state)["abba"]] == names
    app = EpiscopeApp(state=state, readonly=True, sample_gpu=False, clock=lambda: now)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        pane = app.query_one(AbbaStats)
        body = pane.query_one("#abba-body", Static)
        first = "\n".join(s.text for s in body.render_lines(body.size.region)).splitlines()[0]
        assert first.startswith("PASS +12.50%  ABBA 8888") and pane.shown_dir.endswith("8888")
        assert pane.border_subtitle == "newest of 3 · Enter"
        await pilot.press("3", "enter")
        detail = app.screen
        assert isinstance(detail, DetailScreen) and "3 verifications, newest first" in detail.title_text
        text = detail.query_one(TextArea).text
        heads = [m.groups() for m in map(re.compile(r"(\S+) \S+  ABBA (\S+)").match, text.splitlines()) if m]
        assert [[name, gate] for gate, name in heads] == [["8888", "PASS"], ["0f0f", "FAIL"], ["ffff", "ERROR"]]
        assert str(worktree / "verification_artifacts" / ".atrex_long_horizon_verify" / "ffff") in text


def test_a_pass_its_own_runs_contradict_is_an_alert(tmp_path):
    """The fixture's PASS stands on runs that give the candidate faster: no alert. The same
    verdict over runs whose sides are swapped (the candidate now the slower) is an alert that
    names the verification."""
    campaign, worktree = build_episode(tmp_path / "ws")
    state = Session(campaign).scan()
    assert state.abba_comparisons[0].verdict.passed
    assert not [a for a in state.alerts if a.code == "abba_verdict_contradicts_runs"]
    result = worktree / "verification_artifacts" / ".atrex_long_horizon_verify" / "0f0f" / "result.json"
    verdict = json.loads(result.read_text())
    swap = {"incumbent": "candidate", "candidate": "incumbent"}
    for run in verdict["runs"]:
        run["revision"] = swap[run["revision"]]
    result.write_text(json.dumps(verdict))
    state = Session(campaign).scan()
    comparison = state.abba_comparisons[0]
    assert comparison.verdict.passed and comparison.candidate_geomean_us > comparison.incumbent_geomean_us
    alerts = [a for a in state.alerts if a.code == "abba_verdict_contradicts_runs"]
    assert len(alerts) == 1 and alerts[0].severity == "error" and alerts[0].path.endswith("0f0f")
    assert "PASS" in alerts[0].message and "100.50" in alerts[0].message
    assert any(a["code"] == "abba_verdict_contradicts_runs" for a in status_document(state)["alerts"])
