"""Trace export: gzipped Chrome JSON in AKA's exact form (FORMATS §10) and a native Perfetto protobuf trace.

Both are deterministic: the same capture gives the same bytes (sorted events, sorted keys,
gzip without a timestamp or file name). The protobuf is written by hand (varints and
length-delimited fields) so the GPU machine needs no protobuf package; it puts ranges that
partially overlap on one owner on separate child tracks ("lanes"), which the JSON format
cannot express.
"""

from __future__ import annotations

import gzip
import io
import json

from . import abi
from .decode import Capture

JSON_TRACE_NAME = "trace.perfetto.json.gz"
PROTO_TRACE_NAME = "trace.perfetto.pb"


def _site_names(capture: Capture) -> dict[int, str]:
    return {s.site_id: s.name for s in capture.dictionary.sites}


def _owner_args(capture: Capture, owner: int, sm: int) -> dict:
    """Who wrote an event, under the trace arg names AKA's timeline tool uses."""
    writers = capture.manifest.writers
    cta_linear, ordinal = divmod(owner, len(writers))
    gx, gy, _ = capture.manifest.grid
    writer = writers[ordinal]
    args = {"cta": [cta_linear % gx, (cta_linear // gx) % gy, cta_linear // (gx * gy)], "cta_linear": cta_linear,
            "writer": writer.label, "writer_ordinal": ordinal,
            "warp": writer.warp if writer.warp is not None else writer.thread // 32, "physical_sm": sm}
    if writer.group is not None:
        args["group"] = writer.group
    return args


def _site_args(capture: Capture) -> dict[int, dict]:
    """The site id and the dictionary's own annotations of each site, as AKA's trace carries them."""
    out = {}
    for site in capture.dictionary.sites:
        extra = {key: site.raw[key] for key in ("boundary_semantics", "async_domain", "source_anchor")
                 if site.raw.get(key) is not None}
        out[site.site_id] = {"site_id": site.site_id, **extra}
    return out


def canonical_order(capture: Capture) -> list[tuple[bool, int]]:
    """(is_range, index) of every canonical event in AKA's trace order.

    AKA orders a range by its begin, a point by itself, on (timestamp, owner, sequence), where a
    range counts as sequence -1 (before any point of that owner and instant) and ranges that tie
    keep the order of their end records.
    """
    ev = capture.events
    rg = capture.ranges
    kind = ev["kind"]
    # when every record is half of a range there is no point to look for
    every_record_paired = 2 * len(rg["owner"]) == len(kind)
    point = [] if every_record_paired else [i for i, k in enumerate(kind) if k >= abi.KIND_INSTANT]
    ts, owner, sequence = ev["timestamp_ns"], ev["owner"], ev["sequence"]
    # (timestamp, owner, sequence, tie, is_range, index): the first four are unique, so the
    # last two only ride along
    order = [(b, o, -1, e, True, i) for i, (b, o, e) in enumerate(zip(rg["begin_ns"], rg["owner"], rg["end_event"]))]
    order += [(ts[i], owner[i], sequence[i], 0, False, i) for i in point]
    order.sort()
    return [(ranged, i) for *_, ranged, i in order]


def chrome_trace(capture: Capture) -> dict:
    """The Chrome JSON trace exactly as AKA's ``make_perfetto`` builds it, so AKA's ``validate``
    finds it reproducible: SM processes, one thread per owner named ``cta(x,y,z)/writer``
    (declared where the owner's first event appears), events in :func:`canonical_order`, args
    under AKA's names. Nesting depth and lanes are in the protobuf trace, not here."""
    ev = capture.events
    rg = capture.ranges
    names = _site_names(capture)
    t0 = min(ev["timestamp_ns"])
    owner_sm = capture.owner_sms()
    who = {owner: _owner_args(capture, owner, sm) for owner, sm in owner_sm.items()}
    where = _site_args(capture)
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": sm + 1, "tid": 0, "args": {"name": f"SM {sm}"}}
                          for sm in sorted(set(owner_sm.values()))]
    r_owner, r_site = rg["owner"], rg["site"]
    r_begin, r_end = rg["begin_ns"], rg["end_ns"]
    r_bpay, r_epay = rg["begin_payload"], rg["end_payload"]
    e_owner, e_site, e_ts = ev["owner"], ev["site"], ev["timestamp_ns"]
    e_kind, e_pay, e_seq = ev["kind"], ev["payload"], ev["sequence"]
    declared: set[int] = set()
    # the args every event of one site and owner share, merged once per pair, not per event
    shared: dict[tuple[int, int], dict] = {}
    for ranged, i in canonical_order(capture):
        owner = r_owner[i] if ranged else e_owner[i]
        pid, tid = owner_sm[owner] + 1, owner + 1
        if owner not in declared:
            declared.add(owner)
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": capture.manifest.owner_name(owner)}})
        site = r_site[i] if ranged else e_site[i]
        common = shared.get((site, owner))
        if common is None:
            common = shared[(site, owner)] = {**where[site], **who[owner]}
        if ranged:
            begin, end = r_begin[i], r_end[i]
            events.append({"name": names[site], "pid": pid, "tid": tid, "ts": (begin - t0) / 1000.0,
                           "args": {**common, "timestamp_ns": begin, "end_timestamp_ns": end,
                                    "duration_ns": end - begin, "begin_payload": r_bpay[i],
                                    "end_payload": r_epay[i]},
                           "ph": "X", "dur": (end - begin) / 1000.0})
            continue
        ts = e_ts[i]
        args = {**common, "timestamp_ns": ts}
        if e_kind[i] == abi.KIND_INSTANT:
            args.update(payload=e_pay[i], sequence=e_seq[i])
            events.append({"name": names[site], "pid": pid, "tid": tid, "ts": (ts - t0) / 1000.0, "args": args,
                           "ph": "i", "s": "t"})
        else:
            args.update(value=e_pay[i], sequence=e_seq[i])
            events.append({"name": names[site], "pid": pid, "tid": tid, "ts": (ts - t0) / 1000.0, "args": args,
                           "ph": "C"})
    return {"displayTimeUnit": "ns", "otherData": {"globaltimer_origin_ns": t0, "clock": "%globaltimer"},
            "traceEvents": events}


def chrome_trace_json(capture: Capture) -> str:
    """The trace as AKA writes its text: sorted keys, no spaces."""
    return json.dumps(chrome_trace(capture), sort_keys=True, separators=(",", ":"))


def chrome_trace_bytes(capture: Capture) -> bytes:
    out = io.BytesIO()
    # level 3: on a 540k-range trace (172 MB of text) 3.3x faster than level 6 for a file 25%
    # larger (19 MB, not 15); AKA's level 9 takes twice level 6. The text is what validate compares.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=3) as gz:
        gz.write(chrome_trace_json(capture).encode())
    return out.getvalue()


# --- protobuf wire format -------------------------------------------------------------

def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 fields carry negatives as ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def f_varint(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def f_bytes(field: int, data: bytes) -> bytes:
    return varint((field << 3) | 2) + varint(len(data)) + data


def f_string(field: int, text: str) -> bytes:
    return f_bytes(field, text.encode())


# Field numbers of Perfetto's trace protos used here.
TRACE_PACKET = 1
PKT_TIMESTAMP, PKT_SEQ_ID, PKT_TRACK_EVENT, PKT_SEQ_FLAGS, PKT_TRACK_DESCRIPTOR = 8, 10, 11, 13, 60
TD_UUID, TD_NAME, TD_PROCESS, TD_THREAD, TD_PARENT, TD_COUNTER = 1, 2, 3, 4, 5, 8
PD_PID, PD_NAME = 1, 6
THD_PID, THD_TID, THD_NAME = 1, 2, 5
TE_ANNOTATIONS, TE_TYPE, TE_TRACK, TE_NAME, TE_COUNTER_VALUE = 4, 9, 11, 23, 30
DA_UINT, DA_NAME = 3, 10
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
SEQ_ID = 1
SEQ_INCREMENTAL_STATE_CLEARED = 1


def process_uuid(sm: int) -> int:
    return (1 << 56) | sm


def lane_uuid(owner: int, lane: int) -> int:
    return (2 << 56) | (owner << 12) | lane


def counter_uuid(owner: int, site: int) -> int:
    return (3 << 56) | (owner << 16) | site


def _packet(body: bytes) -> bytes:
    return f_bytes(TRACE_PACKET, body)


def _annotation(name: str, value: int) -> bytes:
    return f_bytes(TE_ANNOTATIONS, f_string(DA_NAME, name) + f_varint(DA_UINT, value))


def assign_lanes(begins: list[int], ends: list[int]) -> list[int]:
    """Lane per range of one owner so that ranges on one lane nest or are disjoint.

    Ranges are visited by (begin, longest first); each goes on the first lane whose open
    ranges, after closing those that ended, would contain it.
    """
    order = sorted(range(len(begins)), key=lambda i: (begins[i], -ends[i], i))
    stacks: list[list[int]] = []
    lanes = [0] * len(begins)
    for i in order:
        b, e = begins[i], ends[i]
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= b and not (stack[-1] == b and e == b):
                stack.pop()
            if not stack or stack[-1] >= e:
                stack.append(e)
                lanes[i] = lane
                break
        else:
            stacks.append([e])
            lanes[i] = len(stacks) - 1
    return lanes


def perfetto_trace_bytes(capture: Capture) -> bytes:
    ev = capture.events
    rg = capture.ranges
    names = _site_names(capture)
    owner_sm = capture.owner_sms()
    descriptors: list[bytes] = []
    for sm in sorted(set(owner_sm.values())):
        proc = f_varint(PD_PID, sm + 1) + f_string(PD_NAME, f"SM {sm}")
        descriptors.append(f_varint(TD_UUID, process_uuid(sm)) + f_bytes(TD_PROCESS, proc))
    # (timestamp, track order, per-track sequence, packet body)
    events: list[tuple[int, int, int, bytes]] = []
    by_owner: dict[int, list[int]] = {}
    for i, o in enumerate(rg["owner"]):
        by_owner.setdefault(o, []).append(i)
    e_owner, e_site, e_kind, e_ts, e_pay = ev["owner"], ev["site"], ev["kind"], ev["timestamp_ns"], ev["payload"]
    point_by_owner: dict[int, list[int]] = {}
    for i, k in enumerate(e_kind):
        if k >= abi.KIND_INSTANT:
            point_by_owner.setdefault(e_owner[i], []).append(i)
    begin_ns, end_ns = rg["begin_ns"], rg["end_ns"]
    sites = rg["site"]
    pay = rg["begin_payload"]
    track_order = 0
    for owner in sorted(owner_sm):
        name = capture.manifest.owner_name(owner)
        thread = (f_varint(THD_PID, owner_sm[owner] + 1) + f_varint(THD_TID, owner + 1)
                  + f_string(THD_NAME, name))
        descriptors.append(f_varint(TD_UUID, lane_uuid(owner, 0)) + f_bytes(TD_THREAD, thread))
        idx = by_owner.get(owner, [])
        lanes = assign_lanes([begin_ns[i] for i in idx], [end_ns[i] for i in idx])
        for lane in range(1, max(lanes, default=0) + 1):
            descriptors.append(f_varint(TD_UUID, lane_uuid(owner, lane))
                               + f_varint(TD_PARENT, lane_uuid(owner, 0))
                               + f_string(TD_NAME, f"{name} lane {lane}"))
        for lane in range(max(lanes, default=-1) + 1):
            track_order += 1
            uuid = lane_uuid(owner, lane)
            mine = sorted((i for i, ln in zip(idx, lanes) if ln == lane),
                          key=lambda i: (begin_ns[i], -end_ns[i], i))
            stack: list[int] = []
            emitted: list[tuple[int, bytes]] = []
            end_body = f_varint(TE_TYPE, SLICE_END) + f_varint(TE_TRACK, uuid)
            for i in mine:
                # close what ended by this begin (a zero-length range stays open for its twin)
                while stack and end_ns[stack[-1]] <= begin_ns[i] and not (
                        end_ns[stack[-1]] == begin_ns[i] == end_ns[i]):
                    emitted.append((end_ns[stack.pop()], end_body))
                emitted.append((begin_ns[i], f_varint(TE_TYPE, SLICE_BEGIN) + f_varint(TE_TRACK, uuid)
                                + f_string(TE_NAME, names[sites[i]])
                                + _annotation("payload", pay[i]) + _annotation("site_id", sites[i])))
                stack.append(i)
            while stack:
                emitted.append((end_ns[stack.pop()], end_body))
            events.extend((ts, track_order, seq, body) for seq, (ts, body) in enumerate(emitted))
        counter_sites = set()
        for i in point_by_owner.get(owner, []):
            site = e_site[i]
            if e_kind[i] == abi.KIND_INSTANT:
                body = (f_varint(TE_TYPE, INSTANT) + f_varint(TE_TRACK, lane_uuid(owner, 0))
                        + f_string(TE_NAME, names[site]) + _annotation("payload", e_pay[i]))
            else:
                counter_sites.add(site)
                body = (f_varint(TE_TYPE, COUNTER) + f_varint(TE_TRACK, counter_uuid(owner, site))
                        + f_varint(TE_COUNTER_VALUE, e_pay[i]))
            events.append((e_ts[i], track_order + 1, i, body))
        track_order += 1
        for site in sorted(counter_sites):
            descriptors.append(f_varint(TD_UUID, counter_uuid(owner, site))
                               + f_varint(TD_PARENT, lane_uuid(owner, 0))
                               + f_string(TD_NAME, names[site]) + f_bytes(TD_COUNTER, b""))
    events.sort(key=lambda r: r[:3])
    out = bytearray()
    first = True
    for desc in descriptors:
        flags = f_varint(PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED) if first else b""
        first = False
        out += _packet(f_varint(PKT_SEQ_ID, SEQ_ID) + flags + f_bytes(PKT_TRACK_DESCRIPTOR, desc))
    for ts, _, _, body in events:
        out += _packet(f_varint(PKT_TIMESTAMP, ts) + f_varint(PKT_SEQ_ID, SEQ_ID)
                       + f_bytes(PKT_TRACK_EVENT, body))
    return bytes(out)
