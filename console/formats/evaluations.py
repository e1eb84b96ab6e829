"""Evaluator results and ``.atrex_long_horizon/evaluations.jsonl`` (FORMATS §6), as the host reads them.

The evaluator prints one ``[test_kernel] RESULT_JSON={...}`` line; inside an episode every
result is also appended to ``evaluations.jsonl``. Schema 2 records carry the sha256 of the
``kernel.py`` they measured; schema 1 records do not. The sandbox on the GPU machine checks
and writes these with :mod:`gpu_side`; lines are decoded by the standard library there and
here, which accepts the NaN tokens an evaluator writes for a NaN-producing kernel.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from .gpu_side import RESULT_PREFIX, loads_lenient
from .problems import FormatError
from .records import Record, as_object, blank_to_none, convert


class EvaluatorResult(Record, frozen=True):
    """One evaluator verdict (the RESULT_JSON object); fields it lacks are ``None``."""

    all_pass: bool
    failures: tuple[str, ...] | None = None
    latency_us_geomean: float | None = None
    latency_us: float | None = None  # what older evaluators call the geometric mean
    latency_us_arith_mean: float | None = None
    latency_us_by_shape: dict[str, float | None] | None = None
    speedup_vs_ref_geomean: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    evaluator: str | None = None
    eval_id: str | int | None = None  # kept as a string
    performance_objective: str | None = None  # newer generation
    performance_score: float | None = None  # newer generation
    raw: dict[str, Any] = {}  # the object as written

    def __post_init__(self) -> None:
        if self.latency_us_geomean is None:
            msgspec.structs.force_setattr(self, "latency_us_geomean", self.latency_us)
        if isinstance(self.eval_id, int):
            msgspec.structs.force_setattr(self, "eval_id", str(self.eval_id))

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


def parse_result_json(obj: Any, where: str | None = None) -> EvaluatorResult:
    """A decoded RESULT_JSON object; ``all_pass`` is required, the rest may be absent (``None``)."""
    return msgspec.structs.replace(convert(as_object(obj, where), EvaluatorResult, where), raw=obj)


def parse_result_line(line: str) -> EvaluatorResult:
    """Parse one ``[test_kernel] RESULT_JSON=`` line; raise :class:`FormatError`."""
    text = line.strip()
    if not text.startswith(RESULT_PREFIX):
        raise FormatError("not a RESULT_JSON line")
    return parse_result_json(loads_lenient(text[len(RESULT_PREFIX):]))


class EvaluationRecord(Record, frozen=True):
    """One line of ``evaluations.jsonl``; versions above 2 are read as schema 2 (fingerprinted)."""

    schema_version: Annotated[int, msgspec.Meta(ge=1)]
    result: EvaluatorResult
    timestamp: str | None = None
    gateway_kind: str | None = None
    job_id: str | int | None = None  # kept as a string
    kernel_sha256: str | None = None  # None for schema 1, which predates fingerprints
    raw: dict[str, Any] = {}

    def __post_init__(self) -> None:
        blank_to_none(self, ("kernel_sha256",))
        if self.schema_version < 2:
            msgspec.structs.force_setattr(self, "kernel_sha256", None)
        if isinstance(self.job_id, int):
            msgspec.structs.force_setattr(self, "job_id", str(self.job_id))

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


def parse_evaluation_line(line: bytes | str) -> EvaluationRecord:
    """Decode one ``evaluations.jsonl`` line; raise :class:`FormatError` with a one-line reason."""
    return evaluation_from_obj(loads_lenient(line))


def evaluation_from_obj(obj: Any) -> EvaluationRecord:
    record = convert(as_object(obj), EvaluationRecord)
    result = msgspec.structs.replace(record.result, raw=obj["result"])
    return msgspec.structs.replace(record, result=result, raw=obj)

