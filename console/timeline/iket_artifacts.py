"""The artifacts of an IKeT capture in AKA's schema and meaning, and AKA's checks of them.

AKA's receipt for an IKeT capture names, as ``raw``, the *native index* (every ``*.trace.json``
and ``*.pftrace`` run-iket wrote, with SHA-256 and size); as ``manifest``, the IKeT manifest
(the kernel regex, the matched launches, the native index and binary identity files); as
``binary``, the *binary identity* (the kernel's CUBIN with its SHA-256); as ``event_dictionary``
an IKeT event dictionary (names and kinds, no site ids); as ``trace`` a gzipped Chrome JSON
trace with one lane per (launch, location) and one event per marker or range; as ``summary``
counts and total range durations per event name. episcope writes exactly these, and keeps its
ATREXLT1 normalization of the same launch under the receipt's ``episcope`` key.

Paths inside the native index and binary identity are relative to the file that names them
(AKA writes absolute ones; neither tool reads them back, both re-hash what the receipt names).
"""

from __future__ import annotations

import gzip
import io
import json
import math
from collections import Counter

from .manifest import EVENTS_SCHEMA

IKET_EVENTS_SCHEMA = "atrex-autonomous-iket-events/v1"
IKET_MANIFEST_SCHEMA = "atrex-autonomous-iket-manifest/v1"
NATIVE_INDEX_SCHEMA = "atrex-autonomous-iket-native-index/v1"
BINARY_IDENTITY_SCHEMA = "atrex-autonomous-binary-identity/v1"
SUMMARY_SCHEMA = "atrex-autonomous-timeline-summary/v1"
TRACE_NAME = "trace.perfetto.json.gz"
SUMMARY_NAME = "trace.summary.json"
NATIVE_INDEX_NAME = "iket.native-index.json"
BINARY_IDENTITY_NAME = "binary.identity.json"
IKET_MANIFEST_NAME = "iket.manifest.json"
EVENTS_NAME = "iket.events.json"
MAX_NAME = 32  # IKeT's limit on a range or marker name
IKET_KINDS = ("any", "instant", "range")


