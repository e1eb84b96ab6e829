"""One timeline capture ready to draw, and its Perfetto export: pure functions, no screen.

The console's timeline screen runs these in a worker thread (decoding a capture of many
thousand events, or writing its trace, takes far longer than a frame) and draws only what
they return. The receipt names its raw buffer, manifest and event dictionary relative to
itself; the capture is decoded again by the decoder ``validate`` uses, so what the screen
shows is what the buffer says, not what a summary claimed. Every file is read through
``read_regular_file``: a receipt that names a FIFO or ``/dev/zero`` is refused, not waited on.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from console.formats.bounded_read import read_regular_file
from console.formats.plainjson import atomic_write_bytes
from console.formats.problems import FormatError

from .decode import Capture, CaptureRejected, decode
from .manifest import SpecError, parse_dictionary, parse_manifest

MAX_RAW_BYTES = 1 << 30  # a raw buffer larger than this is not a capture episcope wrote


class TimelineLoadError(Exception):
    """The receipt or its capture cannot be shown (the message lists every problem)."""


@dataclass(frozen=True, slots=True)
class SiteRow:
    """One probe site's intervals, in µs (None: the site closed no range)."""

    site_id: int
    name: str
    kind: str
    events: int
    ranges: int
    total_us: float | None
    median_us: float | None
    min_us: float | None
    max_us: float | None


@dataclass(frozen=True, slots=True)
class Lane:
    """One owner (CTA / writer) on one SM: its ranges and instants in ns since ``t0``."""

    sm: int
    owner: int
    name: str
    ranges: tuple[tuple[int, int, int], ...]  # (site id, begin, end)
    instants: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CaptureView:
    receipt_path: str
    sites: tuple[tuple[int, str], ...]  # (site id, name), dictionary order
    lanes: tuple[Lane, ...]  # by SM, then owner
    span_ns: int
    site_rows: tuple[SiteRow, ...]
    grid: tuple[int, ...]
    block: tuple[int, ...]
    launch_id: int
    event_count: int
    range_count: int
    capture: Capture  # what the export writes


def load_capture(receipt_path: str | os.PathLike[str]) -> Capture:
    """The decoded capture a receipt names; :class:`TimelineLoadError` says why not."""
    receipt_path = Path(receipt_path)
    try:
        receipt = json.loads(read_regular_file(receipt_path))
    except (OSError, ValueError) as exc:  # FormatError is a ValueError
        raise TimelineLoadError(f"{receipt_path}: {exc}") from None
    if not isinstance(receipt, dict):
        raise TimelineLoadError(f"{receipt_path}: not a JSON object")
    base = receipt_path.parent
    # an IKeT receipt names AKA's IKeT files; the buffer episcope normalized is under episcope.iket
    extras = receipt.get("episcope")
    names = receipt
    if receipt.get("backend") == "iket":
        iket = extras.get("iket") if isinstance(extras, dict) else None
        names = iket.get("files") if isinstance(iket, dict) else None
        if not isinstance(names, dict):
            raise TimelineLoadError(f"{receipt_path}: IKeT receipt without episcope's ATREXLT1 buffer "
                                    "(written by another tool); open its trace in Perfetto")

    def named(key: str) -> Path:
        value = names.get(key)
        if isinstance(value, dict):
            value = value.get("path")
        if not isinstance(value, str):
            raise TimelineLoadError(f"{receipt_path}: receipt names no {key}")
        return base / value

    try:
        raw = read_regular_file(named("raw"), MAX_RAW_BYTES)
        manifest = parse_manifest(json.loads(read_regular_file(named("manifest"))))
        dictionary = parse_dictionary(json.loads(read_regular_file(named("event_dictionary"))))
    except (OSError, ValueError, FormatError, SpecError) as exc:
        raise TimelineLoadError(f"{receipt_path}: {exc}") from None
    try:
        return decode(raw, manifest, dictionary)
    except CaptureRejected as exc:
        raise TimelineLoadError("capture rejected: " + "; ".join(str(p) for p in exc.problems)) from None


def site_rows(capture: Capture) -> tuple[SiteRow, ...]:
    ev, rg = capture.events, capture.ranges
    durations = (rg["end_ns"].astype(np.int64) - rg["begin_ns"].astype(np.int64)) if rg["owner"].size else np.zeros(0, np.int64)
    rows = []
    for site in capture.dictionary.sites:
        count = int(np.count_nonzero(ev["site"] == site.site_id))
        mine = durations[rg["site"] == site.site_id] if durations.size else durations
        stats: tuple[float | None, ...] = (None,) * 4
        if mine.size:
            stats = (float(mine.sum()) / 1e3, float(np.median(mine)) / 1e3, float(mine.min()) / 1e3, float(mine.max()) / 1e3)
        rows.append(SiteRow(site.site_id, site.name, site.kind, count, int(mine.size), *stats))
    return tuple(rows)


def lanes(capture: Capture) -> tuple[tuple[Lane, ...], int]:
    """Every owner's lane (by SM, then owner) and the capture's span in ns."""
    ev, rg = capture.events, capture.ranges
    owners, first = np.unique(ev["owner"], return_index=True)
    sms = ev["sm"][first]
    t0 = int(ev["timestamp_ns"].min())
    span = int(ev["timestamp_ns"].max()) - t0
    ranges: dict[int, list[tuple[int, int, int]]] = {}
    for owner, site, begin, end in zip(rg["owner"].tolist(), rg["site"].tolist(), rg["begin_ns"].tolist(),
                                       rg["end_ns"].tolist()):
        ranges.setdefault(owner, []).append((site, begin - t0, end - t0))
    instants: dict[int, list[int]] = {}
    for i in np.flatnonzero(ev["kind"] >= 2).tolist():
        instants.setdefault(int(ev["owner"][i]), []).append(int(ev["timestamp_ns"][i]) - t0)
    out = []
    for i in np.lexsort((owners, sms)):
        owner = int(owners[i])
        out.append(Lane(int(sms[i]), owner, capture.manifest.owner_name(owner), tuple(ranges.get(owner, ())),
                        tuple(instants.get(owner, ()))))
    return tuple(out), span


def capture_view(receipt_path: str | os.PathLike[str]) -> CaptureView:
    """Load, decode and lay out the capture a receipt names (slow: run it off the UI thread)."""
    capture = load_capture(receipt_path)
    owner_lanes, span = lanes(capture)
    header = capture.header
    return CaptureView(
        receipt_path=str(receipt_path),
        sites=tuple((site.site_id, site.name) for site in capture.dictionary.sites),
        lanes=owner_lanes,
        span_ns=span,
        site_rows=site_rows(capture),
        grid=tuple(header.grid),
        block=tuple(header.block),
        launch_id=header.launch_id,
        event_count=capture.event_count,
        range_count=int(capture.ranges["owner"].size),
        capture=capture,
    )


def export_perfetto(capture: Capture, name: str, directory: Path) -> Path:
    """Write the capture's Perfetto trace into ``directory`` (whole or not at all)."""
    from .export import perfetto_trace_bytes

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "timeline"
    target = directory / f"{safe}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.perfetto-trace"
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, perfetto_trace_bytes(capture))
    return target
