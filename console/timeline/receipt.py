"""Capture receipts in AKA's schema and meaning: provenance by SHA-256, evidence class, and
the evaluator record that vouches for correctness.

A receipt names every input and output of a capture by a path relative to the receipt and its
SHA-256. Its keys and their meaning are AKA's (``correctness`` and ``trace_integrity`` are
words, ``correctness_evidence`` is the evaluator record itself, ``classification_reasons`` are
AKA's codes, ``measurement`` is the recomputed summary of the measurement file), so AKA's
``validate`` accepts it; what episcope states beyond that sits under ``episcope``, a key AKA
does not read. ``validate.py`` checks a receipt written by either tool.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import NamedTuple

from console.formats.bounded_read import read_regular_file
from console.formats.plainjson import atomic_write_bytes
from console.formats.problems import FormatError

from . import abi, export
from .decode import Capture, decode
from .files import json_bytes, sha256_file
from .manifest import load_json, parse_dictionary, parse_manifest
from .summary import site_statistics, summarize, summary_extras

RECEIPT_SCHEMA = "atrex-autonomous-timeline-receipt/v1"
SUMMARY_NAME = "trace.summary.json"
RECEIPT_NAME = "receipt.json"
# every file a receipt names, and whether it must
FILES = (("clean_source", True), ("instrumented_source", True), ("binary", False), ("raw", True),
         ("manifest", True), ("event_dictionary", True), ("trace", True), ("summary", True))
STAGES = ("exploration", "final")
CORRECTNESS = ("passed", "failed", "unknown")
# AKA's reasons for a decision-grade capture: what was established, not what is missing
DECISION_GRADE_REASONS = ["correctness_passed", "provenance_bound", "trace_integrity_passed",
                          "measurement_recomputed", "overhead_within_target"]


class ReceiptError(ValueError):
    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def record_problem(record, kernel_sha256: str) -> str | None:
    """Why an evaluator record cannot vouch for the instrumented kernel; None when it can."""
    if not isinstance(record, dict):
        return "correctness evidence is not an object"
    version = record.get("schema_version")
    if type(version) is not int or version < 2:
        return "correctness evidence predates source-bound evaluator results (schema_version < 2)"
    if record.get("kernel_sha256") != kernel_sha256:
        return "correctness evidence does not match the instrumented source"
    result = record.get("result")
    if not isinstance(result, dict):
        return "correctness evidence has no result object"
    failures = result.get("failures", [])
    if not isinstance(result.get("all_pass"), bool) or not isinstance(failures, list):
        return "correctness evidence has no boolean all_pass or no failures list"
    if result["all_pass"] != (not failures):
        return "correctness evidence all_pass contradicts its failures"
    return None


def verified_correctness(record: dict) -> str:
    """The correctness a checked evaluator record states (see :func:`record_problem`)."""
    return "passed" if record["result"]["all_pass"] else "failed"


def evaluator_record(evidence_path: str, kernel_sha256: str) -> dict:
    """The last evaluations.jsonl record for the instrumented kernel, checked.

    Fails closed as AKA does: an unreadable or empty file, a line that is not a JSON object,
    no record for this kernel, or a record that cannot vouch for it is a :class:`ReceiptError`.
    Read as a bounded regular file: evidence named ``/dev/zero`` or a FIFO is refused, not
    read forever or waited on.
    """
    try:
        text = read_regular_file(evidence_path).decode("utf-8")
    except (OSError, FormatError, UnicodeError) as exc:
        raise ReceiptError([f"correctness evidence {evidence_path}: {exc}"]) from None
    found = None
    seen = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        seen = True
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested or numbered past what json reads
            raise ReceiptError([f"correctness evidence {evidence_path} line {number} is not JSON"]) from None
        if not isinstance(record, dict):
            raise ReceiptError([f"correctness evidence {evidence_path} line {number} is not an object"])
        if record.get("kernel_sha256") == kernel_sha256:
            found = record
    if not seen:
        raise ReceiptError([f"correctness evidence {evidence_path} is empty"])
    if found is None:
        raise ReceiptError(["evaluator correctness evidence has no result for the instrumented source"])
    problem = record_problem(found, kernel_sha256)
    if problem:
        raise ReceiptError([problem])
    return found


def measurement_entry(path: str | os.PathLike, obj: dict, receipt_dir: Path) -> dict:
    """The receipt's ``measurement``: the file (relative to the receipt) and its hash, the
    medians and overhead recomputed from its runs, and what was measured."""
    runs = obj["runs"]
    baseline_ms = statistics.median([float(r["latency_ms"]) for r in runs if r["variant"] == "baseline"])
    instrumented_ms = statistics.median([float(r["latency_ms"]) for r in runs if r["variant"] == "instrumented"])
    variants = {}
    for name in ("baseline", "instrumented"):
        given = obj["variants"][name]
        variants[name] = {key: given[key] for key in ("source_sha256", "binary_sha256") if given.get(key) is not None}
    return {
        "path": _rel(path, receipt_dir),
        "sha256": sha256_file(path),
        "baseline_ms": baseline_ms,
        "instrumented_ms": instrumented_ms,
        "overhead_percent": (instrumented_ms / baseline_ms - 1.0) * 100.0,
        "workload_identity": obj["workload_identity"],
        "device_identity": obj["device_identity"],
        "variants": variants,
    }


def measurement_statistics(obj: dict | None) -> dict | None:
    """episcope's reading of a measurement file (interval, rank test, verdict); None for none.
    A file AKA wrote states none of these, so they read null."""
    if obj is None:
        return None
    keep = ("interval", "rank_test", "verdict", "blocks", "stop_reason")
    return {k: obj.get(k) for k in keep}


def check_measurement(obj, path: str | os.PathLike, clean_sha256: str, kernel_sha256: str,
                      workload_identity: str) -> list[str]:
    """Every reason a measurement file cannot back this capture (empty when it can)."""
    from .measure import verify_measured_files, verify_measurement  # the statistics load only when needed

    reasons = verify_measurement(obj)
    if reasons:
        return reasons
    reasons = verify_measured_files(obj, path)
    if reasons:
        return reasons
    if obj.get("workload_identity") != workload_identity:
        reasons.append("measurement workload identity does not match the capture's")
    if obj["variants"]["baseline"].get("source_sha256") != clean_sha256:
        reasons.append("measurement baseline source does not match the clean source")
    if obj["variants"]["instrumented"].get("source_sha256") != kernel_sha256:
        reasons.append("measurement instrumented source does not match the capture's")
    return reasons


def classify(stage: str, correctness: str, verified: bool, has_binary: bool, measurement: dict | None,
             target: float) -> tuple[str, list[str]]:
    """Evidence class and AKA's reason codes for it.

    An exploration-stage capture is ``exploration`` whatever else it has; a final-stage
    capture is ``decision_grade`` when correctness passed by an evaluator record, the binary is
    identified and the measured overhead is within the target, else ``diagnostic``.
    """
    overhead = None if measurement is None else measurement["overhead_percent"]
    missing_overhead = (["overhead_not_measured"] if overhead is None
                        else ["overhead_above_target"] if overhead > target else [])
    if stage == "exploration":
        not_passed = [] if correctness == "passed" else ["correctness_not_passed"]
        return "exploration", ["stage_is_exploration", *not_passed, *missing_overhead]
    reasons = []
    if correctness != "passed":
        reasons.append("correctness_not_passed")
    elif not verified:
        reasons.append("correctness_not_verified")
    if not has_binary:
        reasons.append("binary_identity_missing")
    reasons += missing_overhead
    return ("diagnostic", reasons) if reasons else ("decision_grade", list(DECISION_GRADE_REASONS))


def _rel(path: str | os.PathLike, base: Path) -> str:
    return os.path.relpath(os.path.abspath(path), base)


def decode_files(raw: bytes, manifest_obj, dictionary_obj) -> Capture:
    """Decode a raw buffer against its manifest and dictionary; raises on any rejection."""
    return decode(raw, parse_manifest(manifest_obj), parse_dictionary(dictionary_obj))


def integrity_facts(capture: Capture) -> dict:
    """What the decode established beyond AKA's ``trace_integrity: passed``."""
    header = capture.header
    return {"launch_id": header.launch_id, "status_word": header.status, "committed_records": capture.committed_records,
            "owner_count": header.owner_count, "records_per_owner": header.records_per_owner}


