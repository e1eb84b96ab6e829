"""What a finished job means: the evaluator's verdict, the profile summary, the exit status.

Shared by every backend: they all see the command's stdout as a byte stream and the synced
output files, and must answer with the same exit status (FORMATS §8).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from console.formats.gpu_side import PROFILE_PREFIX, RESULT_PREFIX, evaluation_record, parse_result_line
from console.formats.plainjson import append_json_line, atomic_write_bytes, dumps
from console.formats.problems import FormatError

GATEWAY_PROFILE = "gateway_profile.json"
EVALUATIONS = Path(".atrex_long_horizon") / "evaluations.jsonl"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNPARSEABLE = 2
EXIT_NOT_STARTED = 75  # EX_TEMPFAIL: nothing ran, try again later

_PREFIX = RESULT_PREFIX.encode()
_MAX_LINE = 16 * 1024 * 1024


class ResultScanner:
    """Keeps the last ``RESULT_JSON`` line of a stdout stream fed to it in chunks.

    A line longer than ``_MAX_LINE`` is no result line: it is skipped up to its end, without
    being gathered, so a never-ending line costs neither memory nor repeated copying.
    """

    def __init__(self) -> None:
        self._partial: list[bytes] = []
        self._partial_size = 0
        self._skipping = False  # inside an overlong line
        self.last_line: str | None = None

    def feed(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        tail = lines.pop()
        for line in lines:
            if self._skipping:
                self._skipping = False
            else:
                self._take(b"".join(self._partial) + line)
            self._partial, self._partial_size = [], 0
        if tail and not self._skipping:
            self._partial.append(tail)
            self._partial_size += len(tail)
            if self._partial_size > _MAX_LINE:
                self._partial, self._partial_size, self._skipping = [], 0, True

    def close(self) -> None:
        if self._partial and not self._skipping:
            self._take(b"".join(self._partial))
        self._partial, self._partial_size, self._skipping = [], 0, False

    def _take(self, line: bytes) -> None:
        if line.lstrip().startswith(_PREFIX):
            self.last_line = line.decode("utf-8", errors="replace")

    def result(self) -> dict | None:
        """The verdict (the RESULT_JSON object), ``None`` without a result line; :class:`FormatError` when malformed."""
        self.close()
        return None if self.last_line is None else parse_result_line(self.last_line)


class ScannerSink:
    """An output sink that also scans stdout for the verdict, then hands output on."""

    def __init__(self, on_output: Callable[[str, bytes], None] | None) -> None:
        self.scanner = ResultScanner()
        self._on_output = on_output

    def feed_stream(self, stream: str, data: bytes) -> None:
        if stream == "stdout":
            self.scanner.feed(data)

    def __call__(self, stream: str, data: bytes) -> None:
        self.feed_stream(stream, data)
        if self._on_output is not None:
            self._on_output(stream, data)


def file_sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def append_evaluation(workspace: Path, result: dict, *, job_id: str, gateway_kind: str) -> dict | None:
    """Append a schema-2 record for ``result``; ``None`` when there is no kernel.py to fingerprint."""
    sha = file_sha256(workspace / "kernel.py")
    if sha is None:
        return None
    record = evaluation_record(result, kernel_sha256=sha, gateway_kind=gateway_kind, job_id=job_id)
    append_json_line(workspace / EVALUATIONS, record)
    return record


def output_dirs(argv: tuple[str, ...] | list[str], sync: tuple[str, ...]) -> list[str]:
    """The ``--output-dir`` values of a profiling command that lie inside a synced path.

    ``profile_nvidia.sh ... --output-dir profiles/episode_1/survey/shape-0`` writes its
    gateway_profile.json there, below the synced ``profiles``.
    """
    found: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--output-dir" and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("--output-dir="):
            value = arg.split("=", 1)[1]
        else:
            continue
        parts = PurePosixPath(value).parts
        if not parts or value.startswith("/") or ".." in parts:
            continue
        clean = PurePosixPath(*parts)
        if any(clean == PurePosixPath(root) or PurePosixPath(root) in clean.parents for root in sync):
            found.append(str(clean))
    return found


def _profile_dir(stage: Path, sync: tuple[str, ...], argv: tuple[str, ...] | list[str]) -> str | None:
    """Where the job wrote its profile: the command's ``--output-dir`` (when synced), else
    the first ``<sync>/`` holding a gateway_profile.json."""
    for rel in [*output_dirs(argv, sync), *sync]:
        path = stage / rel / GATEWAY_PROFILE
        if path.is_file() and not path.is_symlink():
            return rel
    return None


def gateway_profile(stage: Path, sync: tuple[str, ...], argv: tuple[str, ...] | list[str] = ()) -> tuple[dict | None, str | None]:
    """The profile the job wrote, and any reason it is unusable (see ``_profile_dir``)."""
    rel = _profile_dir(stage, sync, argv)
    if rel is None:
        return None, None
    try:
        profile = json.loads((stage / rel / GATEWAY_PROFILE).read_bytes())
    except (OSError, ValueError) as exc:
        return None, f"{rel}/{GATEWAY_PROFILE} is not valid JSON: {exc}"
    if not isinstance(profile, dict):
        return None, f"{rel}/{GATEWAY_PROFILE} is not a JSON object"
    return profile, None


def record_profile_job(workspace: Path, stage: Path, sync: tuple[str, ...], argv: tuple[str, ...] | list[str],
                       record: dict) -> None:
    """Replace the synced copy of the job's profile with its job record, the form AKA's
    sandbox writes (FORMATS §8); the ``PROFILE_JSON=`` line keeps the bare profile."""
    rel = _profile_dir(stage, sync, argv)
    target = None if rel is None else workspace / rel / GATEWAY_PROFILE
    if target is not None and target.is_file() and not target.is_symlink():
        atomic_write_bytes(target, dumps(record, indent=True) + b"\n")


def profile_line(profile: dict) -> bytes:
    return PROFILE_PREFIX.encode() + dumps(profile) + b"\n"


def exit_status(
    kind: str,
    state: str,
    returncode: int | None,
    *,
    result: dict | None = None,
    result_error: str | None = None,
    profile_error: str | None = None,
) -> int:
    """The sandbox's exit status for a job that was started (FORMATS §8)."""
    if state in ("timed_out", "cancelled") or returncode is None:
        return EXIT_FAILED
    if kind == "dev":
        # A dev command's own status passes through; a signal death reads as a shell would.
        return returncode if returncode >= 0 else 128 - returncode
    if kind == "run":
        if result_error is not None:
            return EXIT_UNPARSEABLE
        if result is None:
            return EXIT_FAILED if returncode != 0 else EXIT_UNPARSEABLE
        return EXIT_OK if result["all_pass"] and returncode == 0 else EXIT_FAILED
    if profile_error is not None:
        return EXIT_UNPARSEABLE
    return EXIT_OK if returncode == 0 else EXIT_FAILED


def describe_result_error(exc: FormatError) -> str:
    return f"unparseable RESULT_JSON: {exc}"
