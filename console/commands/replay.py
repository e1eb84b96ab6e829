"""``episcope replay [PATH]``: the console's panes on a virtual clock.

PATH is a workspace (its append-only files, snapshots and git history are replayed) or a
recording the console kept while watching (``--list`` shows them).
"""

from __future__ import annotations

import argparse

HELP = "Replay an episode (from its files and git history, or from a console recording) on a virtual clock."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", metavar="PATH",
                        help="campaign root, episode worktree, episode archive (.tar.gz) or a console recording "
                        "(default: .)")
    parser.add_argument("--speed", type=positive_speed, default=None, help="initial speed factor (e.g. 10)")
    parser.add_argument("--play", action="store_true", help="start playing at once")
    parser.add_argument("--list", action="store_true", help="print the recordings kept so far, one path a line, and exit")


def positive_speed(text: str) -> float:
    """A finite speed factor above 0 (``nan`` and ``inf`` parse as floats, and are no speed)."""
    import math

    try:
        speed = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(speed) or speed <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return speed


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    from pathlib import Path

    from console.cli import CommandError
    from console.episode.replay import (
        SPEEDS,
        RecordingError,
        Replay,
        episode_events,
        is_recording,
        load_recording,
        recordings_dir,
    )

    if args.list:
        directory = recordings_dir()
        for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else ():
            print(path)
        return 0
    path = Path(args.path)
    recording = path.is_file() and not path.name.endswith((".tar.gz", ".tgz"))
    if recording and not is_recording(path):
        raise CommandError(f"{path} is a file, not a workspace, a .tar.gz archive or an episcope recording")
    # Like watch: a console drawn into a pipe or a file is escape codes nobody can read.
    if not sys.stdout.isatty() and "TEXTUAL_DRIVER" not in os.environ:
        raise CommandError("replay needs a terminal; for output a program can read use `episcope events`")
    if recording:
        try:
            header, events, problems = load_recording(path)
        except RecordingError as exc:
            raise CommandError(str(exc)) from None
        from console.episode.events import UNREADABLE, Event

        events += [Event(UNREADABLE, p.path, p.offset, None, p) for p in problems]
        replay = Replay(events, campaign_root=header.campaign_root, campaign=header.campaign, worktree=header.worktree)
    else:
        from console.episode.workspace import WorkspaceError

        try:
            workspace, events = episode_events(path)
        except WorkspaceError as exc:
            raise CommandError(str(exc)) from None
        replay = Replay(events, campaign_root=str(workspace.campaign_root), campaign=workspace.name,
                        worktree=str(workspace.worktree) if workspace.worktree else None)
    if args.speed is not None:
        replay.speed_index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - args.speed))
    replay.playing = args.play

    from console.app import EpiscopeApp

    app = EpiscopeApp(replay=replay, readonly=True, sample_gpu=False)
    app.run()
    return app.return_code or 0