class Evidence(NamedTuple):
    """What a receipt states about correctness, measurement and class, checked against its inputs."""

    correctness: str
    record: dict | None
    measurement: dict | None
    measurement_obj: dict | None
    evidence_class: str
    reasons: list[str]


def check_evidence(*, clean_source: str, instrumented_source: str, binary: str | None, workload_identity: str,
                   correctness: str | None, correctness_evidence: str | None, measurement: str | None,
                   stage: str, low_overhead_target: float, output_dir: str, inputs: tuple[str, ...]) -> Evidence:
    """Check the arguments every capture takes (and that ``inputs`` exist), then the evaluator
    record and measurement; classify. ``correctness`` is what the caller reports; an evaluator
    record overrules "unknown" and must not contradict it otherwise."""
    if stage not in STAGES:
        raise ReceiptError([f"stage must be exploration or final, got {stage!r}"])
    if correctness is not None and correctness not in CORRECTNESS:
        raise ReceiptError([f"correctness must be one of {', '.join(CORRECTNESS)}"])
    if not (isinstance(low_overhead_target, (int, float)) and math.isfinite(low_overhead_target)
            and low_overhead_target >= 0):
        raise ReceiptError(["low-overhead target must be finite and non-negative"])
    if not workload_identity.strip():
        raise ReceiptError(["workload identity is empty"])
    missing = [p for p in (*inputs, clean_source, instrumented_source, binary, measurement) if p and not os.path.isfile(p)]
    if missing:
        raise ReceiptError([f"missing file {p}" for p in missing])
    kernel_sha = sha256_file(instrumented_source)
    measurement_obj = entry = None
    if measurement:
        measurement_obj = load_json(measurement)
        bad = check_measurement(measurement_obj, measurement, sha256_file(clean_source), kernel_sha, workload_identity)
        if bad:
            raise ReceiptError(bad)
        entry = measurement_entry(measurement, measurement_obj, Path(output_dir).absolute())
    record = evaluator_record(correctness_evidence, kernel_sha) if correctness_evidence else None
    if record is not None and correctness is not None and correctness != verified_correctness(record):
        raise ReceiptError([f"reported correctness {correctness} contradicts the evaluator record "
                            f"({verified_correctness(record)})"])
    status = verified_correctness(record) if record is not None else (correctness or "unknown")
    evidence_class, reasons = classify(stage, status, record is not None, binary is not None, entry,
                                       float(low_overhead_target))
    return Evidence(status, record, entry, measurement_obj, evidence_class, reasons)


