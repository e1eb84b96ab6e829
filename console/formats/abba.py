"""ABBA promotion verification (FORMATS §7).

Layout of one verification, ``verification_artifacts/.atrex_long_horizon_verify/<uuid>/``:

- ``request-NNNN.json``: one shape batch's request, ``{schema_version, schedule[{revision,
  repeat}], manifests, command, run_timeout_seconds}``;
- ``result-NNNN.json``: that batch's run payload, ``{schema_version, runs[], error}`` (the
  remote side prints the same payload after ``__ATREX_LONG_HORIZON_ABBA_RESULT__=``);
- ``result.json``: the batches merged into one payload (plus ``shape_batch_count``).

The verdict ``{gate, candidate_latency_us, incumbent_latency_us, improvement_pct, runs,
error, artifact}`` is what the supervisor stores as an attempt's ``verification``; this
module computes it from the runs exactly as §7 says: a run counts only with exit code 0 and
``all_pass``; each side's latency is the geometric mean of its runs' ``latency_us_geomean``;
``improvement_pct = (incumbent - candidate) / incumbent * 100``; PASS iff it exceeds
``min_improvement_pct``; fewer valid runs than repeats on a side is FAIL; runs that do not
follow the schedule (or a batch that reported an error) are ERROR. No interval or test: the
point estimate alone decides.

Standard library only at import time (the remote side runs on the GPU machine); the
document readers import the orjson-based reader lazily.
"""

# Annotations are evaluated here (no __future__ import): typing.NamedTuple would compile
# each string annotation into a ForwardRef, doubling the cost of defining these records.
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from .evaluations import EvaluatorResult, parse_result_json
from .fields import Fields, loads_lenient, positive_finite, read_document
from .problems import FormatError, ReadResult

T = TypeVar("T")

ABBA_PREFIX = "__ATREX_LONG_HORIZON_ABBA_RESULT__="
REVISIONS = ("incumbent", "candidate")
GATES = ("PASS", "FAIL", "ERROR")
PAYLOAD_SCHEMA = 1
_REQUEST_NAME = re.compile(r"request-[0-9]{4}\.json")


class AbbaRun(NamedTuple):
    """One evaluator run of one revision inside the shared GPU allocation."""

    revision: str
    repeat: int
    exit_code: int | None
    result: EvaluatorResult | None
    stdout_tail: str | None
    stderr_tail: str | None
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    @property
    def latency_us(self) -> float | None:
        """The run's latency when it counts toward the verdict (exit 0, all_pass, and a
        usable latency), else ``None``."""
        if self.exit_code != 0 or self.result is None or self.result.all_pass is not True:
            return None
        return positive_finite(self.result.latency_us_geomean)

    @property
    def valid(self) -> bool:
        return self.latency_us is not None


class AbbaRunBatch(NamedTuple):
    """The run payload of ``result-NNNN.json`` / ``result.json`` / the remote result line."""

    schema_version: int | None
    runs: tuple[AbbaRun, ...]
    error: str | None
    shape_batch_count: int | None
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


class AbbaRequest(NamedTuple):
    schema_version: int | None
    schedule: tuple[tuple[str, int], ...]
    command: tuple[str, ...] | None
    run_timeout_seconds: int | float | None
    manifests: Mapping[str, Any] | None
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    @property
    def repeats(self) -> int | None:
        """R, from the schedule (two runs per repeat)."""
        if not self.schedule:
            return None
        return max(repeat for _, repeat in self.schedule) + 1


class AbbaVerdict(NamedTuple):
    gate: str  # PASS | FAIL | ERROR
    candidate_latency_us: float | None
    incumbent_latency_us: float | None
    improvement_pct: float | None
    runs: tuple[AbbaRun, ...] | None  # None where the stored verdict omits them
    error: str | None
    artifact: str | None
    candidate_performance_score: float | None  # newer generation
    incumbent_performance_score: float | None
    raw: dict[str, Any]

    @property
    def passed(self) -> bool:
        return self.gate == "PASS" and self.error is None

    def to_json(self) -> dict[str, Any]:
        """The verdict's fields (it may be computed, not read), as :func:`parse_verdict` reads them."""
        return {
            "gate": self.gate,
            "candidate_latency_us": self.candidate_latency_us,
            "incumbent_latency_us": self.incumbent_latency_us,
            "improvement_pct": self.improvement_pct,
            "runs": None if self.runs is None else [run.to_json() for run in self.runs],
            "error": self.error,
            "artifact": self.artifact,
            "candidate_performance_score": self.candidate_performance_score,
            "incumbent_performance_score": self.incumbent_performance_score,
        }


