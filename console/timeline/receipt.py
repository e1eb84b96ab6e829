"""Capture receipts: provenance by SHA-256, evidence class, and fail-closed validation.

A receipt names every input and output of a capture by a path relative to the receipt and
its SHA-256; ``validate.py`` checks one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.formats.bounded_read import read_regular_file
from console.formats.plainjson import atomic_write_bytes
from console.formats.problems import FormatError

from . import export
from .capture_view import MAX_RAW_BYTES
from .decode import decode
from .files import json_bytes, sha256_file
from .manifest import load_json, parse_dictionary, parse_manifest
from .measure import verify_measurement
from .summary import summarize

RECEIPT_SCHEMA = "atrex-autonomous-timeline-receipt/v1"
SUMMARY_NAME = "trace.summary.json"
RECEIPT_NAME = "receipt.json"
ARTIFACTS = ("clean_source", "instrumented_source", "binary", "raw", "manifest", "event_dictionary",
             "trace", "summary", "measurement")
OPTIONAL = ("binary", "measurement")
EVIDENCE_CLASSES = ("exploration", "diagnostic", "decision_grade")
CORRECTNESS = ("passed", "failed", "unknown")


class ReceiptError(ValueError):
    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def find_evaluator_record(evidence_path: str | None, kernel_sha256: str) -> dict | None:
    """The last evaluations.jsonl record (schema >= 2) whose kernel_sha256 matches.

    Read as a bounded regular file: evidence named ``/dev/zero`` or a FIFO is refused
    with a one-line :class:`ReceiptError`, not read forever or waited on.
    """
    if not evidence_path:
        return None
    try:
        data = read_regular_file(evidence_path)
    except FileNotFoundError:
        return None
    except (OSError, FormatError) as exc:
        raise ReceiptError([f"correctness evidence {evidence_path}: {exc}"]) from None
    found = None
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested or numbered past what json reads
            continue
        if (isinstance(rec, dict) and isinstance(rec.get("schema_version"), int)
                and rec["schema_version"] >= 2 and rec.get("kernel_sha256") == kernel_sha256):
            found = rec
    return found


def correctness_status(record: dict | None, declared: str) -> str:
    if record is None:
        return declared
    result = record.get("result") if isinstance(record.get("result"), dict) else {}
    return "passed" if result.get("all_pass") is True and not result.get("failures") else "failed"


def measurement_summary(measurement: dict | None) -> dict | None:
    if measurement is None:
        return None
    keep = ("baseline_ms", "instrumented_ms", "overhead_percent", "interval", "rank_test", "verdict",
            "blocks", "stop_reason", "workload_identity")
    return {k: measurement.get(k) for k in keep}


def classify(stage: str, record: dict | None, kernel_sha256: str, binary_sha256: str | None,
             measurement: dict | None, clean_sha256: str, target: float, declared: str,
             workload_identity: str) -> tuple[str, list[str]]:
    """Evidence class and the reasons it is not higher (FORMATS §10 decision_grade rule).

    As in AKA: an exploration-stage capture is ``exploration`` whatever else it has (a
    self-declared ``--correctness passed`` included); a final-stage capture is
    ``decision_grade`` when nothing is missing, else ``diagnostic``. Beyond the format's rule,
    a capture of a kernel whose correctness failed stays ``exploration`` at any stage, and a
    measurement of other sources or another workload and an interval whose upper end exceeds
    the target keep a capture below decision_grade.
    """
    reasons: list[str] = []
    if stage != "final":
        reasons.append("stage is exploration")
    if record is None:
        reasons.append("no evaluations.jsonl record (schema >= 2) matches the instrumented kernel sha256")
    else:
        result = record.get("result") if isinstance(record.get("result"), dict) else {}
        failures = result.get("failures")
        if record.get("kernel_sha256") != kernel_sha256:
            reasons.append("evaluator record is for another kernel")
        if result.get("all_pass") != (not failures):
            reasons.append("evaluator record all_pass contradicts its failures")
        elif not result.get("all_pass"):
            reasons.append("evaluator record reports failures")
    if binary_sha256 is None:
        reasons.append("no binary identity")
    if measurement is None:
        reasons.append("no overhead measurement")
    else:
        variants = measurement.get("variants") or {}
        if (variants.get("instrumented") or {}).get("source_sha256") != kernel_sha256:
            reasons.append("measurement instrumented source is not this capture's")
        if (variants.get("baseline") or {}).get("source_sha256") != clean_sha256:
            reasons.append("measurement baseline source is not this capture's clean source")
        if measurement.get("workload_identity") != workload_identity:
            reasons.append("measurement workload differs from the capture's")
        overhead = measurement.get("overhead_percent")
        high = (measurement.get("interval") or {}).get("high_percent")
        if not isinstance(overhead, (int, float)) or overhead > target:
            reasons.append(f"overhead {overhead} % above target {target:g} %")
        elif high is None or high > target:
            reasons.append(f"overhead interval upper end {high} % above target {target:g} %")
    if record is None and declared != "passed":
        reasons.append(f"declared correctness is {declared}")
    if stage != "final" or correctness_status(record, declared) == "failed":
        return "exploration", reasons
    return ("diagnostic", reasons) if reasons else ("decision_grade", [])


def _rel(path: str, base: Path) -> str:
    return os.path.relpath(os.path.abspath(path), base)


def build_outputs(raw: bytes, manifest_obj, dictionary_obj, intervals) -> tuple[bytes, dict, dict]:
    """Decode and render: (trace bytes, summary, trace_integrity); raises on any rejection."""
    manifest = parse_manifest(manifest_obj)
    dictionary = parse_dictionary(dictionary_obj)
    capture = decode(raw, manifest, dictionary)
    summary = summarize(capture, intervals)
    integrity = {
        "status": "verified",
        "abi": summary["abi"],
        "launch_id": capture.header.launch_id,
        "status_word": capture.header.status,
        "committed_records": capture.committed_records,
        "owners_observed": summary["owners_observed"],
        "owner_count": capture.header.owner_count,
        "records_per_owner": capture.header.records_per_owner,
    }
    return export.chrome_trace_bytes(capture), summary, integrity


def write_capture(*, raw: str, manifest: str, dictionary: str, clean_source: str, instrumented_source: str,
                  binary: str | None, workload_identity: str, correctness: str = "unknown",
                  correctness_evidence: str | None = None, measurement: str | None = None,
                  stage: str = "exploration", low_overhead_target: float = 10.0, output_dir: str,
                  intervals: tuple[str, ...] = (), backend: str = "cuda", source: dict | None = None) -> dict:
    """The `capture` verb: decode, write trace + summary, then the receipt (last, atomically)."""
    if stage not in ("exploration", "final"):
        raise ReceiptError([f"stage must be exploration or final, got {stage!r}"])
    if correctness not in CORRECTNESS:
        raise ReceiptError([f"correctness must be one of {', '.join(CORRECTNESS)}"])
    missing = [p for p in (raw, manifest, dictionary, clean_source, instrumented_source, binary, measurement)
               if p and not os.path.isfile(p)]
    if missing:
        raise ReceiptError([f"missing file {p}" for p in missing])
    try:
        raw_bytes = read_regular_file(raw, MAX_RAW_BYTES)
    except FormatError as exc:  # swapped for a FIFO or device since the check above
        raise ReceiptError([f"raw {raw}: {exc}"]) from None
    trace_bytes, summary, integrity = build_outputs(raw_bytes, load_json(manifest), load_json(dictionary), intervals)
    measurement_obj = None
    if measurement:
        measurement_obj = load_json(measurement)
        bad = verify_measurement(measurement_obj)
        if bad:
            raise ReceiptError(bad)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / export.JSON_TRACE_NAME
    summary_path = out / SUMMARY_NAME
    atomic_write_bytes(trace_path, trace_bytes)
    atomic_write_bytes(summary_path, json_bytes(summary))
    kernel_sha = sha256_file(instrumented_source)
    clean_sha = sha256_file(clean_source)
    record = find_evaluator_record(correctness_evidence, kernel_sha)
    binary_sha = sha256_file(binary) if binary else None
    evidence_class, reasons = classify(stage, record, kernel_sha, binary_sha, measurement_obj, clean_sha,
                                       low_overhead_target, correctness, workload_identity)
    receipt: dict = {"schema": RECEIPT_SCHEMA, "backend": backend, "stage": stage}
    if source is not None:  # where a normalized raw buffer came from (export-iket)
        receipt["source"] = source
    paths = {"clean_source": clean_source, "instrumented_source": instrumented_source, "binary": binary,
             "raw": raw, "manifest": manifest, "event_dictionary": dictionary, "trace": str(trace_path),
             "summary": str(summary_path), "measurement": measurement}
    for name in ARTIFACTS:
        path = paths[name]
        receipt[name] = _rel(path, out) if path else None
        receipt[f"{name}_sha256"] = sha256_file(path) if path else None
    receipt.update(
        workload_identity=workload_identity,
        correctness={"status": correctness_status(record, correctness), "declared": correctness,
                     "evaluator_record": record,
                     "evidence": _rel(correctness_evidence, out) if correctness_evidence else None},
        trace_integrity=integrity,
        interval_requests=list(intervals),
        evidence_class=evidence_class,
        classification_reasons=reasons,
        low_overhead_target_percent=low_overhead_target,
        measurement_summary=measurement_summary(measurement_obj),
    )
    atomic_write_bytes(out / RECEIPT_NAME, json_bytes(receipt))
    return receipt
