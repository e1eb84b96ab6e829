"""``episcope serve`` answers its operator only, and no console outlives its session or the server.

Each case runs the real server as a subprocess and talks to it over real sockets; the process
table (every process whose command line names the test's workspace) says what was started
and what was left behind.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console_fixture import build_episode

pytest.importorskip("textual_serve")  # the serve extra; aiohttp comes with it
import aiohttp  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_naming(marker: str) -> dict[int, str]:
    """pid -> command line of every live process whose command line contains ``marker``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found[int(entry.name)] = cmdline
    return found


def consoles(marker: str, server_pid: int) -> dict[int, str]:
    return {pid: line for pid, line in processes_naming(marker).items() if pid != server_pid}


def wait_until(predicate, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


class Served:
    """``episcope serve`` on a fresh workspace, with the URL it printed."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.campaign, _ = build_episode(tmp_path / "ws")
        self.marker = str(self.campaign)
        self.port = free_port()
        env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "console.cli", "serve", self.marker, "--port", str(self.port), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        self.stdout = self._read_until(rb"open (http://\S+)")
        self.url = re.search(rb"open (http://127\.0\.0\.1:\d+/\S+/)", self.stdout).group(1).decode()
        self.token = self.url.rstrip("/").rsplit("/", 1)[1]

    def _read_until(self, pattern: bytes, seconds: float = 30.0) -> bytes:
        seen = b""
        deadline = time.monotonic() + seconds
        while not re.search(pattern, seen) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk
        assert re.search(pattern, seen), f"serve printed {seen!r}; stderr {self.process.stderr.read1()!r}"
        return seen

    def ws_url(self, token: str | None = None) -> str:
        return f"ws://127.0.0.1:{self.port}/{self.token if token is None else token}/ws?width=100&height=30"

    def consoles(self) -> dict[int, str]:
        return consoles(self.marker, self.process.pid)

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        for pid in self.consoles():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def served(tmp_path, request):
    servers: list[Served] = []

    def start(*extra: str) -> Served:
        server = Served(tmp_path, *extra)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


async def handshake(url: str, **kwargs) -> int:
    """The HTTP status a websocket upgrade gets (101 when it is accepted)."""
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url, **kwargs) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def drawn(ws: aiohttp.ClientWebSocketResponse, needle: bytes, seconds: float = 60.0) -> bytes:
    """What the console sends until ``needle`` appears (or the session ends)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while needle not in seen and time.monotonic() < deadline:
        try:
            message = await ws.receive(timeout=1.0)
        except TimeoutError:
            continue
        if message.type == aiohttp.WSMsgType.BINARY:
            seen += message.data
        elif message.type != aiohttp.WSMsgType.TEXT:
            break
    return seen


def test_a_page_from_another_site_or_without_the_token_starts_nothing(served):
    server = served()
    good = server.ws_url()
    refused = {
        "evil origin": asyncio.run(handshake(good, origin="http://evil.example")),
        "null origin": asyncio.run(handshake(good, origin="null")),
        "rebound host": asyncio.run(handshake(good, headers={"Host": f"evil.example:{server.port}"})),
        "no token": asyncio.run(handshake(f"ws://127.0.0.1:{server.port}/ws")),
        "wrong token": asyncio.run(handshake(server.ws_url("x" * len(server.token)))),
    }
    assert all(status in (403, 404) for status in refused.values()), refused
    time.sleep(1.0)
    assert server.consoles() == {}
    # The page itself needs the token too; with it, it is served.
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=10)
    assert missing.value.code == 404
    with urllib.request.urlopen(server.url, timeout=10) as response:
        page = response.read().decode()
    assert f"/{server.token}/ws" in page and "episcope — demo" in page


def test_a_non_loopback_bind_warns_and_every_session_is_read_only(served):
    server = served("--host", "0.0.0.0")
    assert server.process.poll() is None

    async def session() -> bytes:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.ws_url(), origin=f"http://127.0.0.1:{server.port}") as ws:
                return await drawn(ws, b"READ-ONLY")

    assert b"READ-ONLY" in asyncio.run(session())
    (line,) = server.consoles().values()
    assert line.rstrip().endswith("--readonly")
    os.killpg(server.process.pid, signal.SIGTERM)
    server.process.wait(30)
    warning = server.process.stderr.read()
    assert b"warning: 0.0.0.0 is not a loopback address" in warning and b"read-only" in warning