# -- parsing ---------------------------------------------------------------------------


def parse_abba_run(obj: Any, where: str | None = None) -> AbbaRun:
    f = Fields(obj, where)
    revision = f.choice("revision", REVISIONS)
    if revision is None:
        raise FormatError(f"{f.name('revision')} is missing")
    repeat = f.integer("repeat")
    if repeat is None:
        raise FormatError(f"{f.name('repeat')} is missing")
    result = f.value("result")
    return AbbaRun(
        revision=revision,
        repeat=repeat,
        exit_code=f.integer("exit_code"),
        result=None if result is None else parse_result_json(result, f.name("result")),
        stdout_tail=f.string("stdout_tail"),
        stderr_tail=f.string("stderr_tail"),
        raw=obj,
    )


def parse_abba_run_line(line: str | bytes) -> AbbaRun:
    """One line of ``runs.jsonl`` (a run record, appended as each run completes)."""
    return parse_abba_run(loads_lenient(line))


def parse_abba_batch(obj: Any) -> AbbaRunBatch:
    """A run payload; a single run record (``{revision, repeat, ...}``) is read as a batch
    of one, so either shape of ``result-NNNN.json`` can be shown."""
    f = Fields(obj)
    if f.has("revision"):
        return AbbaRunBatch(None, (parse_abba_run(obj),), None, None, obj)
    runs = f.records("runs", parse_abba_run, None)
    if runs is None:
        raise FormatError("runs is missing")
    return AbbaRunBatch(
        schema_version=f.integer("schema_version"),
        runs=runs,
        error=f.text("error"),
        shape_batch_count=f.integer("shape_batch_count"),
        raw=obj,
    )


def parse_abba_request(obj: Any) -> AbbaRequest:
    f = Fields(obj)
    steps = f.array("schedule")
    if steps is None:
        raise FormatError("schedule is missing")
    schedule = []
    for index, step in enumerate(steps):
        s = Fields(step, f"schedule[{index}]")
        revision, repeat = s.choice("revision", REVISIONS), s.integer("repeat")
        if revision is None or repeat is None:
            raise FormatError(f"schedule[{index}] needs revision and repeat")
        schedule.append((revision, repeat))
    return AbbaRequest(
        schema_version=f.integer("schema_version"),
        schedule=tuple(schedule),
        command=f.strings("command"),
        run_timeout_seconds=f.number("run_timeout_seconds"),
        manifests=f.mapping("manifests"),
        raw=obj,
    )


def parse_verdict(obj: Any, where: str | None = None) -> AbbaVerdict:
    """A stored verdict (an attempt's ``verification``); ``gate`` is required."""
    f = Fields(obj, where)
    gate = f.choice("gate", GATES)
    if gate is None:
        raise FormatError(f"{f.name('gate')} is missing")
    return AbbaVerdict(
        gate=gate,
        candidate_latency_us=f.number("candidate_latency_us"),
        incumbent_latency_us=f.number("incumbent_latency_us"),
        improvement_pct=f.number("improvement_pct"),
        runs=f.records("runs", parse_abba_run, None),
        error=f.text("error"),
        artifact=f.text("artifact"),
        candidate_performance_score=f.number("candidate_performance_score"),
        incumbent_performance_score=f.number("incumbent_performance_score"),
        raw=obj,
    )


# -- the verdict -----------------------------------------------------------------------


