"""Canonical memory ``memory/v<N>.json`` and the incumbent curve (FORMATS §5).

One record per episode outcome, committed by the supervisor. The version comes from the
record (``"v12"`` or ``12``), else from the file name; ``memory/live.json`` and
``memory/long_horizon_e0001.json`` are not versions.

Incumbent curve: v0, the framework baseline, and every accepted record whose memory is
complete and PASS with ``measurement_subject == "candidate"``. Its figure is the record's
``latency_us_geomean`` (older records: ``latency_us``), or its ``performance_score`` when
the record has no latency; the kind says which, so the two are never plotted as one.
"""

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePath
from typing import Any

import msgspec

from .problems import ReadResult
from .records import Record, Rendered, Version, blank_to_none, convert, read_document

_FILE = re.compile(r"v(\d{1,9})\.json")
_PEAK_SUFFIX = "_peak_utilization_pct"

LATENCY = "latency_us_geomean"
SCORE = "performance_score"


class Performance(Record, frozen=True):
    latency_us: float | None = None
    latency_us_geomean: float | None = None
    latency_us_arith_mean: float | None = None
    latency_us_by_shape: dict[str, float | None] | None = None
    measurement_status: str | None = None  # complete | not_evaluated_or_incomplete
    measured_shape_count: int | None = None
    expected_shape_count: int | None = None
    measurement_subject: str | None = None  # candidate | episode_head | incumbent | unavailable
    measurement_source: str | None = None
    comparison_method: str | None = None
    carried_from_version: Version | None = None
    speedup_vs_ref_geomean: float | None = None
    authoritative_improvement_pct: float | None = None
    tflops: float | None = None
    bandwidth_gbps: float | None = None
    performance_objective: str | None = None  # newer generation
    performance_score: float | None = None  # newer generation


class Correctness(Record, frozen=True):
    status: str | None = None  # PASS | FAIL | UNKNOWN | TIMEOUT_FAIL
    max_abs_err: float | None = None
    max_rel_err: float | None = None


class QualityGate(Record, frozen=True):
    result: str | None = None
    failure_reason: str | None = None


class Optimization(Record, frozen=True):
    action_category: str | None = None


class ProfileEvidence(Record, frozen=True):
    bottleneck_type: str | None = None


class Experience(Record, frozen=True):
    experiment_count: int | None = None
    experiments: list[Any] | None = None


class LongHorizon(Record, frozen=True):
    status: str | None = None
    candidate_commit: str | None = None  # the episode's candidate, promoted or not
    mode: str | None = None
    verification: str | None = None  # abba | single_evaluator


