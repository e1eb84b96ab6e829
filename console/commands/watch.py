"""``episcope watch [PATH]``: the operator console on a live episode (also ``episcope [PATH]``)."""

from __future__ import annotations

HELP = "Open the operator console on an episode workspace and follow it live."


def add_arguments(parser) -> None:
    from console.cli import PATH_HELP

    parser.add_argument("path", nargs="?", default=".", metavar="PATH", help=PATH_HELP)
    parser.add_argument("--readonly", action="store_true", help="watch only: every job action is dimmed and refused")
    parser.add_argument("--no-record", action="store_true",
                        help="do not keep a recording of this session (recordings live under the user state directory)")


def run(args) -> int:
    import os
    import sys

    from console.cli import CommandError
    from console.episode.workspace import WorkspaceError, resolve_workspace

    try:
        workspace = resolve_workspace(args.path)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None
    # A console drawn into a pipe or a file is escape codes nobody can read; under serve,
    # textual-serve names the driver that speaks to the browser instead.
    if not sys.stdout.isatty() and "TEXTUAL_DRIVER" not in os.environ:
        raise CommandError("the console needs a terminal; for output a program can read use "
                           "`episcope status --json` or `episcope events`")
    app = console_app(args, workspace)
    app.run()
    return app.return_code or 0


def console_app(args, workspace):
    """The console ``watch`` runs on ``workspace`` (what ``args.path`` resolved to)."""
    import time

    from console.actions import JobLauncher
    from console.app import EpiscopeApp
    from console.cli import CommandError
    from console.episode.replay import Recorder, new_recording_path, prune_recordings

    recorder = None
    if not args.no_record:
        try:
            recorder = Recorder(new_recording_path(workspace.name, workspace.campaign_root),
                                campaign_root=str(workspace.campaign_root),
                                campaign=workspace.name,
                                worktree=str(workspace.worktree) if workspace.worktree else None)
        except OSError as exc:
            raise CommandError(f"cannot create a recording: {exc} (use --no-record)") from None
        prune_recordings(workspace.name, workspace.campaign_root)

    def open_session():
        # The console calls this after its first frame: the session loads the ingest and
        # the reducer, which that frame (the layout, "scanning…") does not need.
        from console.episode.session import Session

        return Session(args.path, workspace=workspace, on_event=recorder.record if recorder else None)

    # An archive's unpacked copy is shared by every later look at it: nothing may change it.
    # Opened by any path inside the copy, the workspace is an archive all the same (workspace.py).
    readonly = args.readonly or workspace.archive is not None
    launcher = None if readonly else JobLauncher(workspace.episode_root)
    # This machine's GPU says nothing about a recorded episode: an archive is not sampled.
    # An archive is frozen: its "now" is its newest event, not this machine's clock.
    return EpiscopeApp(workspace=workspace, open_session=open_session, readonly=readonly, launcher=launcher,
                       recorder=recorder, sample_gpu=workspace.archive is None,
                       clock=time.time if workspace.archive is None else None,
                       readonly_reason="archive: read-only" if workspace.archive is not None else "read-only")
