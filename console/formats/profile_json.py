"""PROFILE_JSON (FORMATS §9): `<sync>/gateway_profile.json`.

AKA's sandbox writes that file as the whole gateway *job record* (FORMATS §8): ``{job_id,
kind, status, result, error}``, the profile being ``result``; only the ``[sandbox]
PROFILE_JSON=`` line carries the bare profile. Both forms read. A record of a job that did
not succeed is a problem naming the job and its error, not an empty profile.

Lenient: both generations read. The older gives each kernel ``duration`` + ``duration_unit``
and ``mem_sol_pct``; the newer projects the result (at most 32 kernels) with
``kernel_count``, ``total_duration_us``, ``dominant_kernel``, ``kernels_omitted`` and kernels
with ``duration_us`` and ``memory_sol_pct``. A field that is missing or of the wrong type is
None, never 0.
"""

import os
from typing import Any

import msgspec
from msgspec.structs import replace

from .jsonio import read_json_document
from .problems import FormatError, ReadResult
from .profile_record import is_job_record

_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


class ProfileKernel(msgspec.Struct, frozen=True):
    name: str
    duration_ns: float | None
    compute_sol_pct: float | None
    mem_sol_pct: float | None
    dram_pct: float | None
    occupancy_pct: float | None
    bound: str | None
    diagnostics: tuple[dict[str, Any], ...]
    metrics: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "duration_ns": self.duration_ns, "compute_sol_pct": self.compute_sol_pct,
                "mem_sol_pct": self.mem_sol_pct, "dram_pct": self.dram_pct, "occupancy_pct": self.occupancy_pct,
                "bound": self.bound, "diagnostics": list(self.diagnostics), "metrics": dict(self.metrics)}


class GatewayProfile(msgspec.Struct, frozen=True):
    profiler: str | None
    level: str | None
    kernels: tuple[ProfileKernel, ...]
    kernel_count: int | None
    total_duration_us: float | None
    dominant_kernel: str | None
    kernels_omitted: int | None
    kernel_sha256: str | None
    note: str | None
    symptoms: tuple[str, ...]
    localize: tuple[str, ...]
    job_id: str | None = None  # the gateway job's, when the file is its job record
    job_status: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"profiler": self.profiler, "level": self.level, "kernels": [k.to_json() for k in self.kernels],
                "kernel_count": self.kernel_count, "total_duration_us": self.total_duration_us,
                "dominant_kernel": self.dominant_kernel, "kernels_omitted": self.kernels_omitted,
                "kernel_sha256": self.kernel_sha256, "note": self.note, "symptoms": list(self.symptoms),
                "localize": list(self.localize), "job_id": self.job_id, "job_status": self.job_status}


def _kernel(obj: Any, index: int) -> ProfileKernel:
    if not isinstance(obj, dict):
        raise FormatError(f"kernels[{index}] is not an object")
    name = _str(obj.get("name"))
    if name is None:
        raise FormatError(f"kernels[{index}] has no name")
    duration = _num(obj.get("duration"))
    unit = obj.get("duration_unit") or "ns"
    duration_ns = None if duration is None or unit not in _TO_NS else duration * _TO_NS[unit]
    duration_us = _num(obj.get("duration_us"))  # the newer generation's projection
    if duration_ns is None and duration_us is not None:
        duration_ns = duration_us * _TO_NS["us"]
    mem_sol = _num(obj.get("mem_sol_pct"))
    if mem_sol is None:
        mem_sol = _num(obj.get("memory_sol_pct"))
    bound = obj.get("bound") if obj.get("bound") in ("compute", "memory") else None
    diags = tuple(d for d in obj.get("diagnostics") or () if isinstance(d, dict)) if isinstance(
        obj.get("diagnostics"), list) else ()
    metrics = obj["metrics"] if isinstance(obj.get("metrics"), dict) else {}
    return ProfileKernel(name, duration_ns, _num(obj.get("compute_sol_pct")), mem_sol,
                         _num(obj.get("dram_pct")), _num(obj.get("occupancy_pct")), bound, diags, metrics)


def _job_error(error: Any) -> str:
    if isinstance(error, dict):
        return "; ".join(str(error[key]) for key in ("reason", "message") if error.get(key)) or "no error given"
    return str(error) if error else "no error given"


def parse_profile_json(obj: Any) -> GatewayProfile:
    """One PROFILE_JSON object, bare or inside its job record; raises FormatError when it is
    neither, or when the record's job did not succeed."""
    if not isinstance(obj, dict):
        raise FormatError(f"PROFILE_JSON must be an object, got {type(obj).__name__}")
    if is_job_record(obj):
        job_id, status = _str(obj.get("job_id")), _str(obj.get("status"))
        result = obj.get("result")
        if status != "succeeded" or not isinstance(result, dict):
            raise FormatError(f"profile job {job_id} {status or 'without a status'}: {_job_error(obj.get('error'))}")
        return replace(parse_profile_json(result), job_id=job_id, job_status=status)
    kernels = obj.get("kernels")
    if not isinstance(kernels, list):
        raise FormatError("PROFILE_JSON has no kernels list")
    parsed = tuple(_kernel(k, i) for i, k in enumerate(kernels))

    def strings(key: str) -> tuple[str, ...]:
        value = obj.get(key)
        return tuple(s for s in value if isinstance(s, str)) if isinstance(value, list) else ()

    return GatewayProfile(
        profiler=_str(obj.get("profiler")), level=_str(obj.get("level")), kernels=parsed,
        kernel_count=_int(obj.get("kernel_count")), total_duration_us=_num(obj.get("total_duration_us")),
        dominant_kernel=_str(obj.get("dominant_kernel")), kernels_omitted=_int(obj.get("kernels_omitted")),
        kernel_sha256=_str(obj.get("kernel_sha256")), note=_str(obj.get("note")),
        symptoms=strings("symptoms"), localize=strings("localize"),
    )


def read_gateway_profile(path: str | os.PathLike[str]) -> ReadResult[GatewayProfile]:
    return read_json_document(path, parse_profile_json)
