#!/usr/bin/env python3
"""Run a command on a staged copy of the workspace and copy its outputs back (FORMATS §8).

    python tools/sandbox.py [--kind auto|run|profile|dev] [--timeout S] [--sync PATH]...
                            [--input PATH]... [-e KEY=VALUE]... [--max-log-mb N]
                            [--backend local|ray [--address URL]] [--dry-run] -- COMMAND [ARG...]

The command's output is echoed as it is produced and kept in the job's directory,
``.atrex_long_horizon/sandbox/<job-id>/``, beside its live ``job.json``. At most four jobs
of one workspace run at once; more wait, queued. SIGINT or SIGTERM cancels the job and
ends its whole process tree (see ``console/jobs/supervisor.py``).

Exit status: 0 success; 1 not all_pass, job failed, cancelled or timed out, or a usage
error; 2 unparseable result; a dev command's own status; 75 not started, retry later.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "console" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    # Run from a checkout: the console package beside tools/ wins over an installed one.
    sys.path.insert(0, str(_ROOT))

from console.formats.plainjson import dumps  # noqa: E402
from console.jobs import BackendUnavailable, RequestError, parse_request, run_job  # noqa: E402

_output_lock = threading.Lock()


def echo(stream: str, data: bytes) -> None:
    target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
    with _output_lock:
        try:
            target.write(data)
            target.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads our output any more; the job's logs still have it


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        request, dry_run = parse_request(argv)
    except RequestError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    if dry_run:
        print(dumps(request.to_json()).decode())
        return 0
    cancel = threading.Event()

    def on_signal(signum, frame) -> None:
        cancel.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        outcome = run_job(request, echo, cancel=cancel, launcher="sandbox")
    except BackendUnavailable as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    return outcome.code


if __name__ == "__main__":
    sys.exit(main())
