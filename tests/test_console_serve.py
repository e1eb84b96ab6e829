"""``episcope serve`` in headless Chromium: the page (at the printed URL) connects and the console arrives."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from console_fixture import build_episode

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Installed before the page's own scripts: keeps every websocket frame the page receives,
# so the test can read what the terminal was sent to draw (the canvas itself has no text).
CAPTURE_FRAMES = """
(() => {
  const Native = window.WebSocket;
  window.__frames = [];
  const decoder = new TextDecoder();
  function Capturing(...args) {
    const ws = new Native(...args);
    ws.addEventListener('message', (e) => {
      if (typeof e.data === 'string') window.__frames.push(e.data);
      else if (e.data instanceof ArrayBuffer) window.__frames.push(decoder.decode(e.data));
      else if (e.data && e.data.text) e.data.text().then((t) => window.__frames.push(t));
    });
    return ws;
  }
  Capturing.prototype = Native.prototype;
  Object.assign(Capturing, Native);
  window.WebSocket = Capturing;
})();
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def printed_url(server: subprocess.Popen, seconds: float = 30.0) -> str:
    """The URL (token included) that ``episcope serve`` prints once it listens."""
    deadline = time.monotonic() + seconds
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([server.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(server.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
        if match := re.search(rb"open (http://\S+/)\s", seen):
            return match.group(1).decode()
    raise AssertionError(f"serve printed no URL: {seen!r}")


def wait_http(url: str, seconds: float = 30.0) -> str:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(5)


async def browse(debug_port: int, url: str, seconds: float = 60.0) -> tuple[str, str]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{debug_port}/json/list") as response:
            targets = await response.json(content_type=None)
        page = next(t for t in targets if t.get("type") == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            counter = 0

            async def call(method: str, **params):
                nonlocal counter
                counter += 1
                await ws.send_json({"id": counter, "method": method, "params": params})
                while True:
                    message = await ws.receive_json()
                    if message.get("id") == counter:
                        return message.get("result", {})

            await call("Page.enable")
            await call("Page.addScriptToEvaluateOnNewDocument", source=CAPTURE_FRAMES)
            await call("Page.navigate", url=url)
            deadline = time.monotonic() + seconds
            frames = classes = ""
            while time.monotonic() < deadline:
                result = await call("Runtime.evaluate", returnByValue=True, expression=(
                    "JSON.stringify([document.body ? document.body.className : '',"
                    " (window.__frames || []).join('')])"))
                value = result.get("result", {}).get("value")
                if value:
                    classes, frames = json.loads(value)
                    if "Versions" in frames and "job-0003" in frames:
                        break
                await asyncio.sleep(0.5)
            return classes, frames


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_serve_in_headless_chromium_shows_the_console(tmp_path):
    campaign, _ = build_episode(tmp_path / "ws")
    port, debug_port = free_port(), free_port()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    server = subprocess.Popen([sys.executable, "-m", "console.cli", "serve", str(campaign), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    browser = None
    try:
        url = printed_url(server)
        assert url.startswith(f"http://127.0.0.1:{port}/")
        page = wait_http(url)
        assert "episcope — demo" in page  # the page names the console and the workspace
        browser = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chromium'}",
             f"--remote-debugging-port={debug_port}", "--window-size=1600,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_http(f"http://127.0.0.1:{debug_port}/json/version")
        classes, frames = asyncio.run(browse(debug_port, url))
        assert "-first-byte" in classes  # the terminal received the app's output
        assert "Phases" in frames and "Versions" in frames and "job-0003" in frames
    finally:
        if browser is not None:
            stop(browser)
        stop(server)


def test_serve_binds_loopback_unless_told_otherwise():
    from console.cli import build_parser
    from console.commands.serve import DEFAULT_HOST, command_argv, is_loopback

    args = build_parser().parse_args(["serve", "somewhere", "--port", "8123"])
    assert args.host is None and DEFAULT_HOST == "127.0.0.1" and args.port == 8123
    assert command_argv("/x y", readonly=True)[-3:] == ["watch", "/x y", "--readonly"]
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.0.2.1", "10.1.2.3"))
