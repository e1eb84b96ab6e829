"""`episcope events [PATH] [--follow] [--since ISO] [--kind KIND]`: the event stream as JSON Lines."""

from __future__ import annotations

import argparse
import sys

HELP = "print the episode's events as JSON Lines (with --follow, keep printing as files change)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from console.cli import PATH_HELP

    parser.add_argument("path", nargs="?", default=".", metavar="PATH", help=PATH_HELP)
    parser.add_argument("--follow", "-f", action="store_true", help="keep watching and print new events as they arrive")
    parser.add_argument("--since", metavar="ISO", type=since_epoch,
                        help="only events at or after this time: any ISO-8601 date or time, such as 2026-12, "
                        "2026-12-01 or 2026-12-01T17:48:00Z (a time without an offset is UTC)")
    parser.add_argument("--kind", action="append", metavar="KIND", type=event_kind,
                        help="only events of this kind (repeatable); a wrong one lists the kinds")


def event_kind(text: str) -> str:
    """``--kind``: one of the event kinds; a wrong one is a usage error that lists them."""
    from console.episode.events import KINDS

    if text not in KINDS:
        raise argparse.ArgumentTypeError(f"unknown kind {text!r}; valid kinds: {', '.join(KINDS)}")
    return text


def since_epoch(text: str) -> float:
    """``--since`` as seconds since the epoch. dateutil reads every ISO-8601 form a script may
    pass (reduced precision, week and ordinal dates, a lowercase ``z``), which
    ``datetime.fromisoformat`` does not; the missing parts of a reduced date are its start."""
    from datetime import UTC

    from dateutil.parser import isoparse

    if not text.strip():
        raise argparse.ArgumentTypeError("empty; give an ISO-8601 date or time such as 2026-12-01T17:48:00Z")
    try:
        parsed = isoparse(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not an ISO-8601 date or time: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def run(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli import CommandError
    from console.episode.events import Event
    from console.episode.session import Session
    from console.episode.summary import event_to_json
    from console.episode.workspace import WorkspaceError
    from console.formats.jsonio import dumps

    since = args.since
    kinds = set(args.kind) if args.kind else None
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
