"""A sandbox job request: the flags of ``tools/sandbox.py`` (FORMATS §8), parsed and checked.

Everything an executor needs travels in :class:`JobRequest`, including the environment the
command must see, so a remote backend runs exactly what a local one would.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

KINDS = ("auto", "run", "profile", "dev")
BACKENDS = ("local", "ray")
PROFILE_LEVELS = ("survey", "sol", "deep")
PROFILERS = ("ncu", "rocprofv3")
DEFAULT_SYNC = ("profiles",)
DEFAULT_TIMEOUT = 300.0
MAX_TIMEOUT = 600.0
# Profile settings the caller's environment may hand to the profiled command.
PROFILE_PASSTHROUGH = ("PROFILE_ITERS", "PROFILE_WARMUP", "PROFILE_WORKLOAD_IDX", "PROFILE_SHAPE_ID", "PROFILE_DEVICE")
PRIVATE_SHAPES_ENV = "EPISCOPE_PRIVATE_SHAPES"
PRIVATE_CASE_NAME = ".atrex_private_profile_case.json"
EVALUATOR_NAMES = ("test_kernel.py",)
PROFILER_NAMES = ("profile_nvidia.sh", "profile_kernel.sh", "profile_driver.py")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class RequestError(ValueError):
    """A request the sandbox refuses; the message is one line."""


class _Parser(argparse.ArgumentParser):
    # FORMATS §8 gives usage errors exit status 1 (2 means an unparseable result), so a
    # usage error is raised to the caller instead of argparse's own exit.
    def error(self, message: str):
        raise RequestError(message)


@dataclass(frozen=True, slots=True)
class JobRequest:
    argv: tuple[str, ...]
    kind: str  # resolved: run | profile | dev
    workspace: str  # absolute
    timeout: float = DEFAULT_TIMEOUT
    sync: tuple[str, ...] = DEFAULT_SYNC
    inputs: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)  # set on top of the executor's own environment
    backend: str = "local"
    include_raw_profile: bool = False
    profile_level: str = "sol"
    profiler: str = "ncu"
    kernel_regex: str | None = None
    top_kernels: int | None = None
    max_input_file_mb: float = 16.0
    max_output_file_mb: float = 8.0
    max_log_mb: float = 64.0  # per output stream; past it the middle of the log is left out
    address: str | None = None  # the Ray dashboard (--backend ray); None: EPISCOPE_RAY_ADDRESS or the default

    @property
    def max_log_bytes(self) -> int:
        return int(self.max_log_mb * 1024 * 1024)

    @property
    def max_input_bytes(self) -> int:
        return int(self.max_input_file_mb * 1024 * 1024)

    @property
    def max_output_bytes(self) -> int:
        return int(self.max_output_file_mb * 1024 * 1024)

    def to_json(self) -> dict:
        out = asdict(self)
        out["argv"] = list(self.argv)
        out["sync"] = list(self.sync)
        out["inputs"] = list(self.inputs)
        out["env"] = dict(sorted(self.env.items()))
        return out


def resolve_kind(kind: str, argv: list[str] | tuple[str, ...]) -> str:
    if kind != "auto":
        return kind
    names = {os.path.basename(a) for a in argv}
    if names.intersection(EVALUATOR_NAMES):
        return "run"
    if names.intersection(PROFILER_NAMES):
        return "profile"
    return "dev"


def check_relative(path: str, what: str) -> str:
    """Return ``path`` normalised, or refuse anything that could leave the workspace."""
    if not path or "\0" in path:
        raise RequestError(f"{what} path is empty")
    if path.startswith("/") or os.path.isabs(path):
        raise RequestError(f"{what} path {path!r} is absolute; give a path relative to the workspace")
    parts = PurePosixPath(path).parts
    if ".." in parts:
        raise RequestError(f"{what} path {path!r} climbs out of the workspace with '..'")
    clean = str(PurePosixPath(*parts)) if parts else "."
    if clean == ".":
        raise RequestError(f"{what} path {path!r} names the whole workspace")
    return clean


def check_sync(path: str) -> str:
    clean = check_relative(path, "--sync")
    first = PurePosixPath(clean).parts[0]
    if first == "memory":
        raise RequestError(f"--sync {path!r} refused: memory/ is written only by the supervisor")
    if first in (".git", ".atrex_long_horizon") or clean == PRIVATE_CASE_NAME:
        raise RequestError(f"--sync {path!r} refused: a protected path")
    return clean


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sandbox.py",
        description="Run a command on a staged copy of the workspace and copy back its outputs.",
    )
    parser.add_argument("--kind", choices=KINDS, default="auto")
    parser.add_argument("--workspace", default=".")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds, 1..600")
    parser.add_argument("--sync", action="append", default=None, metavar="PATH")
    parser.add_argument("--no-sync", action="store_true")
    parser.add_argument("--input", action="append", default=[], metavar="PATH", dest="inputs")
    parser.add_argument("--include-raw-profile", action="store_true")
    parser.add_argument("--profile-level", choices=PROFILE_LEVELS, default="sol")
    parser.add_argument("--profiler", choices=PROFILERS, default="ncu")
    parser.add_argument("--kernel-regex", default=None)
    parser.add_argument("--top-kernels", type=int, default=None, metavar="N")
    parser.add_argument("--max-input-file-mb", type=float, default=16.0)
    parser.add_argument("--max-output-file-mb", type=float, default=8.0)
    parser.add_argument("--max-log-mb", type=float, default=64.0, help="per stream of the job's log")
    parser.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--backend", choices=BACKENDS, default="local")
    parser.add_argument("--address", default=None, metavar="URL", help="the Ray dashboard, with --backend ray")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    return parser


def request_from_args(args: argparse.Namespace, environ: dict | None = None) -> JobRequest:
    environ = os.environ if environ is None else environ
    argv = list(args.command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise RequestError("no command given (sandbox.py [flags] -- COMMAND ...)")
    if not 1 <= args.timeout <= MAX_TIMEOUT:
        raise RequestError(f"--timeout {args.timeout:g} is outside 1..{MAX_TIMEOUT:g} seconds")
    for flag, value in (
        ("--max-input-file-mb", args.max_input_file_mb),
        ("--max-output-file-mb", args.max_output_file_mb),
        ("--max-log-mb", args.max_log_mb),
    ):
        if not 0 < value < float("inf"):
            raise RequestError(f"{flag} must be a positive number")
    if args.top_kernels is not None and args.top_kernels < 1:
        raise RequestError("--top-kernels must be at least 1")
    if args.address is not None and args.backend != "ray":
        raise RequestError("--address applies to --backend ray")
    if args.no_sync and args.sync:
        raise RequestError("--no-sync and --sync exclude each other")
    sync = () if args.no_sync else tuple(dict.fromkeys(check_sync(p) for p in (args.sync or DEFAULT_SYNC)))
    inputs = tuple(dict.fromkeys(check_relative(p, "--input") for p in args.inputs))
    workspace = Path(args.workspace).resolve()
    if not workspace.is_dir():
        raise RequestError(f"workspace {args.workspace!r} is not a directory")
    kind = resolve_kind(args.kind, argv)

    env: dict[str, str] = {}
    if kind == "profile":
        env.update({k: environ[k] for k in PROFILE_PASSTHROUGH if k in environ})
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not _ENV_KEY.match(key):
            raise RequestError(f"-e {item!r} is not KEY=VALUE")
        if key == PRIVATE_SHAPES_ENV:
            raise RequestError(f"-e {PRIVATE_SHAPES_ENV} refused: the private shapes table is operator configuration")
        env[key] = value
    if args.profile_level == "deep" and not (
        args.kernel_regex and args.kernel_regex.startswith("^") and args.kernel_regex.endswith("$") and len(args.kernel_regex) > 2
    ):
        raise RequestError("--profile-level deep needs --kernel-regex '^<exact kernel name>$'")
    if args.kernel_regex is not None:
        try:
            re.compile(args.kernel_regex)
        except re.error as exc:
            raise RequestError(f"--kernel-regex is not a regular expression: {exc}") from None
    if kind == "profile":
        env["PROFILE_LEVEL"] = args.profile_level
        env["PROFILE_PROFILER"] = args.profiler
        if args.kernel_regex is not None:
            env["PROFILE_KERNEL_REGEX"] = args.kernel_regex
        if args.top_kernels is not None:
            env["PROFILE_TOP_KERNELS"] = str(args.top_kernels)
        if args.include_raw_profile:
            env["PROFILE_INCLUDE_RAW"] = "1"
    return JobRequest(
        argv=tuple(argv),
        kind=kind,
        workspace=str(workspace),
        timeout=float(args.timeout),
        sync=sync,
        inputs=inputs,
        env=env,
        backend=args.backend,
        include_raw_profile=bool(args.include_raw_profile),
        profile_level=args.profile_level,
        profiler=args.profiler,
        kernel_regex=args.kernel_regex,
        top_kernels=args.top_kernels,
        max_input_file_mb=float(args.max_input_file_mb),
        max_output_file_mb=float(args.max_output_file_mb),
        max_log_mb=float(args.max_log_mb),
        address=args.address,
    )


def parse_request(argv: list[str], environ: dict | None = None) -> tuple[JobRequest, bool]:
    """Parse sandbox flags; return the request and whether it is a dry run.

    Usage errors and refused requests raise :class:`RequestError`.
    """
    args = build_parser().parse_args(argv)
    return request_from_args(args, environ), bool(args.dry_run)
