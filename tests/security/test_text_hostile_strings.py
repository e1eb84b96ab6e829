"""Agent-written text is shown as text: never markup, never a raw control sequence.

Issue 17, item 3: phase names set the window title (OSC 0), wrote the clipboard (OSC 52) and
cleared the screen (CSI 2J); a job id ``[@click=app.launch('correctness_run')]`` was rendered
as markup and launched a job when clicked. Each case below plants such text in a real
workspace and reads it through the human CLI, the JSON CLI and the console.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.widgets import DataTable

from console.actions import JobLauncher
from console.app import EpiscopeApp
from console.episode.session import Session
from console.episode.text import visible
from console_fixture import RUNTIME, _job, build_episode
from spine_helpers import tele, write_lines

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio

CLICK_ID = "[@click=app.launch('correctness_run')]"
TITLE = "\x1b]0;owned title\x07"  # OSC 0: set the window title
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: write the clipboard
CLEAR = "\x1b[2J"  # CSI 2J: clear the screen
HOSTILE_PHASE = f"plan{TITLE}{CLIPBOARD}{CLEAR}ning"
CONTROLS = {chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def hostile(tmp_path):
    """A real episode whose running phase's iteration and attempt ids and one job carry
    hostile text. A marker of the hostile phase name is there too: no known phase, so AKA's
    reader ignores it and it is no phase anywhere (its text never reaches the status)."""
    campaign, worktree = build_episode(tmp_path / "ws")
    write_lines(worktree / RUNTIME / "telemetry.jsonl", [
        tele("phase_started", 500.0, iteration=HOSTILE_PHASE, attempt=f"att{CLEAR}", phase="planning"),
        tele("phase_started", 501.0, iteration="episode-0009", attempt="att", phase=HOSTILE_PHASE),
    ])
    _job(worktree, CLICK_ID, "running", f"bench{TITLE}", 600.0, log=f"done {CLIPBOARD}\n")
    return campaign, worktree


def cli(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "console.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                          timeout=120)


@given(st.text())
def test_visible_leaves_no_control_character(text):
    shown = visible(text)
    assert not CONTROLS & set(shown)
    assert visible(shown) == shown  # showing twice changes nothing more


def test_visible_keeps_the_text_readable():
    assert visible(HOSTILE_PHASE) == "plan␛]0;owned title␇␛]52;c;ZWNobyBwd25lZA==␇␛[2Jning"
    assert visible("a\x9bb\x7f") == "a\\x9bb␡"


def test_human_status_prints_no_control_sequence(hostile, tmp_path):
    campaign, _ = hostile
    proc = cli("status", str(campaign), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert not (CONTROLS - {"\n"}) & set(out), "a raw control character reached the terminal"
    assert "plan␛]0;owned title␇" in out and CLICK_ID in out  # shown, as text


def test_json_status_keeps_the_strings_exact(hostile, tmp_path):
    campaign, _ = hostile
    proc = cli("status", "--json", str(campaign), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in proc.stdout  # JSON escapes it
    doc = json.loads(proc.stdout)
    assert doc["active_phase"]["iteration_id"] == HOSTILE_PHASE and doc["active_phase"]["attempt_id"] == f"att{CLEAR}"
    assert HOSTILE_PHASE not in doc["phases"] and "invalid_phase_marker" in doc["phase_timing"]["reason_codes"]
    (job,) = [j for j in doc["jobs"] if j["job_id"] == CLICK_ID]
    assert job["category"] == f"bench{TITLE}" and job["log_tail"]["stdout"] == [f"done {CLIPBOARD}"]


async def test_console_shows_hostile_text_and_launches_nothing(hostile, tmp_path):
    campaign, worktree = hostile
    launcher = JobLauncher(str(worktree), extra_flags=("--dry-run",))
    app = EpiscopeApp(session=Session(campaign), launcher=launcher, sample_gpu=False)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(100):
            if app.scanned and app.episode_state.jobs and app.query_one("#jobs-table", DataTable).row_count == 4:
                break
            await pilot.pause(0.05)
        table = app.query_one("#jobs-table", DataTable)
        cell = table.get_row(CLICK_ID)[0]
        assert cell.plain == CLICK_ID and not cell.spans  # the id as written, no markup parsed
        assert str(table.get_row(CLICK_ID)[2]) == "bench␛]0;owned title␇"
        # Click the job id cell, where a [@click] would fire: nothing may start.
        await pilot.press("4")
        row = list(table.rows).index(next(k for k in table.rows if k.value == CLICK_ID))
        await pilot.click("#jobs-table", offset=(2, row + 1))
        await pilot.pause(0.3)
        assert launcher.launched == []  # a [@click] that fired would have launched here
        # Nothing drawn carries a raw control character; the hostile text is there, visible.
        screen = app.export_screenshot()
        assert "\x1b" not in screen and "\x07" not in screen
        assert "␛]0;owned" in screen
        # The log tail of the hostile job, selected: visible, not raw.
        await pilot.press("home")
        table.move_cursor(row=row)
        await pilot.pause(0.2)
        assert any("done ␛]52;c;" in line for line in app.query_one("#job-log").lines)
        # A notification naming the job (cancel declined) is text too.
        await pilot.press("x")
        await pilot.pause(0.2)
        await pilot.press("n")
        await pilot.pause(0.2)
        notes = [n.message for n in app._notifications]
        assert any(CLICK_ID in note for note in notes) and not any("\x1b" in note for note in notes)
