#!/usr/bin/env python3
"""Mark phases and source reads of an optimization iteration in the telemetry trace.

    python tools/iteration_trace.py phase-start <phase>
    python tools/iteration_trace.py phase-end <phase>
    python tools/iteration_trace.py source-read <kind> <reference>

Records go, one JSON line each, to the file named by ATREX_TELEMETRY_TRACE (FORMATS §2),
byte for byte as AKA's writer records the same input; without the variable nothing is
written, one notice line goes to stderr, and the exit status is 0. A phase marker prints one
``ATREX_TRACE_EVENT=`` receipt line on stdout. Bad input: one line on stderr, exit 2. A
trace that cannot be appended to (a directory, a FIFO, a device): one line, exit 1.
Uses the standard library only (it runs where orjson is not installed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "console" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    # Run from a checkout: the console package beside tools/ wins over an installed one.
    sys.path.insert(0, str(_ROOT))

from console.formats import telemetry_builders as tb  # noqa: E402
from console.formats.plainjson import append_line  # noqa: E402
from console.formats.problems import FormatError  # noqa: E402


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line on stderr, as for every other bad input, with the usage of the command at fault.
        usage = " ".join(self.format_usage().split())
        self.exit(2, f"iteration_trace: {message} ({usage})\n")


def build_parser() -> argparse.ArgumentParser:
    # The command line is AKA's (argparse sub-commands), so the same words reach the same
    # record: a reference starting with "-" needs "--" before it, as it does there.
    parser = _Parser(prog="iteration_trace.py", description="Record an explicit marker in the telemetry trace "
                     f"named by {tb.ENV_TRACE} (one JSON line each).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, what in (("phase-start", "a phase begins"), ("phase-end", "a phase ends")):
        sub.add_parser(name, help=what, description=what).add_argument("phase", choices=tb.PHASES)
    source = sub.add_parser("source-read", help="a source was read", description="a source was read: a relative "
                            "path, or for public_web an http(s) URL (query and fragment dropped); at most 500 "
                            "characters are kept")
    source.add_argument("source_kind", choices=tb.SOURCE_KINDS)
    source.add_argument("reference")
    return parser


def build_record(args: argparse.Namespace, env: Mapping[str, str]) -> dict:
    if args.command == "source-read":
        return tb.source_read_record(args.source_kind, args.reference, env)
    return tb.phase_record("start" if args.command == "phase-start" else "end", args.phase, env)


def main(argv: list[str] | None = None, env: dict | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ) if env is None else env
    try:
        # Validate even when tracing is off, so a bad marker is caught on every run.
        record = build_record(args, env)
        line = tb.record_line(record)
    except FormatError as exc:
        print(f"iteration_trace: {exc}", file=sys.stderr)
        return 2
    except UnicodeEncodeError:
        # An argument or variable that held bytes which are not UTF-8 (the JSON line must be).
        print("iteration_trace: the record would hold text that is not valid UTF-8", file=sys.stderr)
        return 2
    trace = env.get(tb.ENV_TRACE)
    if not trace:
        # AKA's contract: untraced runs write nothing and succeed. Said once on stderr, so
        # an operator who forgot the variable does not take silence for a recorded marker.
        print(f"iteration_trace: {tb.ENV_TRACE} is not set; nothing recorded", file=sys.stderr)
        return 0
    try:
        append_line(trace, line)
    except OSError as exc:
        print(f"iteration_trace: cannot append to {trace}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if "marker_id" in record:
        print(tb.phase_receipt(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
