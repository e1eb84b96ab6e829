"""One timeline capture ready to draw, and its Perfetto export: pure functions, no screen.

The console's timeline screen runs these in a worker thread (decoding a capture of many
thousand events, or writing its trace, takes far longer than a frame). It draws the owner
lanes from what they return (the capture itself, too large for the episode state); the
per-site statistics (``summary.site_statistics``) go into the state instead, where
``status --json`` and a replay read them too. The receipt names its raw buffer, manifest and event dictionary relative to
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

from console.formats.bounded_read import read_regular_file
from console.formats.plainjson import atomic_write_bytes
from console.formats.problems import FormatError

from . import abi
from .decode import Capture, CaptureRejected, decode
from .manifest import SpecError, parse_dictionary, parse_manifest


class TimelineLoadError(Exception):
    """The receipt or its capture cannot be shown (the message lists every problem)."""


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
    grid: tuple[int, ...]
    block: tuple[int, ...]
    launch_id: int
    event_count: int
    range_count: int
    capture: Capture  # what the export writes
    raw_sha256: str | None  # the raw buffer digest the receipt names (AKA's ``raw_sha256``)


def _load(receipt_path: Path) -> tuple[dict, Capture]:
    """The receipt as read, and the capture it names decoded."""
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
        raw = read_regular_file(named("raw"), abi.MAX_RAW_BYTES)
        manifest = parse_manifest(json.loads(read_regular_file(named("manifest"))))
        dictionary = parse_dictionary(json.loads(read_regular_file(named("event_dictionary"))))
    except (OSError, ValueError, FormatError, SpecError) as exc:
        raise TimelineLoadError(f"{receipt_path}: {exc}") from None
    try:
        return receipt, decode(raw, manifest, dictionary)
    except CaptureRejected as exc:
        raise TimelineLoadError("capture rejected: " + "; ".join(str(p) for p in exc.problems)) from None


def lanes(capture: Capture) -> tuple[tuple[Lane, ...], int]:
    """Every owner's lane (by SM, then owner) and the capture's span in ns."""
    ev, rg = capture.events, capture.ranges
    t0 = min(ev["timestamp_ns"])
    span = max(ev["timestamp_ns"]) - t0
    ranges: dict[int, list[tuple[int, int, int]]] = {}
    for owner, site, begin, end in zip(rg["owner"], rg["site"], rg["begin_ns"], rg["end_ns"]):
        ranges.setdefault(owner, []).append((site, begin - t0, end - t0))
    instants: dict[int, list[int]] = {}
    for owner, kind, ts in zip(ev["owner"], ev["kind"], ev["timestamp_ns"]):
        if kind >= abi.KIND_INSTANT:
            instants.setdefault(owner, []).append(ts - t0)
    out = []
    for sm, owner in sorted((sm, owner) for owner, sm in capture.owner_sms().items()):
        out.append(Lane(sm, owner, capture.manifest.owner_name(owner), tuple(ranges.get(owner, ())),
                        tuple(instants.get(owner, ()))))
    return tuple(out), span


def capture_view(receipt_path: str | os.PathLike[str]) -> CaptureView:
    """Load, decode and lay out the capture a receipt names (slow: run it off the UI thread)."""
    receipt, capture = _load(Path(receipt_path))
    owner_lanes, span = lanes(capture)
    header = capture.header
    return CaptureView(
        receipt_path=str(receipt_path),
        sites=tuple((site.site_id, site.name) for site in capture.dictionary.sites),
        lanes=owner_lanes,
        span_ns=span,
        grid=tuple(header.grid),
        block=tuple(header.block),
        launch_id=header.launch_id,
        event_count=capture.event_count,
        range_count=len(capture.ranges["owner"]),
        capture=capture,
        raw_sha256=receipt.get("raw_sha256") if isinstance(receipt.get("raw_sha256"), str) else None,
    )


def export_perfetto(capture: Capture, name: str, directory: Path) -> Path:
    """Write the capture's Perfetto trace into ``directory`` (whole or not at all)."""
    from .export import perfetto_trace_bytes

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "timeline"
    target = directory / f"{safe}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.perfetto-trace"
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, perfetto_trace_bytes(capture))
    return target
