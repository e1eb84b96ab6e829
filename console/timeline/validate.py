"""Fail-closed validation of a capture receipt (``timeline.py validate``), episcope's or AKA's.

It re-hashes every file the receipt names; for a CUDA capture it decodes the raw buffer again
and regenerates the trace and summary (AKA's canonical forms, compared as JSON text and
objects); for an IKeT capture it checks the trace and summary against each other and the event
dictionary as AKA does and, for episcope's receipts, normalizes the launch again (``iket``);
it checks the evaluator record, recomputes the measurement and the evidence class,
and reports every difference. episcope's additional keys (``episcope``) are checked when
present; a receipt AKA wrote has none. It sits above both routes' writers (``receipt``,
``iket``), so neither imports the other back.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

from console.formats.bounded_read import read_regular_file

from . import abi, export
from .decode import Capture, CaptureRejected
from .files import sha256_file
from .manifest import SpecError, load_json
from .receipt import (
    CORRECTNESS,
    FILES,
    RECEIPT_SCHEMA,
    STAGES,
    check_measurement,
    classify,
    decode_files,
    integrity_facts,
    measurement_entry,
    measurement_statistics,
    record_problem,
    verified_correctness,
)
from .summary import site_statistics, summarize, summary_extras


def _hashed_files(receipt: dict, base: Path, reasons: list[str]) -> dict[str, Path]:
    """The files the receipt names whose SHA-256 matches; a reason for every other one."""
    files: dict[str, Path] = {}
    for name, required in FILES:
        rel = receipt.get(name)
        if rel is None and not required:
            if receipt.get(f"{name}_sha256") is not None:
                reasons.append(f"{name}_sha256 given without {name}")
            continue
        if not isinstance(rel, str) or not rel:
            reasons.append(f"receipt names no {name}")
            continue
        path = base / rel
        if not path.is_file():
            reasons.append(f"{name} missing: {rel}")
            continue
        if sha256_file(path) != receipt.get(f"{name}_sha256"):
            reasons.append(f"{name} sha256 mismatch: {rel}")
        files[name] = path
    return files


def _gunzip_at_most(path: Path, limit: int) -> bytes | None:
    """The decompressed file, or None when it is not gzip; stops after ``limit`` bytes so a
    forged trace cannot inflate without bound."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        data = inflater.decompress(path.read_bytes(), limit)
    except zlib.error:
        return None
    return data


def _check_products(capture: Capture, files: dict[str, Path]) -> list[str]:
    """The stored trace and summary against the ones the raw buffer gives again."""
    reasons = []
    text = export.chrome_trace_json(capture).encode()
    stored = _gunzip_at_most(files["trace"], len(text) + 1)
    # AKA and episcope both write the trace as sorted-key compact JSON: same trace, same text
    if stored != text:
        reasons.append("canonical trace is not reproducible from the raw buffer")
    try:
        summary = load_json(files["summary"])
    except ValueError:
        summary = None
    if summary != summarize(capture):
        reasons.append("trace summary is not reproducible from the raw buffer")
    return reasons


def _check_extras(capture: Capture, receipt: dict) -> list[str]:
    """episcope's key against the capture decoded again (absent from a receipt AKA wrote)."""
    extras = receipt.get("episcope")
    if not isinstance(extras, dict):
        return []
    reasons = []
    if extras.get("trace_integrity") != integrity_facts(capture):
        reasons.append("episcope trace_integrity differs from the re-decoded raw buffer")
    requests = extras.get("interval_requests") or []
    try:
        again = summary_extras(capture, tuple(requests))
    except (ValueError, TypeError) as exc:
        reasons.append(f"episcope interval_requests cannot be recomputed: {exc}")
    else:
        if extras.get("summary") != again:
            reasons.append("episcope summary differs from the re-decoded raw buffer")
    # absent from receipts written before episcope stated its per-site statistics
    if "sites" in extras and extras["sites"] != site_statistics(capture):
        reasons.append("episcope sites differ from the re-decoded raw buffer")
    return reasons


