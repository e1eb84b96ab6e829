"""ABBA promotion verification (FORMATS §7), as the host reads it.

Layout of one verification, ``verification_artifacts/.atrex_long_horizon_verify/<uuid>/``:

- ``request-NNNN.json``: one shape batch's request, ``{schema_version, schedule[{revision,
  repeat}], manifests, command, run_timeout_seconds}``;
- ``result-NNNN.json``: that batch's run payload, ``{schema_version, runs[], error}`` (the
  remote side prints the same payload after ``__ATREX_LONG_HORIZON_ABBA_RESULT__=``);
- ``result.json``: the batches merged into one payload (plus ``shape_batch_count``).

The verdict ``{gate, candidate_latency_us, incumbent_latency_us, improvement_pct, runs,
error, artifact}`` is what the supervisor stores as an attempt's ``verification``. It is
computed from the runs by :func:`gpu_side.abba_verdict`, the rule ``tools/abba.py`` applies
on the GPU machine: a run counts only with exit code 0 and ``all_pass``; each side's latency
is the geometric mean of its runs' ``latency_us_geomean``; ``improvement_pct = (incumbent -
candidate) / incumbent * 100``; PASS iff it exceeds ``min_improvement_pct``; fewer valid runs
than repeats on a side is FAIL; runs that do not follow the schedule (or a batch that
reported an error) are ERROR. No interval or test: the point estimate alone decides.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import msgspec

from .evaluations import EvaluatorResult, parse_result_json
from .gpu_side import GATES as GATES
from .gpu_side import PAYLOAD_SCHEMA, abba_verdict, counted_latency, loads_lenient
from .gpu_side import REVISIONS as REVISIONS
from .problems import FormatError, ReadResult
from .records import Record, as_object, blank_to_none, convert, read_document

_REQUEST_NAME = re.compile(r"request-[0-9]{4}\.json")

Revision = Literal["incumbent", "candidate"]
Gate = Literal["PASS", "FAIL", "ERROR"]


class AbbaRun(Record, frozen=True):
    """One evaluator run of one revision inside the shared GPU allocation."""

    revision: Revision
    repeat: int
    exit_code: int | None = None
    result: EvaluatorResult | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    raw: dict[str, Any] = {}

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    @property
    def latency_us(self) -> float | None:
        """The run's latency when it counts toward the verdict (exit 0, all_pass, and a
        usable latency), else ``None``."""
        if self.result is None:
            return None
        return counted_latency(self.exit_code, self.result.all_pass, self.result.latency_us_geomean)

    @property
    def valid(self) -> bool:
        return self.latency_us is not None


class AbbaRunBatch(Record, frozen=True):
    """The run payload of ``result-NNNN.json`` / ``result.json`` / the remote result line."""

    runs: tuple[AbbaRun, ...]
    schema_version: int | None = None
    error: str | None = None
    shape_batch_count: int | None = None
    raw: dict[str, Any] = {}

    def __post_init__(self) -> None:
        blank_to_none(self, ("error",))

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


class ScheduleStep(Record, frozen=True):
    """One step of a request's ``schedule``, kept in the request as a (revision, repeat) pair."""

    revision: Revision
    repeat: int


class AbbaRequest(Record, frozen=True):
    schedule: tuple[tuple[Revision, int], ...]  # (revision, repeat) in run order
    schema_version: int | None = None
    command: tuple[str, ...] | None = None
    run_timeout_seconds: float | None = None
    manifests: dict[str, Any] | None = None
    raw: dict[str, Any] = {}

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    @property
    def repeats(self) -> int | None:
        """R, from the schedule (two runs per repeat)."""
        if not self.schedule:
            return None
        return max(repeat for _, repeat in self.schedule) + 1


class AbbaVerdict(Record, frozen=True):
    gate: Gate
    candidate_latency_us: float | None = None
    incumbent_latency_us: float | None = None
    improvement_pct: float | None = None
    runs: tuple[AbbaRun, ...] | None = None  # None where the stored verdict omits them
    error: str | None = None
    artifact: str | None = None
    candidate_performance_score: float | None = None  # newer generation
    incumbent_performance_score: float | None = None
    raw: dict[str, Any] = {}

    def __post_init__(self) -> None:
        blank_to_none(self, ("error", "artifact"))

    @property
    def passed(self) -> bool:
        return self.gate == "PASS" and self.error is None

    def to_json(self) -> dict[str, Any]:
        """The verdict's fields (it may be computed, not read), as :func:`parse_verdict` reads them."""
        out = {name: getattr(self, name) for name in self.__struct_fields__ if name != "raw"}
        out["runs"] = None if self.runs is None else [run.to_json() for run in self.runs]
        return out


# -- parsing ---------------------------------------------------------------------------
# A nested record (a run's result, a payload's or verdict's runs) is converted apart, with
# its path: each keeps the object it was read from in ``raw``, which its to_json returns.


