"""Timeline artifacts (FORMATS §10): receipt, trace summary, measurement, measure run lines.

Lenient readers for the console: unknown or missing fields are None (never 0), the decoded
object is kept as ``raw``. A document whose ``schema`` names another artifact is refused.

A receipt episcope wrote states its capture's per-site statistics (``episcope.sites``); for
one that does not (AKA's, or episcope's before it did), the console's timeline screen decodes
the capture and hands the statistics over as a ``DecodedSites`` event, which
``with_decoded_sites`` joins to the receipt: either way they are the receipt's ``sites``.
"""

import os
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec
from msgspec.structs import replace

from .jsonio import JSONDecodeError, loads, read_json_document
from .problems import FormatError, ReadResult

RECEIPT_SCHEMA = "atrex-autonomous-timeline-receipt/v1"
MEASUREMENT_SCHEMA = "atrex-autonomous-timeline-measurement/v1"
RUN_SCHEMA = "atrex-autonomous-timeline-measure-run/v1"


def _object(obj: Any, schema: str) -> dict[str, Any]:
    if type(obj) is not dict:
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    found = obj.get("schema")
    if found is not None and found != schema:
        raise FormatError(f"schema {found!r} is not {schema!r}")
    return obj


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


# Why a receipt's ``sites`` is None.
NO_SITES = ("the receipt states no per-site statistics (written by AKA, or by an earlier episcope): "
            "opening it in the console's timeline screen decodes them from the capture")


# A count or a duration in ns of one capture: the capture's clock and counters are 64-bit.
Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Nanoseconds = Annotated[float, msgspec.Meta(ge=0, le=2**63 - 1)]
SiteId = Annotated[int, msgspec.Meta(ge=0, le=0xFFFF)]  # u16 in the event dictionary


class TimelineSite(msgspec.Struct, frozen=True):
    """One probe site of a capture (``console.timeline.summary.site_statistics``): its records
    (a range's begin and end count apart), its paired ranges and their durations in ns, None
    where the site closed no range.

    Receipts and recordings are workspace content: a figure no capture can have (a negative
    count, a minimum above the maximum) refuses the site, naming the field, rather than being
    shown."""

    site_id: SiteId
    name: str
    kind: str
    records: Count
    ranges: Count
    total_ns: Count | None
    median_ns: Nanoseconds | None
    min_ns: Count | None
    max_ns: Count | None

    def __post_init__(self) -> None:
        durations = (self.total_ns, self.median_ns, self.min_ns, self.max_ns)
        if self.ranges == 0:
            if any(d is not None for d in durations):
                raise ValueError(f"site {self.site_id}: ranges is 0 but total_ns/median_ns/min_ns/max_ns are stated")
            return
        if self.total_ns is None or self.median_ns is None or self.min_ns is None or self.max_ns is None:
            raise ValueError(f"site {self.site_id}: ranges is {self.ranges} but a duration is null")
        if 2 * self.ranges > self.records:  # a range is a begin and an end record
            raise ValueError(f"site {self.site_id}: ranges {self.ranges} needs {2 * self.ranges} records, "
                             f"records is {self.records}")
        if not self.min_ns <= self.median_ns <= self.max_ns:
            raise ValueError(f"site {self.site_id}: median_ns {self.median_ns:g} is not between "
                             f"min_ns {self.min_ns} and max_ns {self.max_ns}")
        if not self.ranges * self.min_ns <= self.total_ns <= self.ranges * self.max_ns:
            raise ValueError(f"site {self.site_id}: total_ns {self.total_ns} is not between ranges x min_ns "
                             f"and ranges x max_ns")


def _duplicate_site(sites: tuple[TimelineSite, ...]) -> str | None:
    seen: set[int] = set()
    for site in sites:
        if site.site_id in seen:
            return f"site_id {site.site_id} stated twice"
        seen.add(site.site_id)
    return None


class DecodedSites(msgspec.Struct, frozen=True):
    """The per-site statistics the console decoded from the capture of a receipt that states
    none (event kind ``timeline_sites``, whose path is the receipt's). ``raw_sha256`` is the
    raw buffer digest that receipt named: a receipt rewritten for another capture does not
    take them."""

    raw_sha256: str | None
    sites: tuple[TimelineSite, ...]

    def __post_init__(self) -> None:
        duplicate = _duplicate_site(self.sites)
        if duplicate is not None:
            raise ValueError(f"sites: {duplicate}")


