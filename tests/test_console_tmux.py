"""The real ``episcope`` binary inside tmux, driven with send-keys as a person would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console_fixture import build_episode

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def episcope_argv() -> list[str]:
    binary = Path(sys.executable).parent / "episcope"
    return [str(binary)] if binary.exists() else [sys.executable, "-m", "console.cli"]


class Tmux:
    def __init__(self, socket: str, env: dict) -> None:
        self.socket = socket
        self.env = env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=20,
                              env=self.env, check=check)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "console").stdout

    def wait_for(self, needle: str, seconds: float = 30.0) -> str:
        deadline = time.monotonic() + seconds
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if needle in text:
                return text
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} never appeared; screen was:\n{text}")

    def ended(self, seconds: float = 20.0) -> bool:
        """Whether the console's tmux session is gone (the console quit) within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.run("has-session", "-t", "console", check=False).returncode == 0:
            time.sleep(0.2)
        return self.run("has-session", "-t", "console", check=False).returncode != 0

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "console", *keys)
        time.sleep(0.3)


def test_the_binary_in_tmux_shows_the_console_and_answers_keys(tmp_path):
    campaign, _ = build_episode(tmp_path / "ws")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), TERM="xterm-256color")
    env.pop("TMUX", None)
    tmux = Tmux(f"episcope-test-{os.getpid()}", env)
    command = " ".join([*episcope_argv(), "watch", str(campaign)])
    tmux.run("new-session", "-d", "-s", "console", "-x", "150", "-y", "46", command)
    try:
        screen = tmux.wait_for("demo")
        assert "LIVE" in screen and "Versions" in screen
        tmux.wait_for("job-0003")
        tmux.keys("6")
        tmux.keys("/")
        tmux.wait_for("filter the focused table")
        tmux.keys("v", "3")
        tmux.wait_for("/v3")
        tmux.keys("Enter")
        screen = tmux.wait_for("/v3")
        assert "v3" in screen and "v1 " not in screen
        tmux.keys("Escape")
        tmux.keys("F1")
        tmux.wait_for("each a sandbox job")
        tmux.keys("Escape")
        tmux.keys("q")
        assert tmux.ended()
        # The session was recorded under the user's state directory, not in the workspace.
        recordings = list((tmp_path / "state" / "episcope" / "recordings").glob("*.jsonl"))
        assert len(recordings) == 1 and recordings[0].stat().st_size > 0
    finally:
        tmux.run("kill-server", check=False)


def test_the_console_without_a_terminal_is_one_line_and_no_escape_codes(tmp_path):
    campaign, _ = build_episode(tmp_path / "ws")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    done = subprocess.run([*episcope_argv(), "watch", str(campaign)], capture_output=True, env=env, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.count(b"\n") == 1 and b"needs a terminal" in done.stderr and b"\x1b" not in done.stderr
    assert not (tmp_path / "state").exists()  # nothing recorded either


def test_a_newcomer_opens_the_bundled_archive_at_80x24(tmp_path):
    """The README's first command at 80x24, then the first keys a person tries: the rejected
    verification is in sight, the GPU pane says why it is empty, a job key says why it is
    refused, and q leaves nothing behind."""
    archive = Path(__file__).resolve().parents[1] / "examples" / "episodes" / "row_softmax-h200.tar.gz"
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               TERM="xterm-256color")
    env.pop("TMUX", None)
    tmux = Tmux(f"episcope-newcomer-{os.getpid()}", env)
    tmux.run("new-session", "-d", "-s", "console", "-x", "80", "-y", "24", " ".join([*episcope_argv(), str(archive)]))
    try:
        screen = tmux.wait_for("FAIL -48.20%  ABBA a3762")
        assert "READ-ONLY" in screen and "row_softmax_online" in screen
        tmux.keys("?")
        tmux.wait_for("archive: read-only, actions disabled")  # the help says what is open and why keys are dim
        tmux.keys("Escape")
        tmux.keys("5")
        tmux.keys("Enter")
        tmux.wait_for("not sampled (archive")
        tmux.keys("Escape")
        tmux.keys("s")
        tmux.wait_for("not now (archive:")
        tmux.keys("q")
        assert tmux.ended()
    finally:
        tmux.run("kill-server", check=False)
