"""Fail-closed validation of a capture receipt (``timeline.py validate``).

It re-hashes every file the receipt names, decodes the raw buffer again, regenerates the trace
and summary byte for byte, re-normalizes an IKeT source, recomputes the measurement statistics
and the evidence class, and reports every difference. It sits above both routes' writers
(``receipt``, ``iket``), so neither imports the other back.
"""

from __future__ import annotations

from pathlib import Path

from .decode import CaptureRejected
from .files import sha256_file
from .iket import validate_source
from .manifest import SpecError, load_json
from .measure import verify_measurement
from .receipt import (
    ARTIFACTS,
    OPTIONAL,
    RECEIPT_SCHEMA,
    build_outputs,
    classify,
    correctness_status,
    measurement_summary,
)


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
