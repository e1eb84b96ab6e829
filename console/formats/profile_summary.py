"""summary.txt and analysis/source_evidence_manifest.json of a profile directory (FORMATS §9)."""

from __future__ import annotations

from typing import Any

import msgspec

from .bounded_read import read_regular_file
from .jsonio import read_json_document
from .problems import FormatError, ReadResult, Unreadable, one_line
from .profile_summary_text import parse

EVIDENCE_STATUSES = ("ok", "missing", "error", "skipped")


class ProfileSummary(msgspec.Struct, frozen=True):
    kernel: str | None
    duration_us: float | None
    patterns: tuple[tuple[str, str, str, tuple[str, ...]], ...]  # (id, severity, label, evidence)
    symptoms: tuple[str, ...]
    localize: tuple[str, ...]
    stalls: tuple[tuple[str, float], ...]
    fields: dict
    raw: dict

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "duration_us": self.duration_us,
                "patterns": [list(p[:3]) + [list(p[3])] for p in self.patterns],
                "symptoms": list(self.symptoms), "localize": list(self.localize),
                "stalls": [list(s) for s in self.stalls], "fields": dict(self.fields)}


def parse_profile_summary(text: str) -> ProfileSummary:
    if "===== NCU Profile Summary =====" not in text and "===== Diagnosis =====" not in text:
        raise FormatError("not an NCU profile summary (no '===== NCU Profile Summary =====' header)")
    p = parse(text)
    return ProfileSummary(p["kernel"], p["duration_us"], tuple(p["patterns"]), tuple(p["symptoms"]),
                          tuple(p["localize"]), tuple(p["stalls"]), p["fields"], p)


def read_profile_summary(path) -> ReadResult[ProfileSummary]:
    name = str(path)
    try:
        text = read_regular_file(path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ReadResult(None)
    except (OSError, FormatError) as exc:
        return ReadResult(None, (Unreadable(name, None, one_line(exc)),))
    try:
        return ReadResult(parse_profile_summary(text))
    except FormatError as exc:
        return ReadResult(None, (Unreadable(name, None, one_line(exc)),))


class EvidenceEntry(msgspec.Struct, frozen=True):
    name: str
    json: str | None
    txt: str | None
    purpose: str | None
    status: str | None  # ok | missing | error | skipped; None for an unknown word

    def to_json(self) -> dict:
        return {"name": self.name, "json": self.json, "txt": self.txt, "purpose": self.purpose, "status": self.status}


class SourceEvidence(msgspec.Struct, frozen=True):
    schema: str | None
    evidence: tuple[EvidenceEntry, ...]
    raw: dict

    def to_json(self) -> dict:
        return {"schema": self.schema, "evidence": [e.to_json() for e in self.evidence]}


def parse_source_evidence(obj: Any) -> SourceEvidence:
    if not isinstance(obj, dict) or not isinstance(obj.get("evidence"), list):
        raise FormatError("source evidence manifest needs an 'evidence' list")
    entries = []
    for i, e in enumerate(obj["evidence"]):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise FormatError(f"evidence[{i}] has no name")
        s = lambda k: e.get(k) if isinstance(e.get(k), str) else None
        status = e.get("status") if e.get("status") in EVIDENCE_STATUSES else None
        entries.append(EvidenceEntry(e["name"], s("json"), s("txt"), s("purpose"), status))
    return SourceEvidence(obj.get("schema") if isinstance(obj.get("schema"), str) else None, tuple(entries), obj)


def read_source_evidence(path) -> ReadResult[SourceEvidence]:
    return read_json_document(path, parse_source_evidence)