class TimelineReceipt(msgspec.Struct, frozen=True):
    backend: str | None
    stage: str | None
    evidence_class: str | None
    classification_reasons: tuple[str, ...] | None
    workload_identity: str | None
    correctness: str | None
    low_overhead_target_percent: float | None
    overhead_percent: float | None
    overhead_high_percent: float | None
    verdict: str | None
    trace_integrity: str | None
    committed_records: int | None
    launch_id: int | None
    trace: str | None
    summary: str | None
    measurement: str | None
    instrumented_source_sha256: str | None
    raw_sha256: str | None
    raw: dict[str, Any]
    # Where the receipt was read from: its raw buffer, manifest and trace are named relative
    # to it. None for a receipt parsed from an object alone.
    path: str | None = None
    sites: tuple[TimelineSite, ...] | None = None  # dictionary order
    sites_from: str | None = None  # "receipt" (episcope.sites) | "decoded" (DecodedSites)
    sites_unknown: str | None = None  # why ``sites`` is None

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__struct_fields__ if k != "raw"}
        if self.classification_reasons is not None:
            out["classification_reasons"] = list(self.classification_reasons)
        out["sites"] = msgspec.to_builtins(self.sites)
        return out


def _sites(obj: dict[str, Any]) -> tuple[tuple[TimelineSite, ...] | None, str | None]:
    """episcope's ``sites`` and None, or None and why there are none."""
    extras = obj.get("episcope")
    if extras is not None and not isinstance(extras, dict):  # episcope writes an object
        return None, f"episcope is unreadable: expected an object, got {type(extras).__name__}"
    if extras is None or "sites" not in extras:
        return None, NO_SITES
    try:
        sites = msgspec.convert(extras["sites"], tuple[TimelineSite, ...])
    except msgspec.ValidationError as exc:
        return None, f"episcope.sites is unreadable: {exc}"
    duplicate = _duplicate_site(sites)
    if duplicate is not None:
        return None, f"episcope.sites is unreadable: {duplicate}"
    return sites, None


def receipt_from_obj(obj: Any) -> TimelineReceipt:
    """AKA's receipt keys, with episcope's facts from ``episcope`` when present. A receipt of
    episcope's earlier form (``correctness`` and ``trace_integrity`` objects, the measurement
    as a path beside ``measurement_summary``) reads too."""
    obj = _object(obj, RECEIPT_SCHEMA)
    reasons = obj.get("classification_reasons")
    correctness = obj.get("correctness")
    integrity = obj.get("trace_integrity")
    extras = _dict(obj.get("episcope")) or {}
    facts = _dict(extras.get("trace_integrity")) or _dict(integrity) or {}
    measurement = obj.get("measurement")
    entry = _dict(measurement) or _dict(obj.get("measurement_summary")) or {}
    statistics = _dict(extras.get("measurement")) or _dict(obj.get("measurement_summary")) or {}
    interval = _dict(statistics.get("interval")) or {}
    sites, sites_unknown = _sites(obj)
    return TimelineReceipt(
        backend=_str(obj.get("backend")),
        stage=_str(obj.get("stage")),
        evidence_class=_str(obj.get("evidence_class")),
        classification_reasons=tuple(r for r in reasons if isinstance(r, str)) if isinstance(reasons, list) else None,
        workload_identity=_str(obj.get("workload_identity")),
        correctness=_str(correctness.get("status")) if isinstance(correctness, dict) else _str(correctness),
        low_overhead_target_percent=_num(obj.get("low_overhead_target_percent")),
        overhead_percent=_num(entry.get("overhead_percent")),
        overhead_high_percent=_num(interval.get("high_percent")),
        verdict=_str(statistics.get("verdict")),
        trace_integrity=_str(integrity.get("status")) if isinstance(integrity, dict) else _str(integrity),
        committed_records=_int(facts.get("committed_records")),
        launch_id=_int(facts.get("launch_id")),
        trace=_str(obj.get("trace")),
        summary=_str(obj.get("summary")),
        measurement=_str(measurement.get("path")) if isinstance(measurement, dict) else _str(measurement),
        instrumented_source_sha256=_str(obj.get("instrumented_source_sha256")),
        raw_sha256=_str(obj.get("raw_sha256")),
        raw=obj,
        sites=sites,
        sites_from="receipt" if sites is not None else None,
        sites_unknown=sites_unknown,
    )


def decoded_sites(raw_sha256: str | None, statistics: list[dict[str, Any]]) -> DecodedSites:
    """``console.timeline.summary.site_statistics`` of the capture a receipt names (by
    ``raw_sha256``) as the event data that hands them to the state; checked as a recorded
    event is (msgspec.ValidationError)."""
    return msgspec.convert({"raw_sha256": raw_sha256, "sites": statistics}, DecodedSites)


