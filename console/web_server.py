"""The browser front door of ``episcope serve``: textual-serve, answering its operator only.

Any web page open in the operator's browser can reach 127.0.0.1, so listening on loopback
protects nothing by itself. Each server therefore makes a random token that must be in the
URL (``/<token>/`` for the page, ``/<token>/ws`` for the console's websocket), and answers
only requests whose Host names this server and whose Origin, when a browser sends one, does
too (a page on another site, or a DNS name rebound to 127.0.0.1, is refused before anything
starts). At most ``max_sessions`` consoles run at once.

Each session's console runs without a shell, in a process group of its own. When the browser
leaves, however early, the console is asked to quit (it ends the jobs it started) and its
group is then terminated; when the server stops, every group still alive is. What
textual-serve relays from a console's stderr to the server's terminal may carry agent text:
it arrives with its control characters made visible.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from rich.console import Console
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from console.episode.text import visible_lines

log = logging.getLogger("episcope.serve")

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
QUIT_SECONDS = 3.0  # a console asked to quit has this long before its group is terminated
TERM_SECONDS = 2.0  # and then this long before it is killed


def allowed_host_names(bind_host: str) -> frozenset[str]:
    """The names a request's Host (and Origin) may carry: loopback, the bind host and, for a
    wildcard bind, this machine's own names."""
    names = set(LOOPBACK_NAMES) | {bind_host.lower()}
    if bind_host in WILDCARD_HOSTS:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def _host_name(authority: str | None) -> str | None:
    """``host`` of ``host:port`` or ``[v6]:port``; None when there is none or the port is
    not a number."""
    if not authority:
        return None
    try:
        parts = urlsplit(f"//{authority}")
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return None
    return parts.hostname


def _netloc(authority: str) -> str:
    """``host[:port]`` of an authority that ``_host_name`` accepted, rebuilt from its parts."""
    parts = urlsplit(f"//{authority}")
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{host}:{parts.port}" if parts.port is not None else str(host)


