#!/usr/bin/env python3
"""Decode throughput: vectorized ATREXLT1 decode vs a plain per-record struct.unpack loop.

Both read the same buffer in the same run: a capture shaped like the overhead sweep's
(every warp of 2 CTAs per SM writes one begin/end pair per main-loop iteration). The loop
baseline only unpacks each record and splits its tag (no checks), so the ratio understates
the vectorized decoder's advantage. Prints JSON; medians of --repeats runs.

    PYTHONPATH=. python3 benchmarks/timeline_decode.py [--owners 2112 --records-per-owner 512]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.timeline import abi  # noqa: E402
from console.timeline.decode import decode  # noqa: E402
from console.timeline.encode import encode  # noqa: E402
from console.timeline.manifest import EVENTS_SCHEMA, parse_dictionary, parse_manifest, warp_writers_manifest  # noqa: E402


def build(ctas: int, rpo: int) -> tuple[bytes, object, object]:
    manifest = parse_manifest(warp_writers_manifest((ctas, 1, 1), (256, 1, 1), 1, rpo))
    dictionary = parse_dictionary({"schema": EVENTS_SCHEMA, "sites": [{"site_id": 1, "name": "mainloop", "kind": "range"}]})
    owners = manifest.owner_count
    owner = np.repeat(np.arange(owners), rpo)
    seq = np.tile(np.arange(rpo), owners)
    rng = np.random.default_rng(0)
    start = 1_700_000_000_000_000_000 + rng.integers(0, 5_000, owners)
    ts = start[owner] + seq * 650 + rng.integers(0, 32, owner.size)
    ts = np.maximum.accumulate(ts.reshape(owners, rpo), axis=1).reshape(-1)
    raw = bytes(encode(manifest, owner, ts, np.ones_like(owner), seq % 2, seq // 2, (owner // 8) % 132))
    return raw, manifest, dictionary


def struct_loop(raw: bytes, capacity: int) -> int:
    unpack = abi.RECORD_STRUCT.unpack_from
    committed = 0
    for slot in range(capacity):
        ts, payload, tag = unpack(raw, abi.HEADER_BYTES + slot * abi.RECORD_BYTES)
        if tag >> 31:
            # Decode the fields as a reader would; the baseline only counts them.
            _site, _kind, _sm = tag & 0xFFFF, (tag >> 16) & 3, (tag >> 18) & 0x3FF
            committed += 1
    return committed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ctas", type=int, default=264)
    parser.add_argument("--records-per-owner", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default="-")
    args = parser.parse_args()
    raw, manifest, dictionary = build(args.ctas, args.records_per_owner)
    records = manifest.owner_count * manifest.records_per_owner
    decode(raw, manifest, dictionary)  # warm caches and numpy's first-call costs
    vec, loop = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        cap = decode(raw, manifest, dictionary)
        vec.append(time.perf_counter() - t)
        t = time.perf_counter()
        n = struct_loop(raw, records)
        loop.append(time.perf_counter() - t)
        assert n == cap.committed_records == records
    v, s = statistics.median(vec), statistics.median(loop)
    result = {
        "benchmark": "timeline_decode",
        "records": records,
        "buffer_bytes": len(raw),
        "repeats": args.repeats,
        "vectorized_seconds_median": v,
        "struct_loop_seconds_median": s,
        "vectorized_records_per_second": records / v,
        "struct_loop_records_per_second": records / s,
        "ratio": s / v,
        "goal": {"records_per_second": 20e6, "ratio": 20.0},
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.output == "-":
        print(text)
    else:
        Path(args.output).write_text(text + "\n")
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
