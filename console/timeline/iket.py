"""IKeT route: normalize one ``run-iket`` run into AKA's IKeT artifacts and episcope's ATREXLT1 capture.

The decoded IKeT trace (``*.trace.json``: ``stringTable``, ``locationTable`` of
``{ctaId, smId, warpId, ...}``, ``launches`` and ``graphLaunches`` of ``{kernelName, grid/block
dims, gridId, ranges, markers}``) is checked, then written twice: as AKA's IKeT receipt and
products (``iket_artifacts``: native index, IKeT manifest, binary identity, trace, summary) and
as an ATREXLT1 buffer with one owner per warp (lane 0 of each warp is the writer), named under
the receipt's ``episcope.iket``, which the console decodes like a CUDA capture.
Checks, all reported together: the kernel regex selects one launch (full match; ``--launch``
picks one of several, and the IKeT manifest and summary list every match, as AKA's do); every
location lies inside the launch's grid and block and names an SM below 1024; a warp stays on one
SM; a range has a start and an end location on one CTA/warp/SM and never ends before it starts;
no zero timestamp; every dictionary event is observed with its declared kind and no undeclared
name appears; the kernel's binary (its CUBIN) is identified through IKeT's tracker records.
``validate_iket`` checks an IKeT receipt of either tool as AKA does and, for episcope's, re-hashes
its inputs and normalizes the launch again.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path

import numpy as np

from console.formats.bounded_read import read_regular_file
from console.formats.plainjson import atomic_write_bytes

from . import abi
from . import iket_artifacts as artifacts
from .decode import Capture, CaptureRejected, decode
from .encode import encode
from .files import json_bytes, sha256_file
from .iket_capture import CAPTURE_NAME, CAPTURE_SCHEMA, PROFILER_DIR
from .manifest import load_json, parse_dictionary, parse_manifest, warp_writers_manifest

# episcope's ATREXLT1 normalization of the launch (named under the receipt's episcope key)
RAW_NAME = "iket.atrexlt1.bin"
MANIFEST_NAME = "iket.atrexlt1.manifest.json"
SITES_NAME = "iket.atrexlt1.events.json"
SOURCE_SCHEMA = "atrex-autonomous-timeline-iket-source/v1"
MAX_SM = 1 << 10  # the SM field of an ATREXLT1 tag is 10 bits
RANGE_TYPES = {1: "start_end", 2: "push_pop"}  # MULTI_EVENT ranges have no single begin/end pair
KIND_BEGIN, KIND_END, KIND_INSTANT = 0, 1, 2


class IketExportError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def load_run(run_dir: str | os.PathLike) -> tuple[dict, list[Path]]:
    """The accepted capture record of ``run_dir`` and its decoded traces, re-hashed against it."""
    run = Path(run_dir)
    record_path = run / CAPTURE_NAME
    if not record_path.is_file():
        raise IketExportError([f"{record_path}: missing (run the command through capture-iket first)"])
    record = load_json(record_path)
    problems = []
    if not isinstance(record, dict) or record.get("schema") != CAPTURE_SCHEMA:
        raise IketExportError([f"{record_path}: schema is not {CAPTURE_SCHEMA}"])
    if record.get("exit_code") != 0 or record.get("accepted") is not True:
        problems.append(f"{record_path}: capture was not accepted (exit code {record.get('exit_code')})")
    traces = []
    for kind in ("trace_json", "pftrace"):
        items = (record.get("outputs") or {}).get(kind) or []
        if not items:
            problems.append(f"{record_path}: no {kind} output recorded")
        for item in items:
            path = run / item["path"]
            if not path.is_file():
                problems.append(f"{item['path']}: missing")
            elif sha256_file(path) != item.get("sha256"):
                problems.append(f"{item['path']}: sha256 differs from the capture record")
            elif kind == "trace_json":
                traces.append(path)
    if problems:
        raise IketExportError(problems)
    return record, traces


def launches_of(path: Path, trace) -> list[tuple[str, dict]]:
    """Every launch of a decoded trace with AKA's key for it: ``<file>:<n>`` for a plain launch,
    ``<file>:graph:<graph>:<n>`` for one replayed from a CUDA graph."""
    launches = trace.get("launches") if isinstance(trace, dict) else None
    graphs = trace.get("graphLaunches", {}) if isinstance(trace, dict) else None
    if not isinstance(launches, list) or not isinstance(graphs, dict):
        raise IketExportError([f"{path.name}: no launches list or graphLaunches object"])
    keyed = [(f"{path.name}:{n}", launch) for n, launch in enumerate(launches)]
    for graph, entries in graphs.items():
        if not isinstance(entries, list):
            raise IketExportError([f"{path.name}: graphLaunches[{graph!r}] is not a list"])
        keyed += [(f"{path.name}:graph:{graph}:{n}", launch) for n, launch in enumerate(entries)]
    return keyed


def select_launch(traces: list[Path], kernel_regex: str,
                  ordinal: int | None) -> tuple[Path, dict, str, dict, int, list[dict]]:
    """(trace path, trace, launch key, launch, ordinal among the matches, AKA's facts of every
    matching launch) for a full-match regex."""
    try:
        pattern = re.compile(kernel_regex)
    except re.error as exc:
        raise IketExportError([f"kernel regex {kernel_regex!r}: {exc}"]) from None
    matches, seen = [], []
    for path in traces:
        trace = load_json(path)
        for key, launch in launches_of(path, trace):
            name = launch.get("kernelName") if isinstance(launch, dict) else None
            seen.append(str(name))
            if isinstance(name, str) and pattern.fullmatch(name):
                matches.append((path, trace, key, launch))
    if not matches:
        names = ", ".join(sorted(set(seen))) or "none"
        raise IketExportError([f"kernel regex {kernel_regex!r} matches no launch (kernels: {names})"])
    if ordinal is None:
        if len(matches) > 1:
            raise IketExportError([f"kernel regex {kernel_regex!r} matches {len(matches)} launches; "
                                   "pass --launch to pick one"])
        ordinal = 0
    if not 0 <= ordinal < len(matches):
        raise IketExportError([f"--launch {ordinal} out of range: {len(matches)} matching launches"])
    path, trace, key, launch = matches[ordinal]
    return path, trace, key, launch, ordinal, [artifacts.launch_facts(k, m) for _, _, k, m in matches]


def _dims(launch: dict, prefix: str) -> tuple[int, int, int]:
    values = tuple(launch.get(f"{prefix}{axis}") for axis in "XYZ")
    if not all(isinstance(v, int) and v > 0 for v in values):
        raise IketExportError([f"launch {prefix} is not three positive integers: {values}"])
    return values


def normalize(trace: dict, launch_key: str, launch: dict, dictionary_obj: dict) -> tuple[dict, dict, list[dict]]:
    """(ATREXLT1 manifest object, event columns, AKA's canonical events) of one launch; raise
    listing every problem. The canonical events are AKA's reading of the launch: one per
    marker and one per range (at its start location), in timestamp order, then location, then
    markers before ranges in the trace's own order."""
    dictionary = parse_dictionary(dictionary_obj)
    grid, block = _dims(launch, "gridDim"), _dims(launch, "blockDim")
    warps = (block[0] * block[1] * block[2] + 31) // 32
    strings = trace.get("stringTable") or []
    locations = trace.get("locationTable") or []
    sites = {s.name: s for s in dictionary.sites}
    problems: list[str] = []
    owner_sm: dict[int, int] = {}
    rows: list[tuple[int, int, int, int, int]] = []  # owner, timestamp, site, kind, sm
    canonical: list[tuple[tuple, dict]] = []  # (order key, event)
    common = {"launch_key": launch_key, "kernel": launch.get("kernelName"), "grid_id": launch.get("gridId")}
    observed: dict[str, set[str]] = {}

    def problem(text: str) -> None:
        if len(problems) < 50:
            problems.append(text)

    def locate(idx, what: str):
        if not isinstance(idx, int) or not 0 <= idx < len(locations):
            problem(f"{what}: location index {idx!r} outside the location table")
            return None
        loc = locations[idx]
        cta, sm, warp = loc.get("ctaId"), loc.get("smId"), loc.get("warpId")
        if not (isinstance(cta, list) and len(cta) == 3 and all(isinstance(c, int) for c in cta)
                and all(0 <= c < g for c, g in zip(cta, grid))):
            problem(f"{what}: CTA {cta} outside grid {list(grid)}")
            return None
        if not isinstance(warp, int) or not 0 <= warp < warps:
            problem(f"{what}: warp {warp} outside a block of {warps} warps")
            return None
        if not isinstance(sm, int) or not 0 <= sm < MAX_SM:
            problem(f"{what}: SM id {sm} not below {MAX_SM}")
            return None
        owner = ((cta[2] * grid[1] + cta[1]) * grid[0] + cta[0]) * warps + warp
        if owner_sm.setdefault(owner, sm) != sm:
            problem(f"{what}: warp {warp} of CTA {cta} moves from SM {owner_sm[owner]} to SM {sm}")
            return None
        return owner, sm, (tuple(cta), warp, sm), idx

    def name_of(idx, what: str):
        if not isinstance(idx, int) or not 0 <= idx < len(strings):
            problem(f"{what}: name index {idx!r} outside the string table")
            return None
        return strings[idx]

    def timestamp(value, what: str):
        if not isinstance(value, int) or value <= 0:
            problem(f"{what}: timestamp {value!r} is not a positive integer")
            return None
        return value

    ranges = sorted(enumerate(launch.get("ranges") or []),
                    key=lambda nr: (nr[1].get("startTs") or 0, nr[1].get("endTs") or 0))
    for n, rng in ranges:
        name = name_of(rng.get("rangeNameIdx"), f"range #{n}")
        what = f"range #{n} {name!r}"
        if RANGE_TYPES.get(rng.get("rangeType")) is None:
            problem(f"{what}: range type {rng.get('rangeType')!r} has no single begin/end")
            continue
        idxs = rng.get("warpLocIdxs")
        if not isinstance(idxs, list) or len(idxs) != 2:  # IKeT names a range's start and end location
            problem(f"{what}: warpLocIdxs {idxs!r} is not a start and an end location")
            continue
        places = [locate(i, what) for i in idxs]
        start, end = timestamp(rng.get("startTs"), what), timestamp(rng.get("endTs"), what)
        if any(p is None for p in places) or name is None or start is None or end is None:
            continue
        if len({p[2] for p in places}) != 1:
            problem(f"{what}: spans several CTA/warp/SM locations {sorted({p[2] for p in places})}")
            continue
        if end < start:
            problem(f"{what}: ends at {end} before it starts at {start}")
            continue
        observed.setdefault(name, set()).add("range")
        if name in sites:
            owner, sm, (cta, warp, _), loc = places[0]
            rows.append((owner, start, sites[name].site_id, KIND_BEGIN, sm))
            rows.append((owner, end, sites[name].site_id, KIND_END, sm))
            canonical.append(((start, loc, 1, n), dict(
                common, kind="range", name=name, location_index=loc, cta=list(cta), warp=warp, physical_sm=sm,
                timestamp_ns=start, end_timestamp_ns=end, duration_ns=end - start, range_id=rng.get("rangeId"),
                range_scope=rng.get("rangeScope"))))
    for n, marker in enumerate(launch.get("markers") or []):
        name = name_of(marker.get("markerNameIdx"), f"marker #{n}")
        what = f"marker #{n} {name!r}"
        place = locate(marker.get("locIdx"), what)
        ts = timestamp(marker.get("timestamp"), what)
        if name is None or place is None or ts is None:
            continue
        observed.setdefault(name, set()).add("instant")
        if name in sites:
            owner, sm, (cta, warp, _), loc = place
            rows.append((owner, ts, sites[name].site_id, KIND_INSTANT, sm))
            canonical.append(((ts, loc, 0, n), dict(
                common, kind="instant", name=name, location_index=loc, cta=list(cta), warp=warp, physical_sm=sm,
                timestamp_ns=ts, payload_type=marker.get("payloadType"), payload=marker.get("payloadVal"))))

    for name in sorted(set(observed) - set(sites)):
        problem(f"event {name!r} ({'/'.join(sorted(observed[name]))}) is not in the event dictionary")
    for site in dictionary.sites:
        kinds = observed.get(site.name, set())
        if not kinds:
            problem(f"declared event {site.name!r} ({site.kind}) was never observed")
        elif site.kind != "any" and kinds != {site.kind}:
            problem(f"declared event {site.name!r} is {site.kind} but was observed as {'/'.join(sorted(kinds))}")
    if not rows and not problems:
        problem("the selected launch holds no event")
    if problems:
        raise IketExportError(problems)

    columns = np.array(rows, dtype=np.int64)
    # stable: ranges were emitted in start order (begin, end), so a range that ends where the
    # next one of its site begins keeps its end first
    order = np.lexsort((columns[:, 1], columns[:, 0]))
    columns = columns[order]
    per_owner = np.bincount(columns[:, 0])
    manifest = warp_writers_manifest(grid, block, int(launch.get("gridId") or 0), int(per_owner.max()),
                                     producer="iket")
    events = {"owner": columns[:, 0], "timestamp_ns": columns[:, 1], "site": columns[:, 2],
              "kind": columns[:, 3], "sm": columns[:, 4]}
    canonical.sort(key=lambda item: item[0])
    return manifest, events, [event for _, event in canonical]


def raw_buffer(manifest_obj: dict, events: dict) -> bytes:
    manifest = parse_manifest(manifest_obj)
    n = events["owner"].size
    return bytes(encode(manifest, events["owner"], events["timestamp_ns"], events["site"], events["kind"],
                        np.zeros(n, np.uint32), events["sm"]))


def binary_identity(run_dir: Path, kernel_name: str) -> tuple[Path, str, Path]:
    """(CUBIN path, cubin hash, tracker.json path) of ``kernel_name`` from the tracker records."""
    found: dict[str, tuple[Path, Path]] = {}
    trackers = sorted((run_dir / PROFILER_DIR / "tracker").glob("*/tracker.json"))
    for tracker_path in trackers:
        tracker = load_json(tracker_path)
        images = {m.get("cubinHash"): tracker_path.parent / Path(str(m.get("image"))).name
                  for m in tracker.get("modules") or [] if isinstance(m, dict)}
        for launch in tracker.get("launches") or []:
            if isinstance(launch, dict) and launch.get("kernelName") == kernel_name:
                cubin_hash = launch.get("cubinHash")
                found[cubin_hash] = (images.get(cubin_hash), tracker_path)
    if not trackers:
        raise IketExportError([f"{run_dir}: no tracker records (capture with --keep)"])
    if len(found) != 1:
        raise IketExportError([f"tracker records name {len(found)} CUBINs for {kernel_name!r}; need exactly one"])
    (cubin_hash, (image, tracker_path)), = found.items()
    if image is None or not image.is_file():
        raise IketExportError([f"CUBIN {cubin_hash} of {kernel_name!r} is not kept beside {tracker_path}"])
    return image, cubin_hash, tracker_path


def read_dictionaries(path: str) -> tuple[dict, dict, bool]:
    """(IKeT event dictionary, ATREXLT1 event dictionary, whether the file is the IKeT one) from
    a file in either form; the other is derived (same names, kinds and order; site ids 1, 2, ...
    for an IKeT one)."""
    obj = load_json(path)
    if isinstance(obj, dict) and obj.get("schema") == artifacts.IKET_EVENTS_SCHEMA:
        problems = artifacts.iket_event_problems(obj)
        if problems:
            raise IketExportError(problems)
        return obj, artifacts.sites_from_events(obj), True
    parse_dictionary(obj)  # an ATREXLT1 dictionary, or the reason it is neither
    iket = artifacts.events_from_sites(obj)
    problems = artifacts.iket_event_problems(iket)
    if problems:
        raise IketExportError([f"{path}: not usable for IKeT: {p}" for p in problems])
    return iket, obj, False


def _file_entry(path: Path, base: Path) -> dict:
    return {"path": _rel(path, base), "sha256": sha256_file(path), "size_bytes": path.stat().st_size}


def export_iket(*, run_dir: str, kernel_regex: str, dictionary: str, output_dir: str, launch: int | None = None,
                correctness: str | None = None, correctness_evidence: str | None = None, stage: str = "exploration",
                intervals: tuple[str, ...] = (), **evidence_args) -> dict:
    """Normalize one launch; write AKA's IKeT artifacts, episcope's ATREXLT1 buffer of the same
    launch, then the receipt (last)."""
    from .receipt import check_evidence, decode_files, episcope_facts, write_receipt

    run = Path(run_dir)
    out = Path(output_dir)
    record, traces = load_run(run)
    events_obj, sites_obj, given_iket = read_dictionaries(dictionary)
    trace_path, trace, launch_key, selected, ordinal, launches = select_launch(traces, kernel_regex, launch)
    manifest_obj, events, canonical = normalize(trace, launch_key, selected, sites_obj)
    cubin, cubin_hash, tracker_path = binary_identity(run, selected["kernelName"])
    evidence = check_evidence(binary=str(cubin), correctness=correctness, correctness_evidence=correctness_evidence,
                              stage=stage, output_dir=output_dir, inputs=(), **evidence_args)
    raw = raw_buffer(manifest_obj, events)
    capture = decode_files(raw, manifest_obj, sites_obj)  # the console's view of it, checked as CUDA's are
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in (RAW_NAME, MANIFEST_NAME, artifacts.TRACE_NAME, artifacts.SUMMARY_NAME,
                                           artifacts.NATIVE_INDEX_NAME, artifacts.BINARY_IDENTITY_NAME,
                                           artifacts.IKET_MANIFEST_NAME)}
    iket_dictionary = Path(dictionary) if given_iket else out / artifacts.EVENTS_NAME
    sites_dictionary = out / SITES_NAME if given_iket else Path(dictionary)
    if given_iket:
        atomic_write_bytes(sites_dictionary, json_bytes(sites_obj))
    else:
        atomic_write_bytes(iket_dictionary, json_bytes(events_obj))
    atomic_write_bytes(paths[RAW_NAME], raw)
    atomic_write_bytes(paths[MANIFEST_NAME], json_bytes(manifest_obj))
    atomic_write_bytes(paths[artifacts.TRACE_NAME], artifacts.trace_bytes(artifacts.trace(canonical)))
    atomic_write_bytes(paths[artifacts.SUMMARY_NAME], json_bytes(artifacts.summary(canonical, launches)))
    native = {kind: [_file_entry(run / item["path"], out) for item in record["outputs"][kind] if item["bytes"] > 0]
              for kind in ("trace_json", "pftrace")}
    atomic_write_bytes(paths[artifacts.NATIVE_INDEX_NAME],
                       json_bytes({"schema": artifacts.NATIVE_INDEX_SCHEMA, **native}))
    atomic_write_bytes(paths[artifacts.BINARY_IDENTITY_NAME],
                       json_bytes({"schema": artifacts.BINARY_IDENTITY_SCHEMA, "binaries": [_file_entry(cubin, out)]}))
    atomic_write_bytes(paths[artifacts.IKET_MANIFEST_NAME], json_bytes({
        "schema": artifacts.IKET_MANIFEST_SCHEMA, "backend": "iket", "kernel_regex": kernel_regex,
        "launches": launches, "native_index": artifacts.NATIVE_INDEX_NAME,
        "binary_identity": artifacts.BINARY_IDENTITY_NAME}))
    pftraces = [run / item["path"] for item in record["outputs"]["pftrace"]]
    facts = episcope_facts(correctness=correctness, correctness_evidence=correctness_evidence, out=out,
                           capture=capture, intervals=intervals, evidence=evidence)
    facts["iket"] = {
        "schema": SOURCE_SCHEMA,
        "kernel_regex": kernel_regex,
        "kernel_name": selected["kernelName"],
        "launch": ordinal,
        "launch_key": launch_key,
        "grid_id": selected.get("gridId"),
        "cubin_hash": cubin_hash,
        "profiler": record["profiler"],
        "command": record["command"],
        "exit_code": record["exit_code"],
        "files": {name: {"path": _rel(path, out), "sha256": sha256_file(path)}
                  for name, path in (("capture", run / CAPTURE_NAME), ("trace_json", trace_path),
                                     ("pftrace", pftraces[0]), ("tracker", tracker_path), ("cubin", cubin),
                                     ("raw", paths[RAW_NAME]), ("manifest", paths[MANIFEST_NAME]),
                                     ("event_dictionary", sites_dictionary))},
    }
    receipt_paths = {"clean_source": evidence_args["clean_source"],
                     "instrumented_source": evidence_args["instrumented_source"],
                     "binary": str(paths[artifacts.BINARY_IDENTITY_NAME]),
                     "raw": str(paths[artifacts.NATIVE_INDEX_NAME]),
                     "manifest": str(paths[artifacts.IKET_MANIFEST_NAME]), "event_dictionary": str(iket_dictionary),
                     "trace": str(paths[artifacts.TRACE_NAME]), "summary": str(paths[artifacts.SUMMARY_NAME])}
    return write_receipt(out, backend="iket", stage=stage, paths=receipt_paths,
                         workload_identity=evidence_args["workload_identity"], evidence=evidence,
                         low_overhead_target=evidence_args.get("low_overhead_target", 10.0), episcope=facts)


