"""Evaluator results and ``.atrex_long_horizon/evaluations.jsonl`` (FORMATS §6).

The evaluator prints one ``[test_kernel] RESULT_JSON={...}`` line; inside an episode every
result is also appended to ``evaluations.jsonl``. Schema 2 records carry the sha256 of the
``kernel.py`` they measured; schema 1 records do not.

Standard library only (json, not orjson): the evaluator side runs on the GPU machine.
Python's json also accepts the NaN tokens an evaluator writes for a NaN-producing kernel.
"""

# Annotations are evaluated here (no __future__ import): typing.NamedTuple would compile
# each string annotation into a ForwardRef, doubling the cost of defining these records.
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from .fields import Fields, loads_lenient
from .problems import FormatError

RESULT_PREFIX = "[test_kernel] RESULT_JSON="
SCHEMA_VERSION = 2
GATEWAY_KINDS = ("run", "dev")

_SHA256 = re.compile(r"[0-9a-f]{64}")


class EvaluatorResult(NamedTuple):
    """One evaluator verdict (the RESULT_JSON object)."""

    all_pass: bool
    failures: tuple[str, ...] | None
    latency_us_geomean: float | None
    latency_us_arith_mean: float | None
    latency_us_by_shape: Mapping[str, float | None] | None
    speedup_vs_ref_geomean: float | None
    max_abs_err: float | None
    max_rel_err: float | None
    evaluator: str | None
    eval_id: str | None
    performance_objective: str | None  # newer generation
    performance_score: float | None  # newer generation
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    @property
    def consistent(self) -> bool:
        """``all_pass`` agrees with the failure list (a decision-grade record needs this)."""
        return self.failures is not None and self.all_pass == (not self.failures)


def parse_result_json(obj: Any, where: str | None = None) -> EvaluatorResult:
    """Type-check a decoded RESULT_JSON object; ``all_pass`` is required, the rest may be
    absent (``None``). Older evaluators name the geometric mean ``latency_us``."""
    f = Fields(obj, where)
    all_pass = f.boolean("all_pass")
    if all_pass is None:
        raise FormatError(f"{f.name('all_pass')} is missing")
    geomean = f.number("latency_us_geomean")
    if geomean is None:
        geomean = f.number("latency_us")
    return EvaluatorResult(
        all_pass=all_pass,
        failures=f.strings("failures"),
        latency_us_geomean=geomean,
        latency_us_arith_mean=f.number("latency_us_arith_mean"),
        latency_us_by_shape=f.numbers_by_key("latency_us_by_shape"),
        speedup_vs_ref_geomean=f.number("speedup_vs_ref_geomean"),
        max_abs_err=f.number("max_abs_err"),
        max_rel_err=f.number("max_rel_err"),
        evaluator=f.string("evaluator"),
        eval_id=f.ident("eval_id"),
        performance_objective=f.string("performance_objective"),
        performance_score=f.number("performance_score"),
        raw=obj,
    )


def parse_result_line(line: str) -> EvaluatorResult:
    """Parse one ``[test_kernel] RESULT_JSON=`` line; raise :class:`FormatError`."""
    text = line.strip()
    if not text.startswith(RESULT_PREFIX):
        raise FormatError("not a RESULT_JSON line")
    return parse_result_json(loads_lenient(text[len(RESULT_PREFIX):]))


class EvaluationRecord(NamedTuple):
    """One line of ``evaluations.jsonl``."""

    schema_version: int
    timestamp: str | None
    gateway_kind: str | None
    job_id: str | None
    kernel_sha256: str | None  # None for schema 1, which predates fingerprints
    result: EvaluatorResult
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

def parse_evaluation_line(line: bytes | str) -> EvaluationRecord:
    """Decode one ``evaluations.jsonl`` line; raise :class:`FormatError` with a one-line reason.

    ``schema_version`` is required; versions above 2 are read as schema 2 (fingerprinted).
    """
    return evaluation_from_obj(loads_lenient(line))


def evaluation_from_obj(obj: Any) -> EvaluationRecord:
    f = Fields(obj)
    schema = f.integer("schema_version")
    if schema is None:
        raise FormatError("schema_version is missing")
    if schema < 1:
        raise FormatError(f"schema_version is {schema}, not 1 or 2")
    if not f.has("result"):
        raise FormatError("result is missing")
    sha = f.text("kernel_sha256")
    return EvaluationRecord(
        schema_version=schema,
        timestamp=f.string("timestamp"),
        gateway_kind=f.string("gateway_kind"),
        job_id=f.ident("job_id"),
        kernel_sha256=sha if schema >= 2 else None,
        result=parse_result_json(f.value("result"), "result"),
        raw=obj,
    )


def evaluation_record(
    result_obj: Any,
    *,
    kernel_sha256: str,
    gateway_kind: str,
    job_id: str | None,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """A schema-2 ``evaluations.jsonl`` record for a writer to append.

    The result is validated first, so a writer never appends a line its own reader refuses.
    """
    result = result_obj.raw if isinstance(result_obj, EvaluatorResult) else result_obj
    parse_result_json(result, "result")
    if not isinstance(kernel_sha256, str) or not _SHA256.fullmatch(kernel_sha256):
        raise FormatError("kernel_sha256 must be 64 lowercase hex digits")
    if gateway_kind not in GATEWAY_KINDS:
        raise FormatError(f"gateway_kind is {gateway_kind!r}, not one of {', '.join(GATEWAY_KINDS)}")
    return {
        "schema_version": SCHEMA_VERSION,
        "timestamp": timestamp or datetime.now(UTC).isoformat(),
        "gateway_kind": gateway_kind,
        "job_id": job_id,
        "kernel_sha256": kernel_sha256,
        "result": result,
    }