def abba_schedule(repeats: int) -> list[str]:
    """Revisions in run order: repeat r is incumbent,candidate when r is even, else
    candidate,incumbent (R=2 gives I C C I)."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, not {repeats!r}")
    order: list[str] = []
    for repeat in range(repeats):
        order.extend(REVISIONS if repeat % 2 == 0 else REVISIONS[::-1])
    return order


def geometric_mean(values: Iterable[float]) -> float | None:
    values = list(values)
    if not values or any(positive_finite(v) is None for v in values):
        return None
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def compute_verdict(
    runs: Iterable[AbbaRun],
    repeats: int,
    min_improvement_pct: float = 0.0,
    *,
    artifact: str | None = None,
) -> AbbaVerdict:
    """The §7 gate for ``runs`` of an R-repeat schedule (pure)."""
    runs = tuple(runs)

    def verdict(
        gate: str,
        cand: float | None = None,
        inc: float | None = None,
        improvement: float | None = None,
        error: str | None = None,
    ) -> AbbaVerdict:
        return AbbaVerdict(gate, cand, inc, improvement, runs, error, artifact, None, None, {})

    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        return verdict("ERROR", error=f"repeats must be a positive integer, not {repeats!r}")
    expected = [(revision, index // 2) for index, revision in enumerate(abba_schedule(repeats))]
    if [(run.revision, run.repeat) for run in runs] != expected:
        return verdict("ERROR", error=f"runs do not follow the ABBA schedule for {repeats} repeats")
    sides: dict[str, list[float]] = {revision: [] for revision in REVISIONS}
    for run in runs:
        latency = run.latency_us
        if latency is not None:
            sides[run.revision].append(latency)
    cand = geometric_mean(sides["candidate"])
    inc = geometric_mean(sides["incumbent"])
    if len(sides["candidate"]) < repeats or len(sides["incumbent"]) < repeats:
        return verdict(
            "FAIL",
            cand,
            inc,
            error=(
                f"only {len(sides['candidate'])} of {repeats} candidate and "
                f"{len(sides['incumbent'])} of {repeats} incumbent runs are valid"
            ),
        )
    assert cand is not None and inc is not None  # every run counted has a positive finite latency
    improvement = (inc - cand) / inc * 100.0
    if improvement > min_improvement_pct:
        return verdict("PASS", cand, inc, improvement)
    return verdict(
        "FAIL",
        cand,
        inc,
        improvement,
        f"improvement {improvement:.3f}% does not exceed {min_improvement_pct:.3f}%",
    )


def verdict_from_batch(
    batch: AbbaRunBatch,
    repeats: int | None = None,
    min_improvement_pct: float = 0.0,
    *,
    artifact: str | None = None,
) -> AbbaVerdict:
    """The verdict of a run payload; R defaults to the highest repeat index + 1."""
    if batch.error is not None:
        return AbbaVerdict("ERROR", None, None, None, batch.runs, batch.error, artifact, None, None, {})
    if batch.schema_version not in (None, PAYLOAD_SCHEMA):
        error = f"unsupported ABBA payload schema_version {batch.schema_version}"
        return AbbaVerdict("ERROR", None, None, None, batch.runs, error, artifact, None, None, {})
    if repeats is None:
        repeats = max((run.repeat for run in batch.runs), default=-1) + 1
    return compute_verdict(batch.runs, repeats, min_improvement_pct, artifact=artifact)


# -- documents -------------------------------------------------------------------------


def _read(path: str | os.PathLike[str], parse: Callable[[Any], T]) -> ReadResult[T]:
    return read_document(path, lambda obj, note: parse(obj))


def read_abba_request(path: str | os.PathLike[str]) -> ReadResult[AbbaRequest]:
    return _read(path, parse_abba_request)


def read_abba_verdict(
    path: str | os.PathLike[str],
    *,
    repeats: int | None = None,
    min_improvement_pct: float = 0.0,
) -> ReadResult[AbbaVerdict]:
    """``result.json``: a stored verdict is read as is; a run payload is scored here.

    R comes from ``repeats``, else from the first ``request-NNNN.json`` beside it, else from the runs.
    A payload that reports an error or breaks the schedule is an ERROR verdict, not an
    unreadable document: it is a fact about the verification.
    """
    name = str(path)

    def parse(obj: Any) -> AbbaVerdict:
        if isinstance(obj, dict) and "gate" in obj:
            return parse_verdict(obj)
        try:
            batch = parse_abba_batch(obj)
        except FormatError as exc:
            if not isinstance(obj, dict) or "runs" not in obj:
                raise FormatError(f"neither a verdict (gate) nor a run payload (runs): {exc}") from None
            return AbbaVerdict("ERROR", None, None, None, (), f"malformed run payload: {exc}", name, None, None, obj)
        count = repeats if repeats is not None else _request_repeats(Path(path).parent)
        return verdict_from_batch(batch, count, min_improvement_pct, artifact=name)._replace(raw=obj)

    return _read(path, parse)


def _request_repeats(directory: Path) -> int | None:
    # Writers number batches from 0000 or from 0001; the first request names R.
    try:
        requests = sorted(directory / name for name in os.listdir(directory) if _REQUEST_NAME.fullmatch(name))
    except OSError:
        return None
    request = read_abba_request(requests[0]).value if requests else None
    return None if request is None else request.repeats