class SessionProcess(AppService):
    """One browser session's console, started from an argument list (no shell) as the leader
    of its own process group, so that ending the session ends everything it started."""

    def __init__(self, argv: Sequence[str], **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = list(argv)

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        pipe = asyncio.subprocess.PIPE
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=pipe, stdout=pipe, stderr=pipe, env=self._build_environment(width, height),
            start_new_session=True)
        self._stdin = process.stdin
        return process

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def stop(self) -> None:
        """Ask the console to quit, then end its whole process group and reap it."""
        process = self._process
        if process is None:
            return
        try:
            await asyncio.wait_for(super().stop(), QUIT_SECONDS)
            await asyncio.wait_for(process.wait(), QUIT_SECONDS)
        except (TimeoutError, OSError, RuntimeError):
            pass  # a console that does not quit in time is ended below
        for signum, seconds in ((signal.SIGTERM, TERM_SECONDS), (signal.SIGKILL, None)):
            if not signal_group(process.pid, signum):
                break
            try:
                await asyncio.wait_for(process.wait(), seconds)
                break
            except TimeoutError:
                continue
        # A console that exited may leave helpers in its group: they go with it.
        signal_group(process.pid, signal.SIGKILL)
        await process.wait()

    def kill_now(self) -> None:
        """The last resort when the event loop is gone: kill the group without waiting."""
        if self._process is not None:
            signal_group(self._process.pid, signal.SIGKILL)


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to a session's process group; False when the group is gone."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class VisibleStream:
    """A text stream that writes everything with control characters made visible."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(visible_lines(text))

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


class EpiscopeServer(Server):
    """textual-serve's server with a token, a Host/Origin allowlist and a session cap."""

    def __init__(self, argv: Sequence[str], *, host: str, port: int, title: str, max_sessions: int,
                 token: str | None = None) -> None:
        super().__init__(shlex.join(argv), host=host, port=port, title=title)
        self.argv = list(argv)
        self.token = token or secrets.token_urlsafe(24)
        self.max_sessions = max_sessions
        self.allowed_names = allowed_host_names(host)
        self.open_sessions = 0  # counted from the upgrade on, before any await
        self.sessions: set[SessionProcess] = set()  # those whose console was started
        self.stopped_by: int | None = None  # the signal that stopped the server

    def urls(self) -> list[str]:
        """Where an operator opens the console (the token included)."""
        if self.host in WILDCARD_HOSTS:
            names = ["127.0.0.1", socket.gethostname()]
        else:
            names = [f"[{self.host}]" if ":" in self.host else self.host]
        return [f"http://{name}:{self.port}/{self.token}/" for name in names]

    # -- the aiohttp application ---------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        # textual-serve's download route is left out: the console delivers no files.
        app.add_routes([
            web.get("/{token}/", self.handle_index),
            web.get("/{token}/ws", self.handle_websocket),
            web.static("/static", self.statics_path),
        ])
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def on_shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(s.stop() for s in list(self.sessions)), return_exceptions=True)

    def admit(self, request: web.Request) -> None:
        """Refuse a request without this server's token, or from a name or page not its own."""
        if not secrets.compare_digest(request.match_info.get("token", "").encode(), self.token.encode()):
            raise web.HTTPForbidden(text="episcope serve: wrong or missing token; open the URL serve printed\n")
        if _host_name(request.headers.get("Host")) not in self.allowed_names:
            raise web.HTTPForbidden(text="episcope serve: this server does not answer to that host name\n")
        origin = request.headers.get("Origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or _host_name(parts.netloc) not in self.allowed_names:
                raise web.HTTPForbidden(text="episcope serve: requests from another site are refused\n")

    async def handle_index(self, request: web.Request) -> web.Response:
        self.admit(request)
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            # Rebuilt from the checked parts: the Host header's own text is never echoed.
            "app_websocket_url": f"ws://{_netloc(request.headers['Host'])}/{self.token}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        self.admit(request)
        if self.open_sessions >= self.max_sessions:
            raise web.HTTPServiceUnavailable(text=f"episcope serve: {self.max_sessions} sessions are open already\n")
        self.open_sessions += 1
        websocket = web.WebSocketResponse(heartbeat=15)
        service: SessionProcess | None = None
        try:
            await websocket.prepare(request)
            service = SessionProcess(self.argv, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                     close=websocket.close, download_manager=self.download_manager)
            self.sessions.add(service)
            await service.start(to_int(request.query.get("width", "80"), 80),
                                to_int(request.query.get("height", "24"), 24))
            await self._process_messages(websocket, service)
        except (ValueError, AssertionError, ConnectionError) as exc:  # a malformed frame ends the session
            log.warning("session ended: %s", exc)
        finally:
            try:
                if service is not None:
                    await service.stop()
                    self.sessions.discard(service)
                await websocket.close()
            finally:
                self.open_sessions -= 1
        return websocket

    # -- running ----------------------------------------------------------------------------

    def serve_until_stopped(self) -> None:
        """Serve until SIGINT or SIGTERM (kept in ``stopped_by``); no session outlives it."""
        # textual-serve's own log keeps the real stream (its colours are escape codes); what
        # it relays from a console's stderr goes through sys.stdout, made visible.
        self.console = Console(file=sys.stdout)
        self.initialize_logging()
        real_stdout, sys.stdout = sys.stdout, VisibleStream(sys.stdout)
        try:
            asyncio.run(self._serve())
        finally:
            sys.stdout = real_stdout

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_signal(signum: int) -> None:
            self.stopped_by = signum
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        runner = web.AppRunner(await self._make_app(), access_log=None, shutdown_timeout=QUIT_SECONDS + TERM_SECONDS)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
            # Announced only once the socket listens: whoever reads the URL can use it at once.
            for url in self.urls():
                print(f"episcope serve: open {url}", flush=True)
            print(f"episcope serve: at most {self.max_sessions} sessions; Ctrl-C stops the server and every one",
                  flush=True)
            await stop.wait()
        finally:
            await runner.cleanup()  # on_shutdown ends every session
            for service in list(self.sessions):
                if service.alive():
                    service.kill_now()
