"""Trace export: deterministic Chrome JSON, and a Perfetto protobuf walked by a minimal reader."""

from __future__ import annotations

import gzip
import json

from console.timeline import export
from console.timeline.decode import decode
from timeline_support import parsed


def _capture():
    buf, man, dic = parsed("capture_ok")
    return decode(bytes(buf), man, dic)


def test_chrome_json_is_deterministic_and_exact():
    a = export.chrome_trace_bytes(_capture())
    b = export.chrome_trace_bytes(_capture())
    assert a == b
    doc = json.loads(gzip.decompress(a))
    assert doc["otherData"]["clock"] == "%globaltimer"
    events = doc["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "cta(1,1,0)/warp1.lane5" in names
    spans = [e for e in events if e["ph"] == "X"]
    origin = doc["otherData"]["globaltimer_origin_ns"]
    for e in spans[:50]:
        assert e["args"]["end_timestamp_ns"] - e["args"]["timestamp_ns"] == e["args"]["duration_ns"]
        assert round(e["ts"] * 1000) == e["args"]["timestamp_ns"] - origin
    assert min(e["ts"] for e in events if "ts" in e) == 0
    assert {e["ph"] for e in events} == {"M", "X", "i", "C"}
    # pid is SM+1 for every event of an owner
    assert all(e["pid"] >= 1 for e in events)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes) -> list[tuple[int, object]]:
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value = data[pos:pos + size]
            pos += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((field, value))
    return out


def test_perfetto_protobuf_walks_and_nests_per_track():
    cap = _capture()
    data = export.perfetto_trace_bytes(cap)
    assert data == export.perfetto_trace_bytes(_capture())
    descriptors, events = {}, []
    last_ts = 0
    for field, packet in _fields(data):
        assert field == 1
        p = dict(_fields(packet))
        assert p[10] == 1
        if 60 in p:
            d = dict(_fields(p[60]))
            descriptors[d[1]] = d
        else:
            te = dict(_fields(p[11]))
            assert p[8] >= last_ts
            last_ts = p[8]
            events.append((p[8], te))
    assert sum(1 for d in descriptors.values() if 3 in d) == len(set(cap.events["sm"]))
    assert sum(1 for d in descriptors.values() if 4 in d) == 18
    lanes = [d for d in descriptors.values() if 5 in d and 8 not in d]
    assert lanes, "partially overlapping 'carry' ranges need their own lane tracks"
    stacks: dict[int, list[int]] = {}
    begins = 0
    for ts, te in events:
        track = te[11]
        assert track in descriptors
        if te[9] == 1:
            begins += 1
            stacks.setdefault(track, []).append(ts)
        elif te[9] == 2:
            assert stacks[track], "slice end without begin on its track"
            stacks[track].pop()
    assert begins == len(cap.ranges["owner"])
    assert all(not s for s in stacks.values())
    assert sum(1 for _, te in events if te[9] == 4) == 18 * 6
    assert sum(1 for _, te in events if te[9] == 3) == 18


def test_assign_lanes_nests_or_separates():
    assert export.assign_lanes([0, 10, 20], [100, 50, 30]) == [0, 0, 0]
    assert export.assign_lanes([0, 10], [20, 30]) == [0, 1]
    assert export.assign_lanes([0, 10, 25], [20, 30, 40]) == [0, 1, 0]


def test_varint_round_trip():
    for value in (0, 1, 127, 128, 300, 2**35, 2**64 - 1):
        assert _varint(export.varint(value), 0)[0] == value
    assert _varint(export.varint(-1), 0)[0] == 2**64 - 1


def test_gpu_side_modules_need_only_stdlib_and_numpy():
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, 'skills/autonomous-gpu-kernel-timeline/backends');"
            "import console.timeline.tool, console.timeline.receipt, console.timeline.measure, "
            "console.timeline.export, cuda_backend.cupy_adapter;"
            "bad = {'orjson', 'textual', 'watchfiles', 'git', 'cupy'} & set(sys.modules); print(sorted(bad))")
    root = __import__("pathlib").Path(__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
