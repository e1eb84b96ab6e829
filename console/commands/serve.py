"""``episcope serve [PATH]``: the console in a browser, through textual-serve.

Each browser session runs its own ``episcope watch`` process. The server listens on
127.0.0.1 unless ``--host`` names another interface, and answers only URLs that carry the
token it prints (``console/web_server.py`` says why). Any other interface exposes the
console to a network: serve warns and every session is read-only. An archive's sessions are
read-only too, as ``episcope watch`` on it is.
"""

from __future__ import annotations

HELP = "Serve the operator console to a web browser (127.0.0.1 only unless --host is given)."
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 4


def add_arguments(parser) -> None:
    from console.cli import PATH_HELP

    parser.add_argument("path", nargs="?", default=".", metavar="PATH", help=PATH_HELP)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default=None,
                        help=f"interface to listen on (default {DEFAULT_HOST}); any other forces --readonly")
    parser.add_argument("--readonly", action="store_true", help="browser sessions may watch but not launch jobs")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                        help=f"browser sessions open at once (default {DEFAULT_MAX_SESSIONS})")


def command_argv(path: str, *, readonly: bool) -> list[str]:
    """The console each browser session runs."""
    import sys

    argv = [sys.executable, "-m", "console.cli", "watch", path]
    if readonly:
        argv.append("--readonly")
    return argv


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    import ipaddress
    import socket

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def run(args) -> int:
    import os
    import sys
    from pathlib import Path

    from console.cli import CommandError
    from console.episode.workspace import WorkspaceError, resolve_workspace

    if not 0 < args.port < 65536:
        raise CommandError(f"--port {args.port} is not a TCP port")
    if args.max_sessions < 1:
        raise CommandError(f"--max-sessions {args.max_sessions} allows no session")
    try:
        workspace = resolve_workspace(args.path)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None
    try:
        from console.web_server import EpiscopeServer
    except ImportError:
        raise CommandError("browser mode needs textual-serve (pip install 'episcope-console[serve]')") from None
    host = args.host or DEFAULT_HOST
    readonly = args.readonly
    if not is_loopback(host):
        print(f"episcope serve: warning: {host} is not a loopback address; anyone who can reach it and has the URL "
              "can watch this episode, so every session is read-only", file=sys.stderr, flush=True)
        readonly = True
    # Sessions run `python -m console.cli`: make this checkout importable for them too.
    root = str(Path(__file__).resolve().parent.parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    # The worktree the operator named (or a directory in it), else the campaign: what
    # resolve_workspace shows for PATH is what each session shows.
    asked = Path(args.path).expanduser().resolve()
    worktree = workspace.worktree
    path = str(worktree if worktree is not None and asked.is_relative_to(worktree) else workspace.campaign_root)
    # A session opens the unpacked copy of an archive, which it knows for one by where it lies
    # (workspace.py); --readonly says so on its command line too.
    readonly = readonly or workspace.archive is not None
    server = EpiscopeServer(command_argv(path, readonly=readonly), host=host, port=args.port,
                            title=f"episcope — {workspace.name}", max_sessions=args.max_sessions)
    try:
        server.serve_until_stopped()
    except OSError as exc:
        raise CommandError(f"cannot serve on {host}:{args.port}: {exc.strerror or exc}") from None
    return 128 + server.stopped_by if server.stopped_by else 0
