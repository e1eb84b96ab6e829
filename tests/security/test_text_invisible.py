"""Agent-written text carries no invisible character to the terminal.

Bidirectional overrides and isolates (U+202A-202E, U+2066-2069), zero-width characters
(U+200B-200F, U+FEFF) and the line and paragraph separators (U+2028/2029) draw nothing, but a
bidi-capable terminal reorders or hides what follows them ("Trojan Source"). ``visible`` shows
them as escapes, as it shows control characters; JSON keeps the strings exact. Each case
plants such text in a real workspace (a real git branch, real telemetry and job files) and
reads it through the human CLI, the JSON CLI and the console.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.app import EpiscopeApp
from console.episode.session import Session
from console.episode.text import visible, visible_lines
from console_fixture import RUNTIME, _job, build_episode
from spine_helpers import tele, write_lines

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: what follows reads backwards
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ZERO_WIDTH = "\u200b\u200c\u200d\u200e\u200f\ufeff"
SEPARATORS = "\u2028\u2029"
INVISIBLE = set(BIDI + ZERO_WIDTH + SEPARATORS)
HIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}
ITERATION = f"episode-{RLO}1000{ZERO_WIDTH}"
CATEGORY = f"bench\u2066mark\u2069{SEPARATORS}"
LOG_LINE = f"ok {RLO}kcatta\ufeff"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@given(st.text())
def test_visible_leaves_no_control_format_or_separator_character(text):
    shown = visible(text)
    assert not {char for char in shown if unicodedata.category(char) in HIDDEN_CATEGORIES}
    assert visible(shown) == shown  # showing twice changes nothing more


def test_visible_writes_invisible_characters_as_escapes():
    assert visible(f"br{RLO}anch") == "br\\u202eanch"
    assert visible(BIDI) == "\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069"
    assert visible(ZERO_WIDTH + SEPARATORS) == "\\u200b\\u200c\\u200d\\u200e\\u200f\\ufeff\\u2028\\u2029"
    assert visible("soft\xadhyphen tag\U000e0041 \ud800") == "soft\\xadhyphen tag\\U000e0041 \\ud800"
    assert visible_lines(f"a{RLO}\nb\u2028") == "a\\u202e\nb\\u2028"


def test_visible_keeps_printable_text_whatever_its_script():
    text = "é 中文 العربية no\xa0break \ue000 ␛"  # right-to-left script, a no-break space, private use
    assert visible(text) == text


def test_human_status_shows_a_branch_name_with_an_override_as_an_escape(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "XDG_STATE_HOME": str(tmp_path / "state")}
    workspace = tmp_path / "b"
    init = subprocess.run([sys.executable, "-m", "console.cli", "init", str(workspace), "--problem", "row_softmax"],
                          cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert init.returncode == 0, init.stderr
    subprocess.run(["git", "-C", str(workspace), "branch", "-m", f"br{RLO}anch"], check=True)
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", str(workspace)], cwd=ROOT, env=env,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert RLO not in out and "branch br\\u202eanch" in out


@pytest.fixture
def invisible(tmp_path):
    """A real episode whose running phase's iteration id, one job's category and that job's
    log carry bidi and zero-width characters."""
    campaign, worktree = build_episode(tmp_path / "ws")
    write_lines(worktree / RUNTIME / "telemetry.jsonl", [
        tele("phase_started", 500.0, iteration=ITERATION, attempt="att", phase="planning"),
    ])
    _job(worktree, "job-0009", "running", CATEGORY, 600.0, log=f"{LOG_LINE}\n")
    return campaign, worktree


def test_status_shows_invisible_characters_as_escapes_and_json_keeps_them(invisible, tmp_path):
    campaign, _ = invisible
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "XDG_STATE_HOME": str(tmp_path / "state")}

    def status(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "console.cli", "status", *args, str(campaign)], cwd=ROOT, env=env,
                              capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.decode()

    human = status()
    assert not INVISIBLE & set(human), "an invisible character reached the terminal"
    assert "episode-\\u202e1000\\u200b" in human
    doc = json.loads(status("--json"))
    assert doc["active_phase"]["iteration_id"] == ITERATION
    (job,) = [j for j in doc["jobs"] if j["job_id"] == "job-0009"]
    assert job["category"] == CATEGORY and job["log_tail"]["stdout"] == [LOG_LINE]


async def test_console_draws_no_invisible_character(invisible):
    campaign, _ = invisible
    app = EpiscopeApp(session=Session(campaign), sample_gpu=False)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(100):
            if app.scanned and any(job.job_id == "job-0009" for job in app.episode_state.jobs):
                break
            await pilot.pause(0.05)
        await pilot.press("4")  # the jobs pane: the category, and the selected job's log
        table = app.query_one("#jobs-table")
        table.move_cursor(row=list(table.rows).index(next(k for k in table.rows if k.value == "job-0009")))
        await pilot.pause(0.3)
        screen = app.export_screenshot()
        assert not INVISIBLE & set(screen), "an invisible character was drawn"
        assert "\\u202e1000" in screen and "bench\\u2066mark" in screen  # the iteration id, shortened
        assert any("ok \\u202ekcatta\\ufeff" in line for line in app.query_one("#job-log").lines)