def _gunzip_json(path: Path, limit: int):
    """The gzipped JSON document at ``path``, inflating at most ``limit`` bytes (a forged
    trace cannot inflate without bound); None when it is not one."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        data = inflater.decompress(read_regular_file(path, limit), limit)
        if inflater.unconsumed_tail:
            return None
        return json.loads(data)
    except (OSError, ValueError, zlib.error):  # FormatError and JSONDecodeError are ValueErrors
        return None


def _json_or_none(path: Path):
    try:
        return load_json(path)
    except (OSError, ValueError):
        return None


def validate_iket(receipt: dict, base: Path, files: dict[str, Path]) -> tuple[list[str], Capture | None]:
    """Every reason an IKeT receipt (episcope's or AKA's) does not hold up, and the ATREXLT1
    capture episcope normalized from it (None for a receipt without episcope's key).

    AKA's checks first: the IKeT manifest, event dictionary, trace and summary agree with each
    other. With episcope's key, its inputs are re-hashed and the launch is normalized again:
    the trace, summary, manifest, native index, binary identity and ATREXLT1 buffer must be
    the ones that gives."""
    needed = ("raw", "manifest", "event_dictionary", "trace", "summary")
    if not all(name in files for name in needed):
        return [], None
    manifest, index, dictionary, summary = (_json_or_none(files[n])
                                            for n in ("manifest", "raw", "event_dictionary", "summary"))
    trace_obj = _gunzip_json(files["trace"], abi.MAX_RAW_BYTES)
    reasons = []
    if not isinstance(manifest, dict) or manifest.get("schema") != artifacts.IKET_MANIFEST_SCHEMA:
        reasons.append(f"IKeT manifest schema is not {artifacts.IKET_MANIFEST_SCHEMA}")
    elif manifest.get("backend") != receipt.get("backend"):
        reasons.append("receipt and manifest backend differ")
    if not isinstance(index, dict) or index.get("schema") != artifacts.NATIVE_INDEX_SCHEMA:
        reasons.append(f"raw is not an IKeT native index ({artifacts.NATIVE_INDEX_SCHEMA})")
    if "binary" in files:
        identity = _json_or_none(files["binary"])
        if not isinstance(identity, dict) or identity.get("schema") != artifacts.BINARY_IDENTITY_SCHEMA:
            reasons.append(f"binary is not a binary identity ({artifacts.BINARY_IDENTITY_SCHEMA})")
    problems = artifacts.iket_event_problems(dictionary)
    if problems:
        return reasons + problems, None
    if trace_obj is None:
        return reasons + ["IKeT trace is not gzipped JSON"], None
    reasons += artifacts.product_problems(trace_obj, summary, manifest, artifacts.iket_declared(dictionary))
    extras = receipt.get("episcope")
    source = extras.get("iket") if isinstance(extras, dict) else None
    if source is None:  # a receipt AKA wrote; episcope's own always carry the record
        return reasons + (["episcope key has no iket record"] if isinstance(extras, dict) else []), None
    if reasons:
        return reasons, None
    return _check_normalization(receipt, source, base, files, dictionary, trace_obj, summary, manifest, index)


def _indexed_traces(index: dict, base: Path) -> tuple[list[Path], list[str]]:
    """The run's decoded traces as the native index lists them (every one, since the manifest
    lists the matching launches of all of them), each re-hashed; or the reasons they cannot be."""
    traces, reasons = [], []
    for entry in index.get("trace_json") or []:
        path = base / str(entry.get("path")) if isinstance(entry, dict) else None
        if path is None or not path.is_file():
            reasons.append(f"native index trace missing: {entry.get('path') if isinstance(entry, dict) else entry}")
        elif sha256_file(path) != entry.get("sha256"):
            reasons.append(f"native index trace sha256 mismatch: {entry.get('path')}")
        else:
            traces.append(path)
    return traces, reasons


def _check_normalization(receipt, source, base, files, dictionary, trace_obj, summary, manifest, index):
    if not isinstance(source, dict) or source.get("schema") != SOURCE_SCHEMA:
        return [f"episcope iket is not a {SOURCE_SCHEMA} record"], None
    reasons = []
    paths = {}
    for name in ("capture", "trace_json", "pftrace", "tracker", "cubin", "raw", "manifest", "event_dictionary"):
        item = (source.get("files") or {}).get(name) or {}
        path = base / str(item.get("path"))
        if not path.is_file():
            reasons.append(f"iket {name} missing: {item.get('path')}")
        elif sha256_file(path) != item.get("sha256"):
            reasons.append(f"iket {name} sha256 mismatch: {item.get('path')}")
        else:
            paths[name] = path
    if reasons:
        return reasons, None
    sites_obj = load_json(paths["event_dictionary"])
    if sites_obj != artifacts.sites_from_events(dictionary) and artifacts.events_from_sites(sites_obj) != dictionary:
        reasons.append("episcope's ATREXLT1 event dictionary is not the receipt's IKeT one")
    traces, reasons = _indexed_traces(index, base)
    if reasons:
        return reasons, None
    try:
        _, trace, key, selected, _, launches = select_launch(traces, source.get("kernel_regex", ""),
                                                             source.get("launch"))
        manifest_obj, events, canonical = normalize(trace, key, selected, sites_obj)
        raw = read_regular_file(paths["raw"], abi.MAX_RAW_BYTES)
    except (IketExportError, OSError, ValueError) as exc:  # FormatError: no longer a bounded regular file
        return reasons + [f"iket trace no longer normalizes: {exc}"], None
    if trace_obj != artifacts.trace(canonical):
        reasons.append("IKeT trace differs from the re-normalized launch")
    if summary != artifacts.summary(canonical, launches):
        reasons.append("IKeT summary differs from the re-normalized launch")
    if manifest.get("launches") != launches or manifest.get("kernel_regex") != source.get("kernel_regex"):
        reasons.append("IKeT manifest differs from the re-normalized launch")
    for kind in ("trace_json", "pftrace"):
        hashes = {entry.get("sha256") for entry in index.get(kind) or [] if isinstance(entry, dict)}
        if source["files"][kind]["sha256"] not in hashes:
            reasons.append(f"native index does not list the normalized {kind}")
    identity = _json_or_none(files["binary"]) if "binary" in files else None
    binaries = identity.get("binaries") if isinstance(identity, dict) else None
    if not (isinstance(binaries, list) and [b.get("sha256") for b in binaries if isinstance(b, dict)]
            == [source["files"]["cubin"]["sha256"]]):
        reasons.append("binary identity does not name the kernel's CUBIN")
    if raw_buffer(manifest_obj, events) != raw:
        reasons.append("raw buffer differs from the re-normalized IKeT trace")
    if load_json(paths["manifest"]) != json.loads(json_bytes(manifest_obj)):
        reasons.append("manifest differs from the re-normalized IKeT trace")
    if reasons:
        return reasons, None
    try:
        return [], decode(raw, parse_manifest(manifest_obj), parse_dictionary(sites_obj))
    except CaptureRejected as exc:
        return [f"episcope's ATREXLT1 buffer rejected: {exc}"], None