def write_receipt(out: Path, *, backend: str, stage: str, paths: dict[str, str | None], workload_identity: str,
                  evidence: Evidence, low_overhead_target: float, episcope: dict) -> dict:
    """Write ``receipt.json`` (last, atomically): AKA's keys in AKA's meaning, every file of
    ``paths`` by its path relative to ``out`` and SHA-256, episcope's facts under ``episcope``."""
    receipt: dict = {"schema": RECEIPT_SCHEMA, "backend": backend, "stage": stage}
    for name, _ in FILES:
        path = paths[name]
        receipt[name] = _rel(path, out) if path else None
        receipt[f"{name}_sha256"] = sha256_file(path) if path else None
    receipt.update(
        workload_identity=workload_identity,
        correctness=evidence.correctness,
        correctness_evidence=evidence.record,
        trace_integrity="passed",
        evidence_class=evidence.evidence_class,
        classification_reasons=evidence.reasons,
        low_overhead_target_percent=low_overhead_target,
        measurement=evidence.measurement,
        episcope=episcope,
    )
    atomic_write_bytes(out / RECEIPT_NAME, json_bytes(receipt))
    return receipt


def episcope_facts(*, correctness: str | None, correctness_evidence: str | None, out: Path, capture: Capture,
                   intervals: tuple[str, ...], evidence: Evidence) -> dict:
    """The receipt's ``episcope`` key: what episcope established beyond AKA's keys."""
    return {
        "correctness_reported": correctness,
        "correctness_evidence_path": _rel(correctness_evidence, out) if correctness_evidence else None,
        "trace_integrity": integrity_facts(capture),
        "interval_requests": list(intervals),
        "summary": summary_extras(capture, intervals),
        "sites": site_statistics(capture),
        "measurement": measurement_statistics(evidence.measurement_obj),
    }


def read_raw(raw: str) -> bytes:
    try:
        return read_regular_file(raw, abi.MAX_RAW_BYTES)
    except FormatError as exc:  # swapped for a FIFO or device since it was checked
        raise ReceiptError([f"raw {raw}: {exc}"]) from None


def write_capture(*, raw: str, manifest: str, dictionary: str, clean_source: str, instrumented_source: str,
                  binary: str | None, workload_identity: str, correctness: str | None = None,
                  correctness_evidence: str | None = None, measurement: str | None = None,
                  stage: str = "exploration", low_overhead_target: float = 10.0, output_dir: str,
                  intervals: tuple[str, ...] = ()) -> dict:
    """The `capture` verb: decode, check the evidence, write trace + summary, then the receipt."""
    evidence = check_evidence(
        clean_source=clean_source, instrumented_source=instrumented_source, binary=binary,
        workload_identity=workload_identity, correctness=correctness, correctness_evidence=correctness_evidence,
        measurement=measurement, stage=stage, low_overhead_target=low_overhead_target, output_dir=output_dir,
        inputs=(raw, manifest, dictionary))
    capture = decode_files(read_raw(raw), load_json(manifest), load_json(dictionary))
    out = Path(output_dir)
    facts = episcope_facts(correctness=correctness, correctness_evidence=correctness_evidence, out=out,
                           capture=capture, intervals=intervals, evidence=evidence)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / export.JSON_TRACE_NAME
    summary_path = out / SUMMARY_NAME
    atomic_write_bytes(trace_path, export.chrome_trace_bytes(capture))
    atomic_write_bytes(summary_path, json_bytes(summarize(capture)))
    paths = {"clean_source": clean_source, "instrumented_source": instrumented_source, "binary": binary,
             "raw": raw, "manifest": manifest, "event_dictionary": dictionary, "trace": str(trace_path),
             "summary": str(summary_path)}
    return write_receipt(out, backend="cuda", stage=stage, paths=paths, workload_identity=workload_identity,
                         evidence=evidence, low_overhead_target=low_overhead_target, episcope=facts)
