"""`episcope events [PATH] [--follow] [--since ISO]`: the event stream as JSON Lines."""

from __future__ import annotations

import argparse
import sys

HELP = "print the episode's events as JSON Lines (with --follow, keep printing as files change)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="campaign root or episode worktree (default: .)")
    parser.add_argument("--follow", "-f", action="store_true", help="keep watching and print new events as they arrive")
    parser.add_argument("--since", metavar="ISO", help="only events at or after this UTC time (ISO-8601)")
    parser.add_argument("--kind", action="append", metavar="KIND", help="only events of this kind (repeatable)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli import CommandError
    from console.episode.clock import iso_to_epoch
    from console.episode.events import Event
    from console.episode.session import Session
    from console.episode.summary import event_to_json
    from console.episode.workspace import WorkspaceError
    from console.formats.jsonio import dumps

    since = None
    if args.since:
        since = iso_to_epoch(args.since)
        if since is None:
            raise CommandError(f"--since: not an ISO-8601 time: {args.since!r}")
    kinds = set(args.kind) if args.kind else None
    if kinds is not None:
        from console.episode.events import KINDS

        unknown = sorted(kinds.difference(KINDS))
        if unknown:
            raise CommandError(f"--kind {', '.join(unknown)}: unknown; valid kinds: {', '.join(KINDS)}")
    try:
        session = Session(args.path)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None
    out = sys.stdout.buffer

    def emit(batch: list[Event]) -> None:
        lines = [
            dumps(event_to_json(e)) + b"\n"
            for e in batch
            if (kinds is None or e.kind in kinds) and (since is None or (e.at is not None and e.at >= since))
        ]
        if lines:
            out.write(b"".join(lines))
            out.flush()

    batch: list[Event] = []
    for event in session.scan_events(final=not args.follow):
        batch.append(event)
        if len(batch) >= 4096:
            emit(batch)
            batch: list[Event] = []
    emit(batch)
    if not args.follow:
        return 0

    async def follow() -> None:
        async for events in session.follow_events():
            emit(events)

    asyncio.run(follow())
    return 0
