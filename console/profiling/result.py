"""One profile directory as the console sees it: what the spine hands to the reducer."""

from __future__ import annotations

import os

import msgspec

from console.formats.jsonio import read_json_document
from console.formats.problems import FormatError, Unreadable
from console.formats.profile_json import ProfileKernel, read_gateway_profile
from console.formats.profile_summary import read_profile_summary

from .aka_diagnosis import AkaPattern, classify, is_aka_layout

METRICS_KEY = "analysis/metrics_key_run.json"


class ProfileResult(msgspec.Struct, frozen=True):
    dir: str
    level: str | None
    kernels: tuple[ProfileKernel, ...]  # longest first
    bottleneck: str | None  # "memory" | "compute" of the dominant kernel
    symptoms: tuple[str, ...]
    localize: tuple[str, ...]
    kernel_sha256: str | None
    stalls: tuple[tuple[str, float], ...]  # deep: top stall reasons (cycles per issued instruction)
    patterns: tuple[tuple[str, str, str, tuple[str, ...]], ...]
    # The file's pick, else summary.txt's kernel, else the longest kernel (as AKA's projection picks).
    dominant_kernel: str | None
    kernel_count: int | None = None  # all the profiler saw, where the file says (a projection keeps at most 32)
    kernels_omitted: int | None = None
    job_id: str | None = None  # the gateway job's, when gateway_profile.json is its record
    job_status: str | None = None
    # What AKA's classifier names on this directory's metrics file, beside episcope's own
    # patterns; None when it cannot be told, and aka_patterns_unknown says why.
    aka_patterns: tuple[AkaPattern, ...] | None = None
    aka_patterns_unknown: str | None = None
    # The pick's duration where no kernel entry states it: summary.txt's ``Duration:``.
    dominant_duration_ns: float | None = None
    # Why ``patterns`` and ``symptoms`` are not known (empty then): nothing diagnosed this
    # directory, neither a summary.txt nor a diagnosis in gateway_profile.json.
    patterns_unknown: str | None = None

    def to_json(self) -> dict:
        return {"dir": self.dir, "level": self.level, "kernels": [k.to_json() for k in self.kernels],
                "bottleneck": self.bottleneck, "symptoms": list(self.symptoms), "localize": list(self.localize),
                "kernel_sha256": self.kernel_sha256, "stalls": [list(s) for s in self.stalls],
                "patterns": [list(p[:3]) + [list(p[3])] for p in self.patterns],
                "dominant_kernel": self.dominant_kernel, "kernel_count": self.kernel_count,
                "kernels_omitted": self.kernels_omitted, "job_id": self.job_id, "job_status": self.job_status,
                "aka_patterns": None if self.aka_patterns is None else [list(p) for p in self.aka_patterns],
                "aka_patterns_unknown": self.aka_patterns_unknown,
                "dominant_duration_ns": self.dominant_duration_ns, "patterns_unknown": self.patterns_unknown}


def _longest(kernels: tuple[ProfileKernel, ...]) -> ProfileKernel | None:
    """The kernel with the longest stated duration, the first of equals; None: none states one."""
    timed = [k for k in kernels if k.duration_ns is not None]
    return max(timed, key=lambda k: k.duration_ns or 0.0) if timed else None


def _dominant(kernels: tuple[ProfileKernel, ...], pick: str | None) -> ProfileKernel | None:
    return next((k for k in kernels if k.name == pick), kernels[0] if kernels else None)


def _metrics_object(obj) -> dict:
    if not isinstance(obj, dict):
        raise FormatError(f"metrics file must be an object, got {type(obj).__name__}")
    return obj


def aka_patterns(path: str) -> tuple[tuple[AkaPattern, ...] | None, str | None, tuple[Unreadable, ...]]:
    """AKA's patterns on ``path``/analysis/metrics_key_run.json, or None and why not."""
    read = read_json_document(os.path.join(path, METRICS_KEY), _metrics_object)
    if read.problems:
        return None, f"{METRICS_KEY} is unreadable: {read.problems[0].error}", read.problems
    if read.value is None:
        return None, f"no {METRICS_KEY}", ()
    if not is_aka_layout(read.value):
        return None, f"{METRICS_KEY} is not in AKA's flat layout (no __kernel_name__)", ()
    return classify(read.value), None, ()


def load_profile_dir(path) -> tuple[ProfileResult | None, tuple[Unreadable, ...]]:
    """Read gateway_profile.json and summary.txt of one directory; either may be missing."""
    path = str(path)
    doc_r = read_gateway_profile(os.path.join(path, "gateway_profile.json"))
    sum_r = read_profile_summary(os.path.join(path, "summary.txt"))
    problems = doc_r.problems + sum_r.problems
    doc, summary = doc_r.value, sum_r.value
    if doc is None and summary is None:
        return None, problems
    aka, aka_unknown, aka_problems = aka_patterns(path)
    problems += aka_problems
    kernels = doc.kernels if doc is not None else ()
    longest = _longest(kernels)
    pick = (doc.dominant_kernel if doc is not None else None) or (summary.kernel if summary else None) or (
        longest.name if longest is not None else None)
    top = _dominant(kernels, pick)
    diagnosed = summary is not None or any(k.diagnostics for k in kernels)
    if doc is not None and top is not None and any(k.diagnostics for k in kernels):
        patterns = tuple((str(d.get("id")), str(d.get("severity")), str(d.get("label")),
                          tuple(str(e) for e in d.get("evidence") or ())) for d in top.diagnostics)
    else:
        patterns = summary.patterns if summary is not None else ()
    symptoms = doc.symptoms if doc is not None and doc.symptoms else (summary.symptoms if summary else ())
    localize = doc.localize if doc is not None and doc.localize else (summary.localize if summary else ())
    # Only files that really are in this directory count as places to look.
    localize = tuple(rel for rel in localize if os.path.isfile(os.path.join(path, rel)))
    stated = any(k.name == pick and k.duration_ns is not None for k in kernels)
    summary_duration = summary.duration_us * 1e3 if summary and summary.duration_us is not None and summary.kernel == pick else None
    return ProfileResult(
        dir=path,
        level=doc.level if doc is not None else None,
        kernels=kernels,
        bottleneck=top.bound if top is not None else None,
        symptoms=symptoms,
        localize=localize,
        kernel_sha256=doc.kernel_sha256 if doc is not None else None,
        stalls=summary.stalls if summary is not None else (),
        patterns=patterns,
        dominant_kernel=pick,
        kernel_count=doc.kernel_count if doc is not None else None,
        kernels_omitted=doc.kernels_omitted if doc is not None else None,
        job_id=doc.job_id if doc is not None else None,
        job_status=doc.job_status if doc is not None else None,
        aka_patterns=aka,
        aka_patterns_unknown=aka_unknown,
        dominant_duration_ns=None if stated else summary_duration,
        patterns_unknown=None if diagnosed else "nothing diagnosed this profile: no summary.txt and no diagnostics in gateway_profile.json",
    ), problems
