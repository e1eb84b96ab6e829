"""Hostile agent text against a real terminal (tmux): the window title and the clipboard stay
untouched.

A phase's iteration id and a job's category carrying OSC 0 (set the title) and a job log
carrying OSC 52 (write the clipboard) are shown by the human ``episcope status`` and by the console. tmux acts on both
sequences when they reach it (it retitles the pane, and with ``set-clipboard on`` stores the
clipboard payload as a paste buffer), so the pane title and the buffer list say whether any
raw sequence got through.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console_fixture import RUNTIME, _job, build_episode
from spine_helpers import tele, write_lines

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

ROOT = Path(__file__).resolve().parents[2]
TITLE = "\x1b]0;owned title\x07"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # "echo pwned"
CLEAR = "\x1b[2J"


def episcope_argv() -> list[str]:
    binary = Path(sys.executable).parent / "episcope"
    return [str(binary)] if binary.exists() else [sys.executable, "-m", "console.cli"]


class Tmux:
    def __init__(self, tmp_path: Path) -> None:
        self.socket = f"episcope-text-{os.getpid()}"
        config = tmp_path / "tmux.conf"
        config.write_text("set -g set-clipboard on\nset -g allow-rename on\n")
        self.config = str(config)
        self.env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                        TERM="xterm-256color", PYTHONPATH=str(ROOT))
        self.env.pop("TMUX", None)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([TMUX, "-L", self.socket, "-f", self.config, *args], capture_output=True, text=True,
                              timeout=20, env=self.env, check=check)

    def start(self, argv: list[str]) -> None:
        self.run("new-session", "-d", "-s", "shown", "-x", "160", "-y", "48", shlex.join(argv))

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "shown").stdout

    def wait_for(self, needle: str, seconds: float = 30.0) -> str:
        deadline = time.monotonic() + seconds
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if needle in text:
                return text
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} never appeared; screen was:\n{text}")

    def title(self) -> str:
        return self.run("display-message", "-p", "-t", "shown", "#{pane_title}").stdout.strip()

    def buffers(self) -> str:
        return self.run("list-buffers", check=False).stdout

    def close(self) -> None:
        self.run("kill-server", check=False)


@pytest.fixture
def hostile(tmp_path):
    campaign, worktree = build_episode(tmp_path / "ws")
    write_lines(worktree / RUNTIME / "telemetry.jsonl", [
        tele("phase_started", 500.0, iteration=f"plan{TITLE}{CLEAR}ning", phase="planning"),
    ])
    _job(worktree, "job-0009", "running", f"bench{TITLE}", 600.0, log=f"copied {CLIPBOARD}\n")
    return campaign


@pytest.fixture
def tmux(tmp_path):
    session = Tmux(tmp_path)
    yield session
    session.close()


def test_the_tmux_probe_sees_raw_sequences(tmux):
    # The check below means something only if tmux acts on these sequences here.
    tmux.start(["sh", "-c", f"printf '{TITLE}{CLIPBOARD}'; echo printed; sleep 30"])
    tmux.wait_for("printed")
    assert tmux.title() == "owned title" and "echo pwned" in tmux.buffers()


def test_human_status_leaves_title_and_clipboard_alone(hostile, tmux):
    tmux.start(["sh", "-c", shlex.join([*episcope_argv(), "status", str(hostile)]) + "; echo status-done; sleep 30"])
    screen = tmux.wait_for("status-done")
    assert "plan␛]0;owned title␇␛[2Jning" in screen
    assert tmux.title() != "owned title" and tmux.buffers() == ""


def test_the_console_leaves_title_and_clipboard_alone(hostile, tmux):
    tmux.start([*episcope_argv(), "watch", "--readonly", str(hostile)])
    tmux.wait_for("job-0009")
    tmux.wait_for("␛]0;owned")  # the hostile text, drawn as text
    tmux.run("send-keys", "-t", "shown", "4")
    time.sleep(0.3)
    for _ in range(4):  # the hostile job is the newest: select it so its log is drawn
        tmux.run("send-keys", "-t", "shown", "Up")
        time.sleep(0.2)
    tmux.wait_for("copied ␛]52;c;")
    assert tmux.title() != "owned title" and tmux.buffers() == ""
    tmux.run("send-keys", "-t", "shown", "q")
