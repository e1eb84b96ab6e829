"""IKeT route: normalize one ``run-iket`` run into the canonical ATREXLT1 capture.

The decoded IKeT trace (``*.trace.json``: ``stringTable``, ``locationTable`` of
``{ctaId, smId, warpId, ...}``, ``launches[{kernelName, grid/block dims, gridId, ranges, markers}]``)
is checked and rewritten as an ATREXLT1 buffer with one owner per warp (lane 0 of each warp is
the writer), so decode, summary, Perfetto export, receipt and ``validate`` are the CUDA route's.
Checks, all reported together: the kernel regex selects exactly one launch (full match); every
location lies inside the launch's grid and block and names an SM below 1024; a warp stays on one
SM; a range keeps one CTA/warp/SM and never ends before it starts; no zero timestamp; every
dictionary site is observed with its declared kind and no undeclared name appears; the kernel's
binary (its CUBIN) is identified through IKeT's tracker records. The receipt's ``source`` names
the capture record, decoded trace, Perfetto trace and tracker record with their SHA-256, and
``validate`` re-hashes them and re-normalizes the trace byte for byte.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from console.formats.bounded_read import read_regular_file
from console.formats.plainjson import atomic_write_bytes

from .capture_view import MAX_RAW_BYTES
from .encode import encode
from .files import json_bytes, sha256_file
from .iket_capture import CAPTURE_NAME, CAPTURE_SCHEMA, PROFILER_DIR
from .manifest import load_json, parse_dictionary, parse_manifest, warp_writers_manifest

RAW_NAME = "iket.atrexlt1.bin"
MANIFEST_NAME = "manifest.json"
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


def select_launch(traces: list[Path], kernel_regex: str, ordinal: int | None) -> tuple[Path, dict, dict, int]:
    """(trace path, trace, launch, launch ordinal among the matches) for a full-match regex."""
    try:
        pattern = re.compile(kernel_regex)
    except re.error as exc:
        raise IketExportError([f"kernel regex {kernel_regex!r}: {exc}"]) from None
    matches, seen = [], []
    for path in traces:
        trace = load_json(path)
        launches = trace.get("launches") if isinstance(trace, dict) else None
        if not isinstance(launches, list):
            raise IketExportError([f"{path.name}: no launches list"])
        for launch in launches:
            name = launch.get("kernelName") if isinstance(launch, dict) else None
            seen.append(str(name))
            if isinstance(name, str) and pattern.fullmatch(name):
                matches.append((path, trace, launch))
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
    path, trace, launch = matches[ordinal]
    return path, trace, launch, ordinal


def _dims(launch: dict, prefix: str) -> tuple[int, int, int]:
    values = tuple(launch.get(f"{prefix}{axis}") for axis in "XYZ")
    if not all(isinstance(v, int) and v > 0 for v in values):
        raise IketExportError([f"launch {prefix} is not three positive integers: {values}"])
    return values


def normalize(trace: dict, launch: dict, dictionary_obj: dict) -> tuple[dict, dict]:
    """(manifest object, event columns) of one launch; raise listing every problem."""
    dictionary = parse_dictionary(dictionary_obj)
    grid, block = _dims(launch, "gridDim"), _dims(launch, "blockDim")
    warps = (block[0] * block[1] * block[2] + 31) // 32
    strings = trace.get("stringTable") or []
    locations = trace.get("locationTable") or []
    sites = {s.name: s for s in dictionary.sites}
    problems: list[str] = []
    owner_sm: dict[int, int] = {}
    rows: list[tuple[int, int, int, int, int]] = []  # owner, timestamp, site, kind, sm
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
        return owner, sm, (tuple(cta), warp, sm)

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

    ranges = sorted(launch.get("ranges") or [], key=lambda r: (r.get("startTs") or 0, r.get("endTs") or 0))
    for n, rng in enumerate(ranges):
        name = name_of(rng.get("rangeNameIdx"), f"range #{n}")
        what = f"range #{n} {name!r}"
        if RANGE_TYPES.get(rng.get("rangeType")) is None:
            problem(f"{what}: range type {rng.get('rangeType')!r} has no single begin/end")
            continue
        idxs = rng.get("warpLocIdxs") or []
        places = [locate(i, what) for i in idxs]
        start, end = timestamp(rng.get("startTs"), what), timestamp(rng.get("endTs"), what)
        if not places or any(p is None for p in places) or name is None or start is None or end is None:
            if not places:
                problem(f"{what}: no location")
            continue
        if len({p[2] for p in places}) != 1:
            problem(f"{what}: spans several CTA/warp/SM locations {sorted({p[2] for p in places})}")
            continue
        if end < start:
            problem(f"{what}: ends at {end} before it starts at {start}")
            continue
        observed.setdefault(name, set()).add("range")
        if name in sites:
            owner, sm, _ = places[0]
            rows.append((owner, start, sites[name].site_id, KIND_BEGIN, sm))
            rows.append((owner, end, sites[name].site_id, KIND_END, sm))
    for n, marker in enumerate(launch.get("markers") or []):
        name = name_of(marker.get("markerNameIdx"), f"marker #{n}")
        what = f"marker #{n} {name!r}"
        place = locate(marker.get("locIdx"), what)
        ts = timestamp(marker.get("timestamp"), what)
        if name is None or place is None or ts is None:
            continue
        observed.setdefault(name, set()).add("instant")
        if name in sites:
            rows.append((place[0], ts, sites[name].site_id, KIND_INSTANT, place[1]))

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
    return manifest, events


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


def export_iket(*, run_dir: str, kernel_regex: str, dictionary: str, output_dir: str, launch: int | None = None,
                **receipt_args) -> dict:
    """Normalize, then write raw + manifest and hand over to the CUDA route's receipt writer."""
    from .receipt import write_capture

    run = Path(run_dir)
    record, traces = load_run(run)
    trace_path, trace, selected, ordinal = select_launch(traces, kernel_regex, launch)
    manifest_obj, events = normalize(trace, selected, load_json(dictionary))
    cubin, cubin_hash, tracker_path = binary_identity(run, selected["kernelName"])
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / RAW_NAME, raw_buffer(manifest_obj, events))
    atomic_write_bytes(out / MANIFEST_NAME, json_bytes(manifest_obj))
    pftraces = [run / item["path"] for item in record["outputs"]["pftrace"]]
    source = {
        "schema": SOURCE_SCHEMA,
        "kernel_regex": kernel_regex,
        "kernel_name": selected["kernelName"],
        "launch": ordinal,
        "grid_id": selected.get("gridId"),
        "cubin_hash": cubin_hash,
        "profiler": record["profiler"],
        "command": record["command"],
        "exit_code": record["exit_code"],
        "files": {name: {"path": _rel(path, out), "sha256": sha256_file(path)}
                  for name, path in (("capture", run / CAPTURE_NAME), ("trace_json", trace_path),
                                     ("pftrace", pftraces[0]), ("tracker", tracker_path))},
    }
    return write_capture(raw=str(out / RAW_NAME), manifest=str(out / MANIFEST_NAME), dictionary=dictionary,
                         binary=str(cubin), output_dir=output_dir, backend="iket", source=source, **receipt_args)