def _check_cuda(receipt: dict, files: dict[str, Path]) -> list[str]:
    if not all(n in files for n in ("raw", "manifest", "event_dictionary", "trace", "summary")):
        return []
    try:
        # bounded, and never blocking on a FIFO swapped in since the file was hashed
        raw = read_regular_file(files["raw"], abi.MAX_RAW_BYTES)
        capture = decode_files(raw, load_json(files["manifest"]), load_json(files["event_dictionary"]))
    except CaptureRejected as exc:
        return [f"raw capture rejected: {exc}"]
    except SpecError as exc:
        return [f"manifest or dictionary rejected: {exc}"]
    except ValueError as exc:  # FormatError too: not a regular file, or too large
        return [f"capture cannot be decoded: {exc}"]
    return _check_products(capture, files) + _check_extras(capture, receipt)


def _check_iket(receipt: dict, base: Path, files: dict[str, Path]) -> list[str]:
    from .iket import validate_iket  # numpy: only an IKeT receipt needs it

    reasons, capture = validate_iket(receipt, base, files)
    return reasons + (_check_extras(capture, receipt) if capture is not None else [])


def _check_measurement(receipt: dict, base: Path) -> list[str]:
    entry = receipt.get("measurement")
    if entry is None:
        return []
    if not isinstance(entry, dict):
        return ["receipt measurement must be an object"]
    rel = entry.get("path")
    path = base / str(rel)
    if not isinstance(rel, str) or not path.is_file():
        return ["measurement artifact is missing"]
    if sha256_file(path) != entry.get("sha256"):
        return [f"measurement hash mismatch: {rel}"]
    try:
        obj = load_json(path)
    except ValueError:
        return ["measurement is not JSON"]
    reasons = check_measurement(obj, path, receipt.get("clean_source_sha256"),
                                receipt.get("instrumented_source_sha256"), receipt.get("workload_identity"))
    if reasons:
        return reasons
    again = measurement_entry(path, obj, base)
    for key in ("baseline_ms", "instrumented_ms", "overhead_percent"):
        if not (isinstance(entry.get(key), (int, float))
                and math.isclose(float(entry[key]), again[key], rel_tol=1e-12)):
            reasons.append(f"measurement {key} is not reproducible")
    extras = receipt.get("episcope")
    if isinstance(extras, dict) and extras.get("measurement") != measurement_statistics(obj):
        reasons.append("episcope measurement differs from the measurement file")
    return reasons


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
    if receipt.get("backend") not in ("cuda", "iket"):
        reasons.append("receipt backend is invalid")
    if receipt.get("stage") not in STAGES:
        reasons.append("receipt stage is invalid")
    if receipt.get("correctness") not in CORRECTNESS:
        reasons.append("receipt correctness is invalid")
    if receipt.get("trace_integrity") != "passed":
        reasons.append("receipt trace integrity is not passed")
    workload = receipt.get("workload_identity")
    if not isinstance(workload, str) or not workload.strip():
        reasons.append("receipt workload identity is missing")
    files = _hashed_files(receipt, base, reasons)
    if receipt.get("backend") == "iket":
        reasons.extend(_check_iket(receipt, base, files))
    else:
        reasons.extend(_check_cuda(receipt, files))
    verified = False
    record = receipt.get("correctness_evidence")
    if record is not None and "instrumented_source" in files:
        problem = record_problem(record, sha256_file(files["instrumented_source"]))
        if problem:
            reasons.append(problem)
        else:
            verified = True
            if verified_correctness(record) != receipt.get("correctness"):
                reasons.append("receipt correctness contradicts the evaluator record")
    measurement_reasons = _check_measurement(receipt, base)
    reasons.extend(measurement_reasons)
    target = receipt.get("low_overhead_target_percent")
    if not (isinstance(target, (int, float)) and not isinstance(target, bool) and math.isfinite(target)
            and target >= 0):
        reasons.append("receipt low-overhead target is invalid")
    elif not measurement_reasons:
        entry = receipt.get("measurement")
        cls, why = classify(str(receipt.get("stage")), str(receipt.get("correctness")), verified,
                            receipt.get("binary") is not None, entry, float(target))
        if receipt.get("evidence_class") != cls:
            reasons.append(f"evidence class {receipt.get('evidence_class')!r} does not follow from the evidence "
                           f"(recomputed {cls!r})")
        elif receipt.get("classification_reasons") != why:
            reasons.append(f"classification reasons do not follow from the evidence (recomputed {why})")
    return reasons