def iket_event_problems(obj) -> list[str]:
    """Why ``obj`` is not an IKeT event dictionary as AKA reads one (empty when it is)."""
    if not isinstance(obj, dict) or obj.get("schema") != IKET_EVENTS_SCHEMA:
        return [f"IKeT event dictionary schema is not {IKET_EVENTS_SCHEMA}"]
    events = obj.get("events")
    if not isinstance(events, list) or not events:
        return ["IKeT dictionary events must be a non-empty list"]
    problems, names = [], set()
    for n, event in enumerate(events):
        name = event.get("name") if isinstance(event, dict) else None
        kind = event.get("kind", "any") if isinstance(event, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(f"events[{n}] has no name")
        elif len(name) > MAX_NAME:
            problems.append(f"IKeT event name exceeds {MAX_NAME} characters: {name!r}")
        elif name in names:
            problems.append(f"duplicate IKeT event name {name!r}")
        else:
            names.add(name)
        if kind not in IKET_KINDS:
            problems.append(f"events[{n}] kind {kind!r} is not one of {', '.join(IKET_KINDS)}")
    return problems


def iket_declared(obj) -> dict[str, str]:
    """name -> declared kind of a checked IKeT event dictionary."""
    return {event["name"]: event.get("kind", "any") for event in obj["events"]}


def events_from_sites(sites_obj: dict) -> dict:
    """The IKeT event dictionary of an ATREXLT1 one: the same names, kinds and notes in the
    same order, without the site ids an IKeT trace has no use for."""
    return {"schema": IKET_EVENTS_SCHEMA,
            "events": [{k: v for k, v in site.items() if k != "site_id"} for site in sites_obj["sites"]]}


def sites_from_events(events_obj: dict) -> dict:
    """The ATREXLT1 event dictionary of an IKeT one: site ids 1, 2, ... in declaration order."""
    return {"schema": EVENTS_SCHEMA,
            "sites": [{"site_id": n, **event} for n, event in enumerate(events_obj["events"], 1)]}


def launch_facts(launch_key: str, launch: dict) -> dict:
    """One entry of the manifest's and summary's ``launches``."""
    return {"launch_key": launch_key, "kernel": launch.get("kernelName"), "grid_id": launch.get("gridId"),
            "context_id": launch.get("contextId"), "grid": [launch.get(f"gridDim{a}") for a in "XYZ"],
            "block": [launch.get(f"blockDim{a}") for a in "XYZ"]}


def trace(canonical: list[dict]) -> dict:
    """AKA's Chrome JSON trace of canonical events: a lane per (launch, location) under the
    physical SM's process (pid = SM + 1), named after the lane's first event; times in µs
    from the earliest event, the exact nanoseconds in ``args``."""
    origin = min(event["timestamp_ns"] for event in canonical)
    first: dict[tuple[str, int], dict] = {}
    for event in canonical:
        first.setdefault((event["launch_key"], event["location_index"]), event)
    lanes = {key: n for n, key in enumerate(sorted(first), 1)}
    events = []
    for key, tid in lanes.items():
        event = first[key]
        cta = ",".join(str(c) for c in event["cta"])
        events.append({"name": "thread_name", "ph": "M", "pid": event["physical_sm"] + 1, "tid": tid,
                       "args": {"name": f"{event['kernel']}/cta({cta})/warp{event['warp']}"}})
    for event in canonical:
        args = {"backend": "iket", "launch_key": event["launch_key"], "kernel": event["kernel"],
                "grid_id": event["grid_id"], "cta": event["cta"], "warp": event["warp"],
                "physical_sm": event["physical_sm"], "timestamp_ns": event["timestamp_ns"]}
        item = {"name": event["name"], "pid": event["physical_sm"] + 1,
                "tid": lanes[(event["launch_key"], event["location_index"])],
                "ts": (event["timestamp_ns"] - origin) / 1000.0, "args": args}
        if event["kind"] == "range":
            item.update(ph="X", dur=event["duration_ns"] / 1000.0)
            args.update(end_timestamp_ns=event["end_timestamp_ns"], duration_ns=event["duration_ns"],
                        range_id=event["range_id"], range_scope=event["range_scope"])
        else:
            item.update(ph="i", s="t")
            args.update(payload_type=event["payload_type"], payload=event["payload"])
        events.append(item)
    return {"displayTimeUnit": "ns",
            "otherData": {"backend": "iket", "clock": "IKeT device timestamp", "origin_ns": origin},
            "traceEvents": events}


def trace_bytes(trace_obj: dict) -> bytes:
    """Sorted-key compact JSON, gzipped without a name or time stamp (AKA's bytes for the same trace)."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(json.dumps(trace_obj, separators=(",", ":"), sort_keys=True).encode())
    return out.getvalue()


def summary(canonical: list[dict], launches: list[dict]) -> dict:
    """AKA's IKeT trace summary: a range counts once, physical SMs as the sorted list of ids."""
    durations: Counter[str] = Counter()
    for event in canonical:
        if event["kind"] == "range":
            durations[event["name"]] += event["duration_ns"]
    counts = Counter(event["name"] for event in canonical)
    return {"schema": SUMMARY_SCHEMA, "backend": "iket", "matched_launches": len(launches),
            "canonical_events": len(canonical),
            "ranges": sum(event["kind"] == "range" for event in canonical),
            "instants": sum(event["kind"] == "instant" for event in canonical),
            "physical_sms": sorted({event["physical_sm"] for event in canonical}),
            "event_count": dict(sorted(counts.items())),
            "event_total_duration_ns": dict(sorted(durations.items())), "launches": launches}


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def product_problems(trace_obj, summary_obj, manifest_obj, declared: dict[str, str]) -> list[str]:
    """What AKA's ``validate`` checks of an IKeT receipt's trace and summary, for a receipt
    either tool wrote: every event declared and of its declared kind, every declared name
    present, display times that follow from the nanoseconds, lanes with metadata, and the
    summary recomputed from the trace and the manifest's launches."""
    if not isinstance(trace_obj, dict) or not isinstance(trace_obj.get("traceEvents"), list):
        return ["IKeT trace has no traceEvents list"]
    other = trace_obj.get("otherData")
    origin = other.get("origin_ns") if isinstance(other, dict) else None
    if type(origin) is not int or origin <= 0:
        return ["IKeT trace has no valid origin_ns"]
    problems: list[str] = []
    counts: Counter[str] = Counter()
    durations: Counter[str] = Counter()
    sms, lanes, named_lanes = set(), set(), set()
    ranges = instants = 0
    for n, event in enumerate(trace_obj["traceEvents"]):
        if len(problems) >= 20:
            break
        if not isinstance(event, dict):
            problems.append(f"IKeT trace event {n} is not an object")
            continue
        pid, tid, phase = event.get("pid"), event.get("tid"), event.get("ph")
        if not (type(pid) is int and pid > 0 and type(tid) is int and tid >= 0):
            problems.append(f"IKeT trace event {n} has an invalid pid/tid")
            continue
        if phase == "M":
            if event.get("name") != "thread_name":
                problems.append(f"IKeT trace event {n} is metadata other than thread_name")
            named_lanes.add((pid, tid))
            continue
        name, args = event.get("name"), event.get("args")
        if phase not in ("X", "i") or name not in declared or not isinstance(args, dict):
            problems.append(f"IKeT trace event {n} has an invalid phase, an undeclared name or no args")
            continue
        ts_ns, sm = args.get("timestamp_ns"), args.get("physical_sm")
        if type(ts_ns) is not int or ts_ns < origin or type(sm) is not int or sm < 0 or pid != sm + 1:
            problems.append(f"IKeT trace event {n} has an invalid timestamp or physical SM")
            continue
        if not (_finite(event.get("ts")) and math.isclose(event["ts"] * 1000.0, ts_ns - origin, abs_tol=1e-9)):
            problems.append(f"IKeT trace event {n} display time does not follow from timestamp_ns")
        if declared[name] not in ("any", "range" if phase == "X" else "instant"):
            problems.append(f"IKeT trace event {name!r} kind differs from the dictionary")
        counts[name] += 1
        sms.add(sm)
        lanes.add((pid, tid))
        if phase == "X":
            ranges += 1
            duration, end = args.get("duration_ns"), args.get("end_timestamp_ns")
            if not (type(duration) is int and duration >= 0 and type(end) is int and end == ts_ns + duration
                    and _finite(event.get("dur")) and math.isclose(event["dur"] * 1000.0, duration, abs_tol=1e-9)):
                problems.append(f"IKeT range {name!r} (event {n}) has an inconsistent duration or end")
                continue
            durations[name] += duration
        else:
            instants += 1
    if problems:
        return problems
    if not lanes <= named_lanes:
        problems.append("IKeT trace is missing lane metadata")
    if set(counts) != set(declared):
        problems.append("IKeT trace does not contain exactly the declared events")
    launches = manifest_obj.get("launches") if isinstance(manifest_obj, dict) else None
    if not isinstance(launches, list) or not launches:
        return problems + ["IKeT manifest has no launches"]
    expected = {"schema": SUMMARY_SCHEMA, "backend": "iket", "matched_launches": len(launches),
                "canonical_events": sum(counts.values()), "ranges": ranges, "instants": instants,
                "physical_sms": sorted(sms), "event_count": dict(sorted(counts.items())),
                "event_total_duration_ns": dict(sorted(durations.items())), "launches": launches}
    if summary_obj != expected:
        problems.append("IKeT trace summary is not reproducible from the trace")
    return problems
