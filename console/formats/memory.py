"""Canonical memory ``memory/v<N>.json`` and the incumbent curve (FORMATS §5).

One record per episode outcome, committed by the supervisor. The version comes from the
record (``"v12"`` or ``12``), else from the file name; ``memory/live.json`` and
``memory/long_horizon_e0001.json`` are not versions.

Incumbent curve: v0, the framework baseline, and every accepted record whose memory is
complete and PASS with ``measurement_subject == "candidate"``. Its figure is the record's
``latency_us_geomean`` (older records: ``latency_us``), or its ``performance_score`` when
the record has no latency; the kind says which, so the two are never plotted as one.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePath
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import msgspec

from .fields import Fields, is_number, read_document
from .problems import ReadResult

_FILE = re.compile(r"v(\d{1,9})\.json")
_PEAK_SUFFIX = "_peak_utilization_pct"

LATENCY = "latency_us_geomean"
SCORE = "performance_score"


class MemoryVersion(msgspec.Struct, frozen=True):
    version: int | None
    masked: bool | None
    timestamp: str | None
    # performance
    latency_us: float | None
    latency_us_geomean: float | None
    latency_us_arith_mean: float | None
    latency_us_by_shape: Mapping[str, float | None] | None
    measurement_status: str | None  # complete | not_evaluated_or_incomplete
    measured_shape_count: int | None
    expected_shape_count: int | None
    measurement_subject: str | None  # candidate | episode_head | incumbent | unavailable
    measurement_source: str | None
    comparison_method: str | None
    carried_from_version: int | None
    speedup_vs_ref_geomean: float | None
    authoritative_improvement_pct: float | None
    tflops: float | None
    bandwidth_gbps: float | None
    peak_utilization_pct: Mapping[str, float] | None  # "<unit>" of each <unit>_peak_utilization_pct
    performance_objective: str | None  # newer generation
    performance_score: float | None  # newer generation
    # correctness and gate
    correctness_status: str | None  # PASS | FAIL | UNKNOWN | TIMEOUT_FAIL
    max_abs_err: float | None
    max_rel_err: float | None
    quality_gate_result: str | None
    quality_gate_failure_reason: str | None
    action_category: str | None
    bottleneck_type: str | None
    experiment_count: int | None
    open_directions: tuple[str, ...] | None
    git_commit_hash: str | None
    long_horizon_status: str | None
    long_horizon_mode: str | None
    long_horizon_verification: str | None  # abba | single_evaluator
    raw: dict

    def to_json(self) -> dict:
        document = dict(self.raw)
        if document.get("version") is None and self.version is not None:
            document["version"] = f"v{self.version}"  # taken from the file name
        return document

    @property
    def accepted(self) -> bool:
        """A PASS record: the quality gate passed (older records without a gate: the
        correctness check passed)."""
        if self.quality_gate_result is not None:
            return self.quality_gate_result == "PASS"
        return self.correctness_status == "PASS"

    def curve_figure(self) -> tuple[float, str] | None:
        """(figure, kind) for the incumbent curve, or ``None`` when the record has neither."""
        latency = self.latency_us_geomean if self.latency_us_geomean is not None else self.latency_us
        if latency is not None:
            return float(latency), LATENCY
        if self.performance_score is not None:
            return float(self.performance_score), SCORE
        return None


def _peaks(performance: Fields | None) -> Mapping[str, float] | None:
    if performance is None:
        return None
    peaks = {}
    for key in performance.obj:
        if isinstance(key, str) and key.endswith(_PEAK_SUFFIX):
            value = performance.number(key)
            if value is not None:
                peaks[key[: -len(_PEAK_SUFFIX)]] = value
    return MappingProxyType(peaks) if peaks else None


def parse_memory_version(obj: Any, path_version: int | None = None) -> MemoryVersion:
    f = Fields(obj)
    perf = f.nested("performance")
    correctness = f.nested("correctness")
    gate = f.nested("quality_gate")
    optimization = f.nested("optimization")
    profile = f.nested("profile_evidence")
    experience = f.nested("experience")
    long_horizon = f.nested("long_horizon")

    def p(method: str, key: str) -> Any:
        return getattr(perf, method)(key) if perf is not None else None

    experiment_count = experience.integer("experiment_count") if experience else None
    if experiment_count is None and experience is not None:
        listed = experience.array("experiments")
        experiment_count = None if listed is None else len(listed)
    version = f.version("version")
    return MemoryVersion(
        version=version if version is not None else path_version,
        masked=f.boolean("masked"),
        timestamp=f.string("timestamp"),
        latency_us=p("number", "latency_us"),
        latency_us_geomean=p("number", "latency_us_geomean"),
        latency_us_arith_mean=p("number", "latency_us_arith_mean"),
        latency_us_by_shape=p("numbers_by_key", "latency_us_by_shape"),
        measurement_status=p("string", "measurement_status"),
        measured_shape_count=p("integer", "measured_shape_count"),
        expected_shape_count=p("integer", "expected_shape_count"),
        measurement_subject=p("string", "measurement_subject"),
        measurement_source=p("string", "measurement_source"),
        comparison_method=p("string", "comparison_method"),
        carried_from_version=p("version", "carried_from_version"),
        speedup_vs_ref_geomean=p("number", "speedup_vs_ref_geomean"),
        authoritative_improvement_pct=p("number", "authoritative_improvement_pct"),
        tflops=p("number", "tflops"),
        bandwidth_gbps=p("number", "bandwidth_gbps"),
        peak_utilization_pct=_peaks(perf),
        performance_objective=p("string", "performance_objective"),
        performance_score=p("number", "performance_score"),
        correctness_status=correctness.string("status") if correctness else None,
        max_abs_err=correctness.number("max_abs_err") if correctness else None,
        max_rel_err=correctness.number("max_rel_err") if correctness else None,
        quality_gate_result=gate.string("result") if gate else None,
        quality_gate_failure_reason=gate.string("failure_reason") if gate else None,
        action_category=optimization.string("action_category") if optimization else None,
        bottleneck_type=profile.string("bottleneck_type") if profile else None,
        experiment_count=experiment_count,
        open_directions=f.texts("open_directions"),
        git_commit_hash=f.text("git_commit_hash"),
        long_horizon_status=long_horizon.string("status") if long_horizon else None,
        long_horizon_mode=long_horizon.string("mode") if long_horizon else None,
        long_horizon_verification=long_horizon.string("verification") if long_horizon else None,
        raw=obj,
    )


def version_number_from_path(path: str | os.PathLike) -> int | None:
    """``memory/v12.json`` -> 12; ``live.json``, ``long_horizon_e0001.json`` -> ``None``."""
    match = _FILE.fullmatch(PurePath(path).name)
    return int(match.group(1)) if match else None


def read_memory_version(path: str | os.PathLike) -> ReadResult[MemoryVersion]:
    from_path = version_number_from_path(path)
    return read_document(path, lambda obj, note: parse_memory_version(obj, from_path))


def incumbent_curve(
    versions: Iterable[MemoryVersion],
    *,
    framework_baseline_version: int | None = None,
) -> tuple[tuple[int, float, str], ...]:
    """(version, figure, kind) points in version order; see the module docstring.

    ``framework_baseline_version`` is the version the campaign's framework baseline
    recorded (``framework_baseline.json``), when known.
    """
    points = {}
    for record in versions:
        if record.version is None:
            continue
        baseline = record.version == 0 or record.version == framework_baseline_version
        promoted = (
            record.accepted
            and record.measurement_status == "complete"
            and record.measurement_subject == "candidate"
        )
        figure = record.curve_figure()
        if (baseline or promoted) and figure is not None and is_number(figure[0]):
            points[record.version] = (record.version, figure[0], figure[1])
    return tuple(points[v] for v in sorted(points))