@pytest.mark.parametrize("given", ["archive", "worktree in its copy"])
def test_serving_an_archive_gives_read_only_sessions(tmp_path, given):
    """``serve`` on the bundled archive, or on a worktree of its unpacked copy: each browser
    session is the read-only console (``--readonly`` on its command line, the archive's
    reason on screen), never a live one."""
    from bundled_example import ARCHIVE

    cache = tmp_path / "cache"
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(cache))
    path = str(ARCHIVE)
    if given != "archive":
        subprocess.run([sys.executable, "-m", "console.cli", "status", path], env=env, check=True,
                       capture_output=True, timeout=120)
        (worktree,) = cache.glob("episcope/archives/*/.atrex_long_horizon_worktrees/*/e0001-*")
        path = str(worktree)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "console.cli", "serve", path, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        seen = b""
        deadline = time.monotonic() + 30
        while not re.search(rb"open http://127\.0\.0\.1:\d+/(\S+)/", seen) and time.monotonic() < deadline:
            if select.select([server.stdout], [], [], 0.2)[0]:
                seen += os.read(server.stdout.fileno(), 4096)
        token = re.search(rb"open http://127\.0\.0\.1:\d+/(\S+)/", seen).group(1).decode()

        async def session() -> bytes:
            async with aiohttp.ClientSession() as http:
                url = f"ws://127.0.0.1:{port}/{token}/ws?width=160&height=40"
                async with http.ws_connect(url, origin=f"http://127.0.0.1:{port}") as ws:
                    return await drawn(ws, b"archive: read-only")

        text = re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b" ", asyncio.run(session()))
        assert b"READ-ONLY" in text and b"archive: read-only" in text and b"LIVE" not in text
        (line,) = [line for line in consoles(str(cache), server.pid).values() if " watch " in line]
        assert line.rstrip().endswith("--readonly")
        if given != "archive":
            assert f" watch {path} " in line  # the worktree asked for, not the copy's active one
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
        for pid in consoles(str(cache), server.pid):
            os.kill(pid, signal.SIGKILL)


def test_sessions_beyond_the_cap_are_refused(served):
    server = served("--max-sessions", "1")

    async def two_sessions() -> int:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.ws_url()):
                await asyncio.sleep(0.5)
                return await handshake(server.ws_url())

    assert asyncio.run(two_sessions()) == 503


def upgrade_then_vanish(port: int, path: str) -> bytes:
    """A browser tab closed mid start-up: the websocket upgrade is accepted, then the TCP
    connection is reset with no closing handshake."""
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"Origin: http://127.0.0.1:{port}\r\n\r\n").encode())
        reply = sock.recv(4096)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # close = reset
    return reply


def test_a_browser_leaving_mid_start_up_leaves_no_console(served):
    server = served()
    path = server.ws_url().split(f":{server.port}", 1)[1]
    assert upgrade_then_vanish(server.port, path).startswith(b"HTTP/1.1 101")
    assert wait_until(lambda: not server.consoles(), 20), server.consoles()

    async def close_politely_during_start_up() -> None:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.ws_url()) as ws:
                await ws.send_json(["resize", {"width": 100, "height": 30}])
                assert wait_until(server.consoles, 10)  # the console is starting: leave now

    asyncio.run(close_politely_during_start_up())
    assert wait_until(lambda: not server.consoles(), 20), server.consoles()
    assert server.process.poll() is None  # the server itself goes on


def test_ctrl_c_exits_130_and_ends_every_session(served):
    server = served()

    async def open_and_interrupt() -> bytes:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.ws_url()) as ws:
                seen = await drawn(ws, b"Versions")
                os.kill(server.process.pid, signal.SIGINT)
                await asyncio.to_thread(server.process.wait, 30)
                return seen

    seen = asyncio.run(open_and_interrupt())
    assert b"Versions" in seen, server.process.stdout.read()[-3000:]  # the console was up and drawing
    assert server.process.returncode == 130
    assert wait_until(lambda: not processes_naming(server.marker), 5) and processes_naming(server.marker) == {}


def test_the_page_never_echoes_a_crafted_host_header(served):
    server = served()
    path = server.url.split(f":{server.port}", 1)[1]
    for host in (f'127.0.0.1:{server.port}"><script>alert(1)</script>', f"127.0.0.1:{server.port}@evil.example"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 403") and b"<script>alert" not in reply, reply[:200]


def test_what_a_console_writes_to_stderr_reaches_the_terminal_made_visible(tmp_path):
    # A console that fails at once with agent text in its error: serve relays its stderr.
    port = free_port()
    failing = [sys.executable, "-c", r"import sys; sys.stderr.write('phase \x1b]0;owned\x07 \x1b[2J done\n')"]
    server_code = ("import sys; from console.web_server import EpiscopeServer; "
                   f"s = EpiscopeServer({failing!r}, host='127.0.0.1', port={port}, title='t', max_sessions=1, "
                   "token='t0ken'); s.serve_until_stopped(); sys.exit(128 + (s.stopped_by or 0))")
    server = subprocess.Popen([sys.executable, "-c", server_code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert wait_until(lambda: b"open" in os.read(server.stdout.fileno(), 4096), 20)

        async def session() -> None:
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(f"ws://127.0.0.1:{port}/t0ken/ws") as ws:
                    await drawn(ws, b"never drawn", seconds=5)

        asyncio.run(session())
        os.kill(server.pid, signal.SIGINT)
        out, _ = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
    assert server.returncode == 130
    assert "phase ␛]0;owned␇ ␛[2J done".encode() in out and b"\x1b]0;" not in out and b"\x07" not in out