def parse_abba_run(obj: Any, where: str | None = None) -> AbbaRun:
    prefix = f"{where}." if where else ""
    fields = as_object(obj, where)
    result = fields.get("result")
    run = convert({key: value for key, value in fields.items() if key != "result"}, AbbaRun, where)
    parsed = None if result is None else parse_result_json(result, f"{prefix}result")
    return msgspec.structs.replace(run, result=parsed, raw=obj)


def parse_abba_run_line(line: str | bytes) -> AbbaRun:
    """One line of ``runs.jsonl`` (a run record, appended as each run completes)."""
    return parse_abba_run(loads_lenient(line))


def _runs(obj: dict[str, Any], where: str | None = None) -> tuple[AbbaRun, ...] | None:
    items = obj.get("runs")
    if items is None:
        return None
    name = f"{where}.runs" if where else "runs"
    return tuple(parse_abba_run(item, f"{name}[{index}]") for index, item in enumerate(convert(items, list[Any], name)))


def parse_abba_batch(obj: Any) -> AbbaRunBatch:
    """A run payload; a single run record (``{revision, repeat, ...}``) is read as a batch
    of one, so either shape of ``result-NNNN.json`` can be shown."""
    fields = as_object(obj)
    if fields.get("revision") is not None:
        return AbbaRunBatch(runs=(parse_abba_run(obj),), raw=obj)
    runs = _runs(fields)
    if runs is None:
        raise FormatError("runs: Object missing required field `runs`")
    batch = convert({**fields, "runs": []}, AbbaRunBatch)
    return msgspec.structs.replace(batch, runs=runs, raw=obj)


def parse_abba_request(obj: Any) -> AbbaRequest:
    fields = as_object(obj)
    if fields.get("schedule") is None:
        raise FormatError("schedule: Object missing required field `schedule`")
    steps = convert(fields["schedule"], tuple[ScheduleStep, ...], "schedule")
    request = convert({**fields, "schedule": []}, AbbaRequest)
    schedule = tuple((step.revision, step.repeat) for step in steps)
    return msgspec.structs.replace(request, schedule=schedule, raw=obj)


def parse_verdict(obj: Any, where: str | None = None) -> AbbaVerdict:
    """A stored verdict (an attempt's ``verification``); ``gate`` is required."""
    fields = as_object(obj, where)
    verdict = convert({key: value for key, value in fields.items() if key != "runs"}, AbbaVerdict, where)
    return msgspec.structs.replace(verdict, runs=_runs(fields, where), raw=obj)


# -- the verdict -----------------------------------------------------------------------


def compute_verdict(
    runs: Iterable[AbbaRun],
    repeats: int,
    min_improvement_pct: float = 0.0,
    *,
    artifact: str | None = None,
) -> AbbaVerdict:
    """The §7 gate for ``runs`` of an R-repeat schedule (pure)."""
    runs = tuple(runs)
    rule = abba_verdict(((run.revision, run.repeat, run.latency_us) for run in runs), repeats, min_improvement_pct)
    return AbbaVerdict(**rule, runs=runs, artifact=artifact)


def verdict_from_batch(
    batch: AbbaRunBatch,
    repeats: int | None = None,
    min_improvement_pct: float = 0.0,
    *,
    artifact: str | None = None,
) -> AbbaVerdict:
    """The verdict of a run payload; R defaults to the highest repeat index + 1."""
    if batch.error is not None:
        return AbbaVerdict(gate="ERROR", runs=batch.runs, error=batch.error, artifact=artifact)
    if batch.schema_version not in (None, PAYLOAD_SCHEMA):
        error = f"unsupported ABBA payload schema_version {batch.schema_version}"
        return AbbaVerdict(gate="ERROR", runs=batch.runs, error=error, artifact=artifact)
    if repeats is None:
        repeats = max((run.repeat for run in batch.runs), default=-1) + 1
    return compute_verdict(batch.runs, repeats, min_improvement_pct, artifact=artifact)


# -- documents -------------------------------------------------------------------------


def _read(path: str | os.PathLike[str], parse: Callable[[Any], Any]) -> ReadResult[Any]:
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
            return AbbaVerdict(gate="ERROR", runs=(), error=f"malformed run payload: {exc}", artifact=name, raw=obj)
        count = repeats if repeats is not None else _request_repeats(Path(path).parent)
        return msgspec.structs.replace(verdict_from_batch(batch, count, min_improvement_pct, artifact=name), raw=obj)

    return _read(path, parse)


def _request_repeats(directory: Path) -> int | None:
    # Writers number batches from 0000 or from 0001; the first request names R.
    try:
        requests = sorted(directory / name for name in os.listdir(directory) if _REQUEST_NAME.fullmatch(name))
    except OSError:
        return None
    request = read_abba_request(requests[0]).value if requests else None
    return None if request is None else request.repeats