class MemoryVersion(Record, frozen=True):
    version: Version | None = None
    masked: bool | None = None
    timestamp: str | None = None
    performance: Performance | None = None
    correctness: Correctness | None = None
    quality_gate: QualityGate | None = None
    optimization: Optimization | None = None
    profile_evidence: ProfileEvidence | None = None
    experience: Experience | None = None
    open_directions: tuple[Rendered, ...] | None = None
    git_commit_hash: str | None = None
    long_horizon: LongHorizon | None = None
    # "<unit>" of each performance.<unit>_peak_utilization_pct, gathered by the reader
    peak_utilization_pct: dict[str, float] | None = None

    def __post_init__(self) -> None:
        blank_to_none(self, ("git_commit_hash",))

    def to_json(self) -> dict[str, Any]:
        """The document as its reader reads it (peaks back under ``performance``)."""
        out = super().to_json()
        peaks = out.pop("peak_utilization_pct", None)
        if peaks:
            performance = out["performance"] = dict(out.get("performance") or {})
            performance.update({f"{unit}{_PEAK_SUFFIX}": value for unit, value in peaks.items()})
        return out

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

    # The nested figures under the flat names the console shows them by.
    @property
    def latency_us(self) -> float | None:
        return self.performance.latency_us if self.performance else None

    @property
    def latency_us_geomean(self) -> float | None:
        return self.performance.latency_us_geomean if self.performance else None

    @property
    def latency_us_arith_mean(self) -> float | None:
        return self.performance.latency_us_arith_mean if self.performance else None

    @property
    def latency_us_by_shape(self) -> Mapping[str, float | None] | None:
        return self.performance.latency_us_by_shape if self.performance else None

    @property
    def measurement_status(self) -> str | None:
        return self.performance.measurement_status if self.performance else None

    @property
    def measured_shape_count(self) -> int | None:
        return self.performance.measured_shape_count if self.performance else None

    @property
    def expected_shape_count(self) -> int | None:
        return self.performance.expected_shape_count if self.performance else None

    @property
    def measurement_subject(self) -> str | None:
        return self.performance.measurement_subject if self.performance else None

    @property
    def measurement_source(self) -> str | None:
        return self.performance.measurement_source if self.performance else None

    @property
    def comparison_method(self) -> str | None:
        return self.performance.comparison_method if self.performance else None

    @property
    def carried_from_version(self) -> int | None:
        return self.performance.carried_from_version if self.performance else None

    @property
    def speedup_vs_ref_geomean(self) -> float | None:
        return self.performance.speedup_vs_ref_geomean if self.performance else None

    @property
    def authoritative_improvement_pct(self) -> float | None:
        return self.performance.authoritative_improvement_pct if self.performance else None

    @property
    def tflops(self) -> float | None:
        return self.performance.tflops if self.performance else None

    @property
    def bandwidth_gbps(self) -> float | None:
        return self.performance.bandwidth_gbps if self.performance else None

    @property
    def performance_objective(self) -> str | None:
        return self.performance.performance_objective if self.performance else None

    @property
    def performance_score(self) -> float | None:
        return self.performance.performance_score if self.performance else None

    @property
    def correctness_status(self) -> str | None:
        return self.correctness.status if self.correctness else None

    @property
    def max_abs_err(self) -> float | None:
        return self.correctness.max_abs_err if self.correctness else None

    @property
    def max_rel_err(self) -> float | None:
        return self.correctness.max_rel_err if self.correctness else None

    @property
    def quality_gate_result(self) -> str | None:
        return self.quality_gate.result if self.quality_gate else None

    @property
    def action_category(self) -> str | None:
        return self.optimization.action_category if self.optimization else None

    @property
    def bottleneck_type(self) -> str | None:
        return self.profile_evidence.bottleneck_type if self.profile_evidence else None

    @property
    def experiment_count(self) -> int | None:
        if self.experience is None:
            return None
        if self.experience.experiment_count is not None:
            return self.experience.experiment_count
        listed = self.experience.experiments
        return None if listed is None else len(listed)

    @property
    def long_horizon_status(self) -> str | None:
        return self.long_horizon.status if self.long_horizon else None


def _peaks(obj: Any) -> dict[str, float] | None:
    """``<unit>_peak_utilization_pct`` figures of ``performance``, by unit."""
    performance = obj.get("performance") if isinstance(obj, dict) else None
    if not isinstance(performance, dict):
        return None
    peaks = {}
    for key, value in performance.items():
        if isinstance(key, str) and key.endswith(_PEAK_SUFFIX):
            number = convert(value, float | None, f"performance.{key}")  # type: ignore[arg-type]
            if number is not None:
                peaks[key[: -len(_PEAK_SUFFIX)]] = number
    return peaks or None


def parse_memory_version(obj: Any, path_version: int | None = None) -> MemoryVersion:
    record = convert(obj, MemoryVersion)
    peaks = _peaks(obj) or record.peak_utilization_pct  # a re-read of to_json() carries them
    version = record.version if record.version is not None or path_version is None else Version(path_version)
    return msgspec.structs.replace(record, version=version, peak_utilization_pct=peaks)


def version_number_from_path(path: str | os.PathLike[str]) -> int | None:
    """``memory/v12.json`` -> 12; ``live.json``, ``long_horizon_e0001.json`` -> ``None``."""
    match = _FILE.fullmatch(PurePath(path).name)
    return int(match.group(1)) if match else None


def read_memory_version(path: str | os.PathLike[str]) -> ReadResult[MemoryVersion]:
    from_path = version_number_from_path(path)
    parse: Callable[[Any, Callable[[str], None]], MemoryVersion] = lambda obj, note: parse_memory_version(obj, from_path)
    return read_document(path, parse)


def incumbent_curve(
    versions: Iterable[MemoryVersion],
    *,
    framework_baseline_version: int | None = None,
) -> tuple[tuple[int, float, str], ...]:
    """(version, figure, kind) points in version order; see the module docstring.

    ``framework_baseline_version`` is the version the campaign's framework baseline
    recorded (``framework_baseline.json``), when known.
    """
    points: dict[int, tuple[int, float, str]] = {}
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
        if (baseline or promoted) and figure is not None:
            points[int(record.version)] = (int(record.version), figure[0], figure[1])
    return tuple(points[v] for v in sorted(points))
