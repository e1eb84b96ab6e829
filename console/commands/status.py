"""`episcope status [PATH] [--json]`: one document describing the episode now."""

from __future__ import annotations

import atexit
import gc
import sys

HELP = "print the episode's state once (human summary, or one JSON document with --json)"


def add_arguments(parser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="campaign root or episode worktree (default: .)")
    parser.add_argument("--json", action="store_true", help="print the status document as JSON")


def run(args) -> int:
    # One document, then exit. Start-up allocates thousands of objects that live to the end
    # (modules, classes, records) and makes no garbage worth a cycle search, so the cyclic
    # collector is off while the document is made, and at exit (frozen) it does not walk
    # them all once more either: together 5-10% of the run.
    atexit.register(gc.freeze)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _print_status(args)
    finally:
        if collecting:
            gc.enable()


def _print_status(args) -> int:
    from console.cli import CommandError
    from console.episode.session import Session
    from console.episode.summary import status_document
    from console.episode.workspace import WorkspaceError

    try:
        session = Session(args.path)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None
    document = status_document(session.scan())
    if args.json:
        from console.formats.jsonio import dumps

        sys.stdout.buffer.write(dumps(document, indent=True) + b"\n")
        sys.stdout.flush()
    else:
        from console.episode.status_text import render_status

        sys.stdout.write(render_status(document))
    return 0
