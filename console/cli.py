"""The ``episcope`` command line: one argparse front door, one module per verb.

Verb modules live in ``console/commands/`` and expose ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. They must import nothing heavy at module level: the headless verbs
(status, events, jobs, init) never import Textual, and ``episcope --help`` imports every
verb module (a run of one verb imports only its own).

Exit codes (all verbs): 0 success; 1 the verb ran and reports a failure (a job failed, a
cancel found no job to cancel, output that could not be written); 2 usage error or unusable
input (bad path, not a workspace); 130 interrupted. Data goes to stdout; errors are one line
on stderr, a usage error with the usage of the verb at fault.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

VERBS: dict[str, str] = {
    "status": "console.commands.status",
    "events": "console.commands.events",
    "jobs": "console.commands.jobs",
    "init": "console.commands.init",
    "watch": "console.commands.watch",
    "replay": "console.commands.replay",
    "serve": "console.commands.serve",
}

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


# What a verb's PATH may be, said alike by every verb that takes one.
PATH_HELP = "campaign root, episode worktree or episode archive (.tar.gz) (default: .)"


class CommandError(Exception):
    """An error a verb reports as one line on stderr, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse, with the usage error as one line (README): the message, then the usage of
    the parser at fault, which for a verb's words is that verb's own."""

    def error(self, message: str) -> NoReturn:
        from console.episode.text import visible  # the words may be anything a script passed

        usage = " ".join(self.format_usage().split())
        self.exit(EXIT_USAGE, f"{self.prog}: {visible(message)} ({usage})\n")


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (``verb``) only that verb's sub-parser: running one verb
    imports no other verb's module."""
    return _parsers(verb)[0]


def _parsers(verb: str | None) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = _Parser(
        prog="episcope",
        description="Watch, drive and replay GPU-kernel optimization episodes.",
    )
    from console import __version__

    parser.add_argument("--version", action="version", version=f"episcope {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs: dict[str, argparse.ArgumentParser] = {}
    for name, module_name in VERBS.items():
        if verb is not None and name != verb:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        verb_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(verb_parser)
        verb_parser.set_defaults(_run=module.run)
        verbs[name] = verb_parser
    return parser, verbs


def _with_default_verb(argv: list[str]) -> list[str]:
    # `episcope [PATH]` means `episcope watch [PATH]`.
    if not argv or (argv[0] not in VERBS and not argv[0].startswith("-")):
        return ["watch", *argv]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = _with_default_verb(list(sys.argv[1:] if argv is None else argv))
    verb = argv[0] if argv[0] in VERBS else None
    parser, verbs = _parsers(verb)
    # A verb's own parser reads its words, so that a wrong one is reported with its usage.
    args = verbs[verb].parse_args(argv[1:]) if verb in verbs else parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = int(run(args) or 0)
        # What stdout's buffer still holds is written now: failing at exit, it would be a traceback.
        sys.stdout.flush()
        return code
    except CommandError as exc:
        print(f"episcope: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # A reader such as `head` went away; that is not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:
        # An I/O error no verb turned into a message, such as a full disk under stdout.
        print(f"episcope: {_io_error(exc)}", file=sys.stderr)
        return EXIT_FAILURE


def _io_error(exc: OSError) -> str:
    """``exc`` as one line; when stdout itself cannot be written, said so, and its unwritten
    bytes dropped (Python would try them again at exit, and report that as a traceback)."""
    from console.episode.text import visible

    try:
        sys.stdout.flush()
    except OSError as again:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return f"cannot write to stdout: {again.strerror or again}"
    return visible(str(exc))


if __name__ == "__main__":
    # Under `python -m console.cli` this module is __main__; the verbs raise the
    # CommandError of console.cli, so run that module's main.
    from console.cli import main as _main

    sys.exit(_main())