def with_decoded_sites(receipts: tuple[TimelineReceipt, ...],
                       decoded: Mapping[str, DecodedSites]) -> tuple[TimelineReceipt, ...]:
    """Each receipt that states no sites, with those the console decoded from its capture
    (``decoded``: by receipt path) while it names the same raw buffer."""
    out = []
    for receipt in receipts:
        found = decoded.get(receipt.path) if receipt.sites is None and receipt.path is not None else None
        if found is not None and found.raw_sha256 == receipt.raw_sha256:
            receipt = replace(receipt, sites=found.sites, sites_from="decoded", sites_unknown=None)
        out.append(receipt)
    return tuple(out)


class TimelineMeasurement(msgspec.Struct, frozen=True):
    baseline_ms: float | None
    instrumented_ms: float | None
    overhead_percent: float | None
    interval_low_percent: float | None
    interval_high_percent: float | None
    interval_method: str | None
    p_value: float | None
    verdict: str | None
    blocks: int | None
    runs: tuple[dict[str, Any], ...]
    schedule: tuple[str, ...] | None
    workload_identity: str | None
    device_uuid: str | None
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__struct_fields__ if k != "raw"}
        out["runs"] = list(self.runs)
        out["schedule"] = None if self.schedule is None else list(self.schedule)
        return out


def measurement_from_obj(obj: Any) -> TimelineMeasurement:
    obj = _object(obj, MEASUREMENT_SCHEMA)
    interval = _dict(obj.get("interval")) or {}
    test = _dict(obj.get("rank_test")) or {}
    runs = obj.get("runs")
    schedule = obj.get("schedule")
    device = _dict(obj.get("device_identity")) or {}
    blocks = _int(obj.get("blocks"))
    if blocks is None and isinstance(schedule, list):
        # a variant per run (AKA's form, four to a block), or episcope's earlier block patterns
        runs_per_block = 4 if schedule and schedule[0] in ("baseline", "instrumented") else 1
        blocks = len(schedule) // runs_per_block
    return TimelineMeasurement(
        baseline_ms=_num(obj.get("baseline_ms")),
        instrumented_ms=_num(obj.get("instrumented_ms")),
        overhead_percent=_num(obj.get("overhead_percent")),
        interval_low_percent=_num(interval.get("low_percent")),
        interval_high_percent=_num(interval.get("high_percent")),
        interval_method=_str(interval.get("method")),
        p_value=_num(test.get("p_value")),
        verdict=_str(obj.get("verdict")),
        blocks=blocks,
        runs=tuple(r for r in runs if isinstance(r, dict)) if isinstance(runs, list) else (),
        schedule=tuple(str(p) for p in schedule) if isinstance(schedule, list) else None,
        workload_identity=_str(obj.get("workload_identity")),
        device_uuid=_str(device.get("uuid")),
        raw=obj,
    )


class MeasureRun(msgspec.Struct, frozen=True):
    """One line of ``<measurement>.runs.jsonl``: a run, a block's statistics, or the end."""

    event: str  # run | block | done | rejected
    block: int | None
    ordinal: int | None
    variant: str | None
    latency_ms: float | None
    overhead_percent: float | None
    interval_low_percent: float | None
    interval_high_percent: float | None
    p_value: float | None
    verdict: str | None
    reason: str | None
    at: float | None
    raw: dict[str, Any]
    workload_identity: str | None = None  # a run's; the drift guard compares them
    device_uuid: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__struct_fields__ if k != "raw"}


def parse_measure_run_line(line: bytes | str) -> MeasureRun:
    try:
        obj = loads(line)
    except JSONDecodeError as exc:
        raise FormatError(f"invalid JSON: {exc}") from None
    obj = _object(obj, RUN_SCHEMA)
    event = obj.get("event")
    if event not in ("run", "block", "done", "rejected"):
        raise FormatError(f"unknown measure line event {event!r}")
    return MeasureRun(
        event=event, block=_int(obj.get("block")), ordinal=_int(obj.get("ordinal")),
        variant=_str(obj.get("variant")), latency_ms=_num(obj.get("latency_ms")),
        overhead_percent=_num(obj.get("overhead_percent")),
        interval_low_percent=_num(obj.get("interval_low_percent")),
        interval_high_percent=_num(obj.get("interval_high_percent")),
        p_value=_num(obj.get("p_value")), verdict=_str(obj.get("verdict")), reason=_str(obj.get("reason")),
        at=_num(obj.get("at")), raw=obj, workload_identity=_str(obj.get("workload_identity")),
        device_uuid=_str((_dict(obj.get("device_identity")) or {}).get("uuid")),
    )


def read_timeline_receipt(path: str | os.PathLike[str]) -> ReadResult[TimelineReceipt]:
    return read_json_document(path, lambda obj: replace(receipt_from_obj(obj), path=str(path)))


def read_timeline_measurement(path: str | os.PathLike[str]) -> ReadResult[TimelineMeasurement]:
    return read_json_document(path, measurement_from_obj)
