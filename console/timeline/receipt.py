"""Capture receipts: provenance by SHA-256, evidence class, and fail-closed validation.

A receipt names every input and output of a capture by a path relative to the receipt and
its SHA-256. `validate` re-hashes all of them, decodes the raw buffer again, regenerates the
trace and summary byte for byte, recomputes the measurement statistics and the evidence
class, and reports every difference.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import export
from .decode import CaptureRejected, decode
from .files import atomic_write, json_bytes, sha256_file
from .manifest import SpecError, load_json, parse_dictionary, parse_manifest
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
    """The last evaluations.jsonl record (schema >= 2) whose kernel_sha256 matches."""
    if not evidence_path or not os.path.exists(evidence_path):
        return None
    found = None
    with open(evidence_path, "rb") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
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

    Beyond the format's rule, an evaluator record that reports a failure, a measurement of
    other sources or another workload, and an interval whose upper end exceeds the target
    also keep a capture below decision_grade.
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
    if not reasons:
        return "decision_grade", []
    if correctness_status(record, declared) == "passed":
        return "diagnostic", reasons
    return "exploration", reasons


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
    raw_bytes = Path(raw).read_bytes()
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
    atomic_write(trace_path, trace_bytes)
    atomic_write(summary_path, json_bytes(summary))
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
    atomic_write(out / RECEIPT_NAME, json_bytes(receipt))
    return receipt


def validate_receipt(receipt_path: str) -> list[str]:
    """Every reason the receipt does not hold up; an empty list means it validates."""
    try:
        receipt = load_json(receipt_path)
    except (OSError, ValueError) as exc:
        return [f"receipt unreadable: {exc}"]
    if not isinstance(receipt, dict) or receipt.get("schema") != RECEIPT_SCHEMA:
        return [f"receipt schema is not {RECEIPT_SCHEMA}"]
    base = Path(receipt_path).parent
    reasons: list[str] = []
    files: dict[str, Path] = {}
    for name in ARTIFACTS:
        rel = receipt.get(name)
        if rel is None and name in OPTIONAL:
            if receipt.get(f"{name}_sha256") is not None:
                reasons.append(f"{name}_sha256 given without {name}")
            continue
        if not isinstance(rel, str):
            reasons.append(f"receipt names no {name}")
            continue
        path = base / rel
        if not path.is_file():
            reasons.append(f"{name} missing: {rel}")
            continue
        if sha256_file(path) != receipt.get(f"{name}_sha256"):
            reasons.append(f"{name} sha256 mismatch: {rel}")
        files[name] = path
    if receipt.get("backend") == "iket":
        from .iket import validate_source

        reasons.extend(validate_source(receipt, base, files))
    needed = ("raw", "manifest", "event_dictionary", "trace", "summary")
    if all(n in files for n in needed):
        try:
            trace_bytes, summary, integrity = build_outputs(
                files["raw"].read_bytes(), load_json(files["manifest"]), load_json(files["event_dictionary"]),
                tuple(receipt.get("interval_requests") or ()))
        except CaptureRejected as exc:
            reasons.append(f"raw capture rejected: {exc}")
        except SpecError as exc:
            reasons.append(f"manifest or dictionary rejected: {exc}")
        except ValueError as exc:
            reasons.append(f"capture cannot be decoded: {exc}")
        else:
            if files["trace"].read_bytes() != trace_bytes:
                reasons.append("trace differs from the re-decoded raw buffer")
            try:
                stored = load_json(files["summary"])
            except ValueError:
                stored = None
            if stored != summary:
                reasons.append("summary differs from the re-decoded raw buffer")
            if receipt.get("trace_integrity") != integrity:
                reasons.append("trace_integrity differs from the re-decoded raw buffer")
    measurement = None
    if "measurement" in files:
        try:
            measurement = load_json(files["measurement"])
        except ValueError:
            reasons.append("measurement is not JSON")
        else:
            reasons.extend(verify_measurement(measurement))
            if receipt.get("measurement_summary") != measurement_summary(measurement):
                reasons.append("measurement_summary differs from the measurement")
    elif receipt.get("measurement_summary") is not None:
        reasons.append("measurement_summary without a measurement")
    if "instrumented_source" in files and "clean_source" in files:
        correctness = receipt.get("correctness") if isinstance(receipt.get("correctness"), dict) else {}
        record = correctness.get("evaluator_record")
        kernel_sha = sha256_file(files["instrumented_source"])
        if record is not None and (not isinstance(record, dict) or record.get("kernel_sha256") != kernel_sha):
            reasons.append("evaluator record does not match the instrumented source")
            record = None
        declared = correctness.get("declared", "unknown")
        if correctness.get("status") != correctness_status(record, declared):
            reasons.append("correctness status differs from its evidence")
        target = receipt.get("low_overhead_target_percent")
        if not isinstance(target, (int, float)):
            reasons.append("low_overhead_target_percent missing")
        else:
            binary_sha = sha256_file(files["binary"]) if "binary" in files else None
            cls, why = classify(receipt.get("stage"), record, kernel_sha, binary_sha, measurement,
                                sha256_file(files["clean_source"]), float(target), declared,
                                receipt.get("workload_identity"))
            if receipt.get("evidence_class") != cls or receipt.get("classification_reasons") != why:
                reasons.append(f"evidence class {receipt.get('evidence_class')!r} does not follow from the "
                               f"evidence (recomputed {cls!r})")
    return reasons
