"""`episcope status [PATH] [--json]`: one document describing the episode now."""

from __future__ import annotations

import argparse
import sys

HELP = "print the episode's state once (human summary, or one JSON document with --json)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from console.cli import PATH_HELP

    parser.add_argument("path", nargs="?", default=".", metavar="PATH", help=PATH_HELP)
    parser.add_argument("--json", action="store_true", help="print the status document as JSON")


def run(args: argparse.Namespace) -> int:
    from console.cli import CommandError
    from console.episode.session import Session
    from console.episode.summary import status_document
    from console.episode.workspace import WorkspaceError

    try:
        session = Session(args.path)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None
    from console.episode.preflight import check_preflight

    reading = _gpu_reading()
    state = session.scan(final=True)
    # An archive's clock stopped at its last event: a job or phase still running in it ran
    # until then, not until now (the console's archive clock is the same).
    now = state.last_event_at if session.workspace.archive is not None else None
    document = status_document(state, now=now, gpu=reading, preflight=check_preflight(reading))
    if args.json:
        from console.formats.jsonio import dumps

        sys.stdout.buffer.write(dumps(document, indent=True) + b"\n")
        sys.stdout.flush()
    else:
        from console.episode.status_text import render_status

        sys.stdout.write(render_status(document))
    return 0


def _gpu_reading():
    """One NVML reading for the document (no driver: a reading that says why, never 0)."""
    from console.gpu.sampler import GpuSampler

    sampler = GpuSampler()
    try:
        return sampler.sample()
    finally:
        sampler.close()
