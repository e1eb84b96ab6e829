#!/usr/bin/env python3
"""Mark phases and source reads of an optimization iteration in the telemetry trace.

    python tools/iteration_trace.py phase-start <phase>
    python tools/iteration_trace.py phase-end <phase>
    python tools/iteration_trace.py source-read <kind> <reference>

Records go, one JSON line each, to the file named by ATREX_TELEMETRY_TRACE (FORMATS §2);
without it nothing is written, one notice line goes to stderr, and the exit status is 0. A phase marker prints one
``ATREX_TRACE_EVENT=`` receipt line on stdout. Bad input: one line on stderr, exit 2.
Uses the standard library only (it runs where orjson is not installed).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "console" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    # Run from a checkout: the console package beside tools/ wins over an installed one.
    sys.path.insert(0, str(_ROOT))

from console.formats import telemetry_builders as tb  # noqa: E402
from console.formats.plainjson import append_line  # noqa: E402
from console.formats.problems import FormatError  # noqa: E402

USAGE = (
    "usage: iteration_trace.py phase-start <phase> | phase-end <phase> | source-read <kind> <reference>\n"
    f"  phases: {', '.join(tb.PHASES)}\n"
    f"  source kinds: {', '.join(tb.SOURCE_KINDS)}"
)


def build_record(argv: list[str], env: dict) -> dict:
    if len(argv) == 2 and argv[0] in ("phase-start", "phase-end"):
        return tb.phase_record("start" if argv[0] == "phase-start" else "end", argv[1], env)
    if len(argv) == 3 and argv[0] == "source-read":
        return tb.source_read_record(argv[1], argv[2], env)
    raise FormatError(f"expected phase-start|phase-end <phase> or source-read <kind> <reference>, got {argv!r}")


def main(argv: list[str] | None = None, env: dict | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ) if env is None else env
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    try:
        # Validate even when tracing is off, so a bad marker is caught on every run.
        record = build_record(argv, env)
    except FormatError as exc:
        print(f"iteration_trace: {exc}", file=sys.stderr)
        return 2
    trace = env.get(tb.ENV_TRACE)
    if not trace:
        # AKA's contract: untraced runs write nothing and succeed. Said once on stderr, so
        # an operator who forgot the variable does not take silence for a recorded marker.
        print(f"iteration_trace: {tb.ENV_TRACE} is not set; nothing recorded", file=sys.stderr)
        return 0
    try:
        append_line(trace, tb.record_line(record))
    except OSError as exc:
        print(f"iteration_trace: cannot append to {trace}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if "marker_id" in record:
        print(tb.phase_receipt(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
