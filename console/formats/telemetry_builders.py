"""Building telemetry records (FORMATS §2), with the standard library only.

``tools/iteration_trace.py`` and the sandbox write these records on the GPU machine, where
msgspec is not installed, so the builders live apart from the msgspec-backed reader in
:mod:`console.formats.telemetry` (which re-exports every name defined here).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .problems import FormatError

SCHEMA_VERSION = "atrex_iteration_event_v1"
RECEIPT_SCHEMA = "atrex.iteration_trace.v1"
RECEIPT_PREFIX = "ATREX_TRACE_EVENT="

PHASES = ("profile", "research", "planning", "implementation", "correctness", "benchmark", "recording")
SOURCE_KINDS = ("gpu_wiki", "reference_projects", "workspace", "public_web", "unknown")
SANDBOX_CATEGORIES = ("profile", "correctness", "benchmark", "dev")
EVENTS = frozenset(
    {
        "phase_started",
        "phase_completed",
        "source_read",
        "sandbox_operation_started",
        "sandbox_operation_completed",
    }
)
MAX_REFERENCE_CHARS = 500

ENV_TRACE = "ATREX_TELEMETRY_TRACE"
ENV_CAMPAIGN = "ATREX_TELEMETRY_CAMPAIGN_ID"
ENV_ITERATION = "ATREX_TELEMETRY_ITERATION_ID"
ENV_ATTEMPT = "ATREX_TELEMETRY_ATTEMPT_ID"


def utc_timestamp() -> str:
    return datetime.now(UTC).isoformat()


def common_fields(event: str, *, source: str, measurement: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    return {
        "schema_version": SCHEMA_VERSION,
        # A variable set to "" is recorded as "", as AKA's writers record it: the default
        # stands only for a variable that is not set.
        "campaign_id": env.get(ENV_CAMPAIGN, "campaign"),
        "iteration_id": env.get(ENV_ITERATION, "unknown"),
        "attempt_id": env.get(ENV_ATTEMPT, "attempt"),
        "event": event,
        "timestamp": utc_timestamp(),
        "monotonic_seconds": time.monotonic(),
        "source": source,
        "measurement": measurement,
    }


def phase_record(action: str, phase: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    if phase not in PHASES:
        raise FormatError(f"unknown phase {phase!r} (expected one of {', '.join(PHASES)})")
    if action not in ("start", "end"):
        raise FormatError(f"unknown phase action {action!r}")
    event = "phase_started" if action == "start" else "phase_completed"
    record = common_fields(event, source="agent_marker", measurement="explicit", env=env)
    record.update(phase=phase, action=action, marker_id=uuid.uuid4().hex)
    return record


def aka_json(obj: Mapping[str, Any]) -> str:
    """JSON as AKA's telemetry writers print it (``json.dumps(obj, ensure_ascii=False,
    sort_keys=True)``: sorted keys, the default ``", "`` and ``": "`` separators), so that
    a byte diff of episcope's lines against AKA's is clean."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)


def record_line(record: Mapping[str, Any]) -> bytes:
    """One telemetry.jsonl line, newline included."""
    return (aka_json(record) + "\n").encode("utf-8")


def phase_receipt(record: Mapping[str, Any]) -> str:
    receipt = {
        "action": record["action"],
        "kind": "phase_marker",
        "marker_id": record["marker_id"],
        "phase": record["phase"],
        "schema": RECEIPT_SCHEMA,
    }
    return RECEIPT_PREFIX + aka_json(receipt)


def safe_reference(source_kind: str, reference: str) -> str:
    """Return the reference as it is recorded, or raise :class:`FormatError`.

    The rules are AKA's, so that both writers record the same bytes for the same input:
    surrounding whitespace is stripped and ``\\`` becomes ``/``; then a relative path that
    cannot climb out of the workspace (no leading ``/``, no ``..`` part), or, for public_web,
    an http(s) URL without credentials whose query and fragment are dropped (they often carry
    tokens) and whose host stays as written. What remains is cut to 500 characters, so a long
    query never makes a URL too long to record. Control characters are kept, as AKA keeps them.
    """
    if source_kind not in SOURCE_KINDS:
        raise FormatError(f"unknown source kind {source_kind!r} (expected one of {', '.join(SOURCE_KINDS)})")
    value = reference.strip().replace("\\", "/")
    if source_kind == "public_web":
        return _safe_url(value)[:MAX_REFERENCE_CHARS]
    if not value:
        raise FormatError("empty reference")
    if value.startswith("/"):
        raise FormatError(f"reference {value!r} is not a relative path")
    if ".." in value.split("/"):
        raise FormatError(f"reference {value!r} climbs out with '..'")
    return value[:MAX_REFERENCE_CHARS]


def _safe_url(value: str) -> str:
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise FormatError(f"reference is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FormatError("public_web reference must be an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise FormatError("public_web reference must not carry credentials")
    # urlsplit lowercases the scheme; the netloc (host case, port text) is kept as written.
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def source_read_record(source_kind: str, reference: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    record = common_fields("source_read", source="agent_marker", measurement="explicit", env=env)
    record.update(source_kind=source_kind, reference=safe_reference(source_kind, reference))
    return record


def sandbox_category(argv: list[str]) -> str:
    names = [os.path.basename(a) for a in argv]
    if any(n in ("profile_nvidia.sh", "profile_kernel.sh") for n in names):
        return "profile"
    if "test_kernel.py" in names:
        return "correctness" if "--multi-seed" in argv or any(a.startswith("--multi-seed=") for a in argv) else "benchmark"
    return "dev"


def sandbox_started_record(operation_id: str, category: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    record = common_fields("sandbox_operation_started", source="sandbox", measurement="exact", env=env)
    record.update(operation_id=operation_id, category=category)
    return record


def sandbox_completed_record(
    operation_id: str,
    category: str,
    duration_seconds: float,
    *,
    exit_status: int | None = None,
    failure_type: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    record = common_fields("sandbox_operation_completed", source="sandbox", measurement="exact", env=env)
    ok = exit_status == 0 and failure_type is None
    record.update(
        operation_id=operation_id,
        category=category,
        duration_seconds=round(duration_seconds, 6),
        status="succeeded" if ok else "failed",
    )
    if failure_type is not None:
        record["failure_type"] = failure_type
    else:
        record["exit_status"] = exit_status
    return record


def new_operation_id() -> str:
    return f"sandbox-{os.getpid()}-{time.monotonic_ns()}"
