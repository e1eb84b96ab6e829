"""`episcope jobs`: list sandbox jobs, cancel one, or print its log.

    episcope jobs [PATH] [--json]
    episcope jobs cancel ID [--workspace PATH]
    episcope jobs log ID [--stderr] [--workspace PATH]

PATH (default .) is an episode worktree or a campaign root; a campaign's jobs include those
of its shown episode worktree.

Job ids, commands and logs are written by the job, so the human output shows their control
characters as visible stand-ins (``text.visible``): an ESC or BEL in them must not retitle or
clear the operator's terminal. ``--json`` and a log piped elsewhere keep the exact bytes.
"""

from __future__ import annotations

import codecs
import sys
import time
from pathlib import Path

from console.episode.text import visible, visible_lines

HELP = "list sandbox jobs (table, or JSON with --json); `jobs cancel ID`; `jobs log ID`"
ACTIONS = ("cancel", "log")


def add_arguments(parser) -> None:
    parser.add_argument(
        "words",
        nargs="*",
        metavar="[PATH] | cancel ID | log ID",
        help="a workspace or episode archive (.tar.gz) to list (default .), or an action on one job",
    )
    parser.add_argument("--json", action="store_true", help="print the job records as JSON")
    parser.add_argument("--workspace", default=None, help="where the job ran, for cancel and log (default .)")
    parser.add_argument(
        "--stderr",
        action="store_true",
        help="with log: print the job's stderr instead of stdout. On a terminal the log's control "
        "characters are shown as visible stand-ins (as cat -v does); piped, its bytes are passed as they are",
    )


def _roots(path: str, *, changing: bool = False) -> list[Path]:
    """Where the jobs of ``path`` are; ``changing``: for an action that writes there (cancel),
    which an archive (or any path inside its unpacked copy) refuses."""
    from console.cli import EXIT_FAILURE, CommandError
    from console.episode.workspace import WorkspaceError, resolve_workspace

    start = Path(path).expanduser()
    try:
        workspace = resolve_workspace(start)
    except WorkspaceError as exc:
        raise CommandError(str(exc)) from None  # as `status` does: a missing path, a file, a non-workspace
    if changing and workspace.archive is not None:
        raise CommandError(f"{visible(path)}: archive: read-only (its jobs are records of another run)", EXIT_FAILURE)
    if workspace.archive is not None:  # a packed episode: its unpacked copy's roots only
        return [root.resolve() for root in workspace.roots]
    roots = [start.resolve()]
    for root in workspace.roots:
        if root.resolve() not in roots:
            roots.append(root.resolve())
    return roots


def _find_job(words: list[str], workspace: str | None):
    from console.cli import EXIT_FAILURE, CommandError
    from console.formats.job_record import RECORD_NAME, job_dir, read_job_record

    if len(words) != 2:
        raise CommandError(f"usage: episcope jobs {words[0]} ID [--workspace PATH]")
    job_id = words[1]
    if "/" in job_id or job_id in (".", ".."):
        raise CommandError(f"{visible(job_id)!r} is not a job id")
    for root in _roots(workspace or ".", changing=words[0] == "cancel"):
        directory = job_dir(root, job_id)
        found = read_job_record(directory / RECORD_NAME)
        if found.problems:
            raise CommandError(visible(str(found.problems[0])))
        if found.value is not None:
            return root, directory, found.value
    # Not a usage error: the verb ran and found nothing to act on (README's exit 1).
    raise CommandError(f"no job {visible(job_id)} in {visible(workspace or '.')}", EXIT_FAILURE)


def _list(path: str, as_json: bool) -> int:
    from console.formats.job_record import list_job_records

    records, problems = [], []
    for root in _roots(path):
        found, unreadable = list_job_records(root)
        records.extend(found)
        problems.extend(unreadable)
    records.sort(key=lambda r: (r.created_at or "", r.job_id), reverse=True)
    if as_json:
        from console.formats.jsonio import dumps

        document = {"jobs": [r.to_json() for r in records], "unreadable": [p.to_json() for p in problems]}
        sys.stdout.buffer.write(dumps(document, indent=True) + b"\n")
        sys.stdout.flush()
    else:
        sys.stdout.write(render_table(records, time.time()))
    for problem in problems:
        print(f"episcope: unreadable job record {visible(str(problem))}", file=sys.stderr)
    return 0