def validate_source(receipt: dict, base: Path, files: dict[str, Path]) -> list[str]:
    """Re-hash the IKeT inputs and re-normalize the decoded trace into the same raw buffer."""
    source = receipt.get("source")
    if not isinstance(source, dict) or source.get("schema") != SOURCE_SCHEMA:
        return [f"iket receipt has no {SOURCE_SCHEMA} source"]
    reasons = []
    paths = {}
    for name in ("capture", "trace_json", "pftrace", "tracker"):
        item = (source.get("files") or {}).get(name) or {}
        path = base / str(item.get("path"))
        if not path.is_file():
            reasons.append(f"iket {name} missing: {item.get('path')}")
        elif sha256_file(path) != item.get("sha256"):
            reasons.append(f"iket {name} sha256 mismatch: {item.get('path')}")
        else:
            paths[name] = path
    if reasons or "raw" not in files or "event_dictionary" not in files:
        return reasons
    try:
        trace_path, trace, selected, _ = select_launch([paths["trace_json"]], source.get("kernel_regex", ""),
                                                        source.get("launch"))
        manifest_obj, events = normalize(trace, selected, load_json(files["event_dictionary"]))
    except (IketExportError, ValueError) as exc:
        return [f"iket trace no longer normalizes: {exc}"]
    try:
        raw = read_regular_file(files["raw"], MAX_RAW_BYTES)
    except (OSError, ValueError) as exc:  # FormatError: no longer a regular file of bounded size
        return [f"raw unreadable: {exc}"]
    if raw_buffer(manifest_obj, events) != raw:
        reasons.append("raw buffer differs from the re-normalized IKeT trace")
    if "manifest" in files and load_json(files["manifest"]) != json.loads(json_bytes(manifest_obj)):
        reasons.append("manifest differs from the re-normalized IKeT trace")
    return reasons
