"""``episcope serve [PATH]``: the console in a browser, through textual-serve.

Each browser session runs its own ``episcope watch`` process. The server listens on
127.0.0.1 unless ``--host`` names another interface: the console can launch GPU jobs, so
it is never exposed to a network by default.
"""

from __future__ import annotations

HELP = "Serve the operator console to a web browser (127.0.0.1 only unless --host is given)."
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def add_arguments(parser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="campaign root or episode worktree (default: .)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default=None, help=f"interface to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--readonly", action="store_true", help="browser sessions may watch but not launch jobs")


def command_line(path: str, *, readonly: bool) -> str:
    """The shell command each browser session runs."""
    import shlex
    import sys

    argv = [sys.executable, "-m", "console.cli", "watch", path]
    if readonly:
        argv.append("--readonly")
    return shlex.join(argv)


def run(args) -> int:
    import os
    from pathlib import Path

    from console.cli import CommandError
    from console.episode.workspace import WorkspaceError, resolve_workspace

    if not 0 < args.port < 65536:
        raise CommandError(f"--port {args.port} is not a TCP port")
    try:
        workspace = resolve_workspace(args.path)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None
    try:
        from textual_serve.server import Server
    except ImportError:
        raise CommandError("browser mode needs textual-serve (pip install 'episcope[serve]')") from None
    # Sessions run `python -m console.cli`: make this checkout importable for them too.
    root = str(Path(__file__).resolve().parent.parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    path = str(workspace.worktree if Path(args.path).resolve() == workspace.worktree else workspace.campaign_root)
    server = Server(command_line(path, readonly=args.readonly), host=args.host or DEFAULT_HOST, port=args.port,
                    title=f"episcope — {workspace.name}")
    server.serve()
    return 0