def _unknown(value) -> str:
    return "?" if value is None else visible(str(value))


def render_table(records, now: float) -> str:
    """The job list as a table; SECONDS is a job's run time, a running one's counted to
    ``now`` (unix seconds), as ``status --json`` gives ``jobs[].elapsed_seconds``."""
    from console.episode.kernels import job_elapsed

    if not records:
        return "no sandbox jobs\n"
    rows = [("JOB", "STATE", "KIND", "EXIT", "CODE", "CREATED", "SECONDS", "COMMAND")]
    for r in records:
        seconds = job_elapsed(r, now)
        rows.append(
            (
                visible(r.job_id),
                visible(r.state),
                _unknown(r.kind),
                _unknown(r.exit_code),
                _unknown(r.result_code),
                visible((r.created_at or "?")[:19].replace("T", " ")),
                "?" if seconds is None else f"{seconds:.1f}",
                visible(" ".join(r.argv)) if r.argv is not None else "?",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _cancel(words: list[str], workspace: str | None) -> int:
    from console.cli import EXIT_FAILURE, CommandError
    from console.formats.job_record import job_record_from_obj
    from console.jobs.runner import UnknownJob, cancel_job

    root, _, record = _find_job(words, workspace)
    if record.terminal:
        print(f"job {visible(record.job_id)} already {visible(record.state)}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        final = job_record_from_obj(cancel_job(root, record.job_id))
    except UnknownJob as exc:
        raise CommandError(str(exc), EXIT_FAILURE) from None
    print(f"{visible(final.job_id)} {visible(final.state)}")
    return 0 if final.state == "cancelled" else EXIT_FAILURE


def _log(words: list[str], workspace: str | None, stderr: bool) -> int:
    from console.cli import EXIT_FAILURE, CommandError
    from console.formats.bounded_read import open_regular_file
    from console.formats.problems import FormatError
    from console.jobs.record import STDERR_LOG, STDOUT_LOG

    _, directory, record = _find_job(words, workspace)
    name = STDERR_LOG if stderr else STDOUT_LOG
    path = directory / name
    try:
        # Never blocks: a FIFO or device under the log's name is refused, not waited on.
        log = open_regular_file(path)
    except FileNotFoundError:
        # Not a usage error: the job is there, the log it would have written is not (exit 1).
        why = "it has not started yet" if record.state == "queued" else "it was removed or never written"
        raise CommandError(f"job {visible(record.job_id)} has no {name}: {why}", EXIT_FAILURE) from None
    except (OSError, FormatError) as exc:
        raise CommandError(visible(f"{path}: {_reason(exc)}")) from None
    # Raw bytes only where no terminal can act on them; a terminal gets the text made visible
    # (undecodable bytes as U+FFFD), decoded incrementally so a character split by a chunk stays whole.
    decoder = codecs.getincrementaldecoder("utf-8")("replace") if sys.stdout.isatty() else None
    with log:
        while True:
            try:
                chunk = log.read(1 << 16)
            except OSError as exc:  # an I/O error part-way: what was printed stays printed
                sys.stdout.flush()
                raise CommandError(visible(f"{path}: {_reason(exc)}")) from None
            if not chunk:
                break
            if decoder is None:
                sys.stdout.buffer.write(chunk)
            else:
                sys.stdout.write(visible_lines(decoder.decode(chunk)))
    if decoder is not None:
        sys.stdout.write(visible_lines(decoder.decode(b"", final=True)))
    sys.stdout.flush()
    return 0


def _reason(exc: Exception) -> str:
    """Why a log cannot be read, in one line that does not repeat its path."""
    from console.formats.problems import one_line

    return one_line(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)


def run(args) -> int:
    from console.cli import CommandError

    words = list(args.words)
    if words and words[0] in ACTIONS:
        if args.json:
            raise CommandError(f"--json applies to the job list, not to {words[0]}")
        if words[0] == "cancel":
            return _cancel(words, args.workspace)
        return _log(words, args.workspace, args.stderr)
    if len(words) > 1:
        raise CommandError(f"unexpected arguments {' '.join(words[1:])!r}")
    if args.workspace is not None and words:
        raise CommandError("give the workspace either as PATH or with --workspace")
    return _list(words[0] if words else (args.workspace or "."), args.json)
