"""Capture manifest and event dictionary (FORMATS §10): parse and check, every error at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

MANIFEST_SCHEMA = "atrex-autonomous-timeline-manifest/v1"
# An ATREXLT1 buffer is a CUDA capture (AKA's decoder refuses any other backend). A buffer
# that export-iket normalized from an IKeT run says so under ``producer``, a key AKA ignores.
BACKEND = "cuda"
EVENTS_SCHEMA = "atrex-autonomous-timeline-events/v1"
SITE_KINDS = ("any", "range", "instant", "counter")


class SpecError(ValueError):
    """A manifest or dictionary that cannot describe a capture; ``errors`` lists every reason."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class Writer(NamedTuple):
    ordinal: int
    label: str
    thread: int
    warp: int | None
    lane: int
    group: str | None


class Manifest(NamedTuple):
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    launch_id: int
    records_per_owner: int
    writers: tuple[Writer, ...]
    raw: dict

    @property
    def cta_count(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def owner_count(self) -> int:
        return self.cta_count * len(self.writers)

    def owner_name(self, owner: int) -> str:
        """``cta(x,y,z)/<label>`` as the trace names an owner."""
        cta, ordinal = divmod(owner, len(self.writers))
        x = cta % self.grid[0]
        y = (cta // self.grid[0]) % self.grid[1]
        z = cta // (self.grid[0] * self.grid[1])
        return f"cta({x},{y},{z})/{self.writers[ordinal].label}"


class Site(NamedTuple):
    site_id: int
    name: str
    kind: str
    raw: dict


class Dictionary(NamedTuple):
    sites: tuple[Site, ...]
    raw: dict

    def by_id(self) -> dict[int, Site]:
        return {site.site_id: site for site in self.sites}


def _int(value, name: str, errors: list[str], low: int = 0, high: int | None = None) -> int | None:
    if type(value) is not int or value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        errors.append(f"{name} must be an integer {bound}, got {value!r}")
        return None
    return value


def _dims(value, name: str, errors: list[str]) -> tuple[int, int, int] | None:
    if not isinstance(value, list) or len(value) != 3:
        errors.append(f"{name} must be a list of 3 positive integers, got {value!r}")
        return None
    dims = [_int(v, f"{name}[{i}]", errors, 1, 0xFFFFFFFF) for i, v in enumerate(value)]
    return None if None in dims else (dims[0], dims[1], dims[2])


def parse_manifest(obj) -> Manifest:
    errors: list[str] = []
    if not isinstance(obj, dict):
        raise SpecError([f"manifest must be a JSON object, got {type(obj).__name__}"])
    if obj.get("schema") != MANIFEST_SCHEMA:
        errors.append(f"manifest schema must be {MANIFEST_SCHEMA!r}, got {obj.get('schema')!r}")
    if obj.get("backend") != BACKEND:
        errors.append(f"manifest backend must be {BACKEND}, got {obj.get('backend')!r}")
    grid = _dims(obj.get("grid"), "grid", errors)
    block = _dims(obj.get("block"), "block", errors)
    launch_id = _int(obj.get("launch_id"), "launch_id", errors, 0, 2**64 - 1)
    rpo = _int(obj.get("records_per_owner"), "records_per_owner", errors, 1, 0xFFFFFFFF)
    layout = obj.get("owner_layout")
    writers: list[Writer] = []
    if not isinstance(layout, dict) or layout.get("kind") != "cta_writers":
        errors.append("owner_layout must be an object with kind 'cta_writers'")
    elif not isinstance(layout.get("writers"), list) or not layout["writers"]:
        errors.append("owner_layout.writers must be a non-empty list")
    else:
        threads = block[0] * block[1] * block[2] if block else None
        labels: set[str] = set()
        for i, w in enumerate(layout["writers"]):
            where = f"writers[{i}]"
            if not isinstance(w, dict):
                errors.append(f"{where} must be an object")
                continue
            if w.get("ordinal") != i or type(w.get("ordinal")) is not int:
                errors.append(f"{where}.ordinal must be {i} (dense from 0), got {w.get('ordinal')!r}")
            label = w.get("label")
            if not isinstance(label, str) or not label or label in labels:
                errors.append(f"{where}.label must be a unique non-empty string, got {label!r}")
            labels.add(label if isinstance(label, str) else "")
            lane = _int(w.get("lane", 0), f"{where}.lane", errors, 0, 31)
            warp = w.get("warp")
            thread = w.get("thread")
            if warp is None and thread is None:
                errors.append(f"{where} needs a warp and/or a thread")
                continue
            if warp is not None:
                warp = _int(warp, f"{where}.warp", errors)
            if thread is not None:
                thread = _int(thread, f"{where}.thread", errors)
            if warp is not None and lane is not None:
                from_warp = warp * 32 + lane
                if thread is not None and thread != from_warp:
                    errors.append(f"{where}: thread {thread} != warp*32+lane {from_warp}")
                thread = from_warp
            if thread is None:
                continue
            if threads is not None and thread >= threads:
                errors.append(f"{where}: thread {thread} lies outside the block ({threads} threads)")
            group = w.get("group")
            writers.append(Writer(i, label, thread, warp, lane if lane is not None else 0,
                                  group if isinstance(group, str) else None))
        seen_threads = [w.thread for w in writers]
        if len(set(seen_threads)) != len(seen_threads):
            errors.append("two writers name the same thread")
    if errors:
        raise SpecError(errors)
    return Manifest(grid, block, launch_id, rpo, tuple(writers), obj)


def parse_dictionary(obj) -> Dictionary:
    errors: list[str] = []
    if not isinstance(obj, dict):
        raise SpecError([f"event dictionary must be a JSON object, got {type(obj).__name__}"])
    if obj.get("schema") != EVENTS_SCHEMA:
        errors.append(f"event dictionary schema must be {EVENTS_SCHEMA!r}, got {obj.get('schema')!r}")
    sites_obj = obj.get("sites")
    sites: list[Site] = []
    if not isinstance(sites_obj, list) or not sites_obj:
        errors.append("event dictionary needs a non-empty sites list")
        sites_obj = []
    ids: set[int] = set()
    names: set[str] = set()
    for i, s in enumerate(sites_obj):
        where = f"sites[{i}]"
        if not isinstance(s, dict):
            errors.append(f"{where} must be an object")
            continue
        sid = _int(s.get("site_id"), f"{where}.site_id", errors, 0, 0xFFFF)
        name = s.get("name")
        kind = s.get("kind", "any")
        if sid is not None and sid in ids:
            errors.append(f"{where}: duplicate site_id {sid}")
        if not isinstance(name, str) or not name or name in names:
            errors.append(f"{where}.name must be a unique non-empty string, got {name!r}")
        if kind not in SITE_KINDS:
            errors.append(f"{where}.kind must be one of {', '.join(SITE_KINDS)}, got {kind!r}")
        if sid is None or not isinstance(name, str) or kind not in SITE_KINDS:
            continue
        ids.add(sid)
        names.add(name)
        sites.append(Site(sid, name, kind, s))
    if errors:
        raise SpecError(errors)
    return Dictionary(tuple(sites), obj)


def load_json(path: str | Path):
    with open(path, "rb") as fh:
        return json.loads(fh.read())


def warp_writers_manifest(grid, block, launch_id: int, records_per_owner: int, warps=None,
                          producer: str | None = None) -> dict:
    """A manifest with lane 0 of each listed warp (default: every warp of the block) as
    writer; ``producer`` names a tool other than the device probe that made the buffer."""
    threads = int(block[0]) * int(block[1]) * int(block[2])
    warp_ids = list(range((threads + 31) // 32)) if warps is None else list(warps)
    extra = {} if producer is None else {"producer": producer}
    return {
        "schema": MANIFEST_SCHEMA,
        "backend": BACKEND,
        **extra,
        "grid": [int(v) for v in grid],
        "block": [int(v) for v in block],
        "launch_id": int(launch_id),
        "records_per_owner": int(records_per_owner),
        "owner_layout": {
            "kind": "cta_writers",
            "writers": [{"ordinal": i, "label": f"warp{w}", "warp": w, "lane": 0}
                        for i, w in enumerate(warp_ids)],
        },
    }
