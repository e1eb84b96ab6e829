"""Decoding real H200 captures, and the fail-closed corpus of mutated captures."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from console.timeline import abi
from console.timeline.decode import CaptureRejected, decode
from console.timeline.encode import encode
from console.timeline.manifest import SpecError, parse_dictionary, parse_manifest
from timeline_support import claims, load, parsed, records

GRID_OWNERS = 3 * 2 * 3
PER_WRITER = 7 * 6 + 1


def test_real_capture_decodes_every_kind():
    buf, man, dic = parsed("capture_ok")
    cap = decode(bytes(buf), man, dic)
    assert cap.committed_records == GRID_OWNERS * PER_WRITER
    ev = cap.events
    assert set(ev["kind"]) == {0, 1, 2, 3}
    assert len(cap.ranges["owner"]) == GRID_OWNERS * 3 * 6
    assert all(e >= b for b, e in zip(cap.ranges["begin_ns"], cap.ranges["end_ns"]))
    # 'carry' begins in one iteration and ends in the next: it partially overlaps mainloop
    names = {s.site_id: s.name for s in dic.sites}
    carry = np.asarray(cap.ranges["site"]) == [k for k, v in names.items() if v == "carry"][0]
    assert carry.sum() == GRID_OWNERS * 6
    assert man.owner_name(4) == "cta(1,0,0)/warp1.lane5"


def test_range_pairing_of_the_real_capture_is_lifo_per_owner_and_site():
    # the pairing an event-by-event reader makes: a stack per (owner, site)
    buf, man, dic = parsed("capture_ok")
    cap = decode(bytes(buf), man, dic)
    ev = cap.events
    stacks: dict[tuple[int, int], list[int]] = {}
    expected = set()
    for owner, site, kind, ts in zip(ev["owner"], ev["site"], ev["kind"], ev["timestamp_ns"]):
        stack = stacks.setdefault((owner, site), [])
        if kind == abi.KIND_BEGIN:
            stack.append(ts)
        elif kind == abi.KIND_END:
            expected.add((owner, site, stack.pop(), ts, len(stack)))
    r = cap.ranges
    got = set(zip(r["owner"], r["site"], r["begin_ns"], r["end_ns"], r["depth"]))
    assert got == expected and len(expected) == len(r["owner"])


def _header(buf):
    return abi.Header.unpack(bytes(buf[:64]))


def _codes(buf, man, dic):
    with pytest.raises(CaptureRejected) as err:
        decode(bytes(buf), man, dic)
    assert str(err.value)
    return err.value.codes


def _corpus():
    """(name, mutate(buf, header, man_obj, dic) -> (buf, man, dic), expected code)."""
    cases = []
    for status in range(1, 32):
        def m(buf, h, man, dic, status=status):
            struct.pack_into("<I", buf, 28, status)
            return buf, man, dic
        cases.append((f"status_{status}", m, f"status_{abi.status_names(status)[0]}"))
    cases.append(("status_unknown_bit", lambda b, h, m, d: (struct.pack_into("<I", b, 28, 64), (b, m, d))[1],
                  "status_unknown_bits_0x40"))
    for i in range(8):
        def m(buf, h, man, dic, i=i):
            buf[i] ^= 0x20
            return buf, man, dic
        cases.append((f"magic_byte_{i}", m, "bad_magic"))
    for major, minor in ((0, 0), (2, 0), (1, 1), (255, 7)):
        def m(buf, h, man, dic, major=major, minor=minor):
            struct.pack_into("<HH", buf, 8, major, minor)
            return buf, man, dic
        cases.append((f"abi_{major}_{minor}", m, "bad_abi"))
    for off, value in ((12, 32), (12, 128), (14, 8), (14, 32)):
        def m(buf, h, man, dic, off=off, value=value):
            struct.pack_into("<H", buf, off, value)
            return buf, man, dic
        cases.append((f"sizes_{off}_{value}", m, "bad_sizes"))
    cases.append(("capacity", lambda b, h, m, d: (struct.pack_into("<I", b, 16, h.capacity + 1), (b, m, d))[1],
                  "bad_sizes"))
    cases.append(("rpo", lambda b, h, m, d: (struct.pack_into("<I", b, 24, h.records_per_owner + 2), (b, m, d))[1],
                  "bad_sizes"))
    for cut in (1, 7, 8, 16, 100):
        cases.append((f"truncate_{cut}", lambda b, h, m, d, cut=cut: (b[:-cut], m, d), "bad_length"))
    for extra in (1, 8, 16):
        cases.append((f"append_{extra}", lambda b, h, m, d, extra=extra: (b + bytes(extra), m, d), "bad_length"))
    cases.append(("tiny", lambda b, h, m, d: (b[:40], m, d), "bad_length"))
    for key, value in (("launch_id", 999), ("grid", [3, 2, 2]), ("block", [256, 1, 1]), ("records_per_owner", 50)):
        def m(buf, h, man, dic, key=key, value=value):
            return buf, dict(man, **{key: value}), dic
        cases.append((f"manifest_{key}", m, "manifest_mismatch" if key != "grid" else "manifest_mismatch"))
    owners = GRID_OWNERS
    for owner in range(owners):
        for pos in (0, 20):
            def m(buf, h, man, dic, owner=owner, pos=pos):
                records(buf, h)[owner * h.records_per_owner + pos, 3] &= 0x7FFFFFFF
                return buf, man, dic
            cases.append((f"hole_o{owner}_p{pos}", m, "hole"))
        def m(buf, h, man, dic, owner=owner):
            claims(buf, h)[owner] = 0
            return buf, man, dic
        cases.append((f"unclaimed_o{owner}", m, "unclaimed"))
        def m(buf, h, man, dic, owner=owner):
            c = claims(buf, h)
            c[owner] = c[(owner + 3) % owners]
            return buf, man, dic
        cases.append((f"foreign_claim_o{owner}", m, "foreign_claim"))
        def m(buf, h, man, dic, owner=owner):
            claims(buf, h)[owner] += 1  # same CTA, another thread
            return buf, man, dic
        cases.append((f"foreign_thread_o{owner}", m, "foreign_claim"))
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner + 9
            r[slot, 3] ^= (1 << abi.SM_SHIFT)
            return buf, man, dic
        cases.append((f"sm_change_o{owner}", m, "sm_change"))
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner + 11
            ts = (int(r[slot - 1, 1]) << 32 | int(r[slot - 1, 0])) - 64
            r[slot, 0], r[slot, 1] = ts & 0xFFFFFFFF, ts >> 32
            return buf, man, dic
        cases.append((f"decreasing_o{owner}", m, "decreasing_timestamp"))
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            r[owner * h.records_per_owner + 5, 0:2] = 0
            return buf, man, dic
        cases.append((f"zero_ts_o{owner}", m, "zero_timestamp"))
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner + 3
            r[slot, 3] = (int(r[slot, 3]) & ~0xFFFF) | 4242
            return buf, man, dic
        cases.append((f"unknown_site_o{owner}", m, "unknown_site"))
    for owner in range(0, owners, 2):
        # slot 1 is mainloop begin: make it an instant (range site takes only begin/end)
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner + 1
            r[slot, 3] = (int(r[slot, 3]) & ~(3 << 16)) | (abi.KIND_INSTANT << 16)
            return buf, man, dic
        cases.append((f"wrong_kind_range_o{owner}", m, "wrong_kind"))
        # slot 0 is the 'start' instant: make it a begin
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner
            r[slot, 3] = int(r[slot, 3]) & ~(3 << 16)
            return buf, man, dic
        cases.append((f"wrong_kind_instant_o{owner}", m, "wrong_kind"))
        # the last record (carry end) flipped to a begin: an open range
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner + PER_WRITER - 1
            r[slot, 3] = int(r[slot, 3]) & ~(3 << 16)
            return buf, man, dic
        cases.append((f"unmatched_begin_o{owner}", m, "unmatched_begin"))
        # the first mainloop begin flipped to an end
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            slot = owner * h.records_per_owner + 1
            r[slot, 3] = (int(r[slot, 3]) & ~(3 << 16)) | (abi.KIND_END << 16)
            return buf, man, dic
        cases.append((f"end_without_begin_o{owner}", m, "end_without_begin"))
        # the last record dropped (uncommitted): carry's final begin never ends
        def m(buf, h, man, dic, owner=owner):
            r = records(buf, h)
            r[owner * h.records_per_owner + PER_WRITER - 1] = 0
            return buf, man, dic
        cases.append((f"dropped_end_o{owner}", m, "unmatched_begin"))
    return cases


CORPUS = _corpus()


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 200


@pytest.mark.parametrize("name,mutate,expected", CORPUS, ids=[c[0] for c in CORPUS])
def test_mutated_capture_is_rejected_with_reason(name, mutate, expected):
    raw, man_obj, dic_obj = load("capture_ok")
    buf = bytearray(raw)
    h = abi.Header.unpack(raw)
    buf, man_obj, dic_obj = mutate(buf, h, dict(man_obj), dic_obj)
    man, dic = parse_manifest(man_obj), parse_dictionary(dic_obj)
    assert expected in _codes(buf, man, dic)


@pytest.mark.parametrize("name,code", [("capture_overflow", "status_overflow"),
                                       ("capture_duplicate", "status_duplicate_owner")])
def test_real_status_captures_are_rejected(name, code):
    buf, man, dic = parsed(name)
    assert code in _codes(buf, man, dic)


def test_all_errors_reported_together_with_offsets():
    buf, man, dic = parsed("capture_ok")
    h = _header(buf)
    struct.pack_into("<I", buf, 28, abi.STATUS_OVERFLOW)
    claims(buf, h)[2] = 0
    r = records(buf, h)
    r[h.records_per_owner * 5 + 3, 3] = (int(r[h.records_per_owner * 5 + 3, 3]) & ~0xFFFF) | 999
    with pytest.raises(CaptureRejected) as err:
        decode(bytes(buf), man, dic)
    assert {"status_overflow", "unclaimed", "unknown_site"} <= err.value.codes
    unknown = next(p for p in err.value.problems if p.code == "unknown_site")
    assert unknown.offsets == (64 + 16 * (h.records_per_owner * 5 + 3),)


def test_unknown_site_dictionary_and_wrong_declared_kind():
    buf, man, _ = load("capture_ok")
    dic = {"schema": "atrex-autonomous-timeline-events/v1",
           "sites": [{"site_id": 1, "name": "mainloop", "kind": "instant"}, {"site_id": 2, "name": "compute"},
                     {"site_id": 3, "name": "carry"}, {"site_id": 7, "name": "start"}]}
    codes = _codes(buf, parse_manifest(man), parse_dictionary(dic))
    assert {"wrong_kind", "unknown_site"} <= codes


def test_bad_manifest_and_dictionary_list_every_error():
    _, man, dic = load("capture_ok")
    bad = dict(man, grid=[0, 1], backend="hip")
    bad["owner_layout"] = {"kind": "cta_writers", "writers": [{"ordinal": 1, "label": "a", "warp": 0, "lane": 40}]}
    with pytest.raises(SpecError) as err:
        parse_manifest(bad)
    assert len(err.value.errors) >= 4
    with pytest.raises(SpecError):
        parse_dictionary(dict(dic, sites=[{"site_id": 1, "name": "a"}, {"site_id": 1, "name": "a"}]))
    with pytest.raises(SpecError):
        parse_manifest(dict(man, owner_layout={"kind": "cta_writers", "writers": [
            {"ordinal": 0, "label": "x", "warp": 9, "lane": 0}]}))  # thread 288 outside a 128-thread block


def test_synthetic_valid_captures_are_accepted():
    man = parse_manifest({"schema": "atrex-autonomous-timeline-manifest/v1", "backend": "cuda", "grid": [2, 1, 1],
                          "block": [64, 1, 1], "launch_id": 3, "records_per_owner": 8,
                          "owner_layout": {"kind": "cta_writers", "writers": [
                              {"ordinal": 0, "label": "w0", "warp": 0}, {"ordinal": 1, "label": "w1", "thread": 33}]}})
    dic = parse_dictionary({"schema": "atrex-autonomous-timeline-events/v1",
                            "sites": [{"site_id": 1, "name": "a", "kind": "range"}, {"site_id": 2, "name": "b"}]})
    # nested same-site ranges (LIFO), an absent owner, a partially filled owner, equal timestamps
    owner = [0, 0, 0, 0, 0, 3, 3]
    ts = [10, 20, 20, 40, 50, 5, 6]
    site = [1, 1, 1, 1, 2, 2, 2]
    kind = [0, 0, 1, 1, 2, 0, 1]
    cap = decode(bytes(encode(man, owner, ts, site, kind, range(7), [4, 4, 4, 4, 4, 9, 9])), man, dic)
    assert len(cap.ranges["owner"]) == 3
    depth = dict(zip(cap.ranges["begin_ns"], cap.ranges["depth"]))
    assert depth == {10: 0, 20: 1, 5: 0}
    outer = cap.ranges["begin_ns"].index(10)
    assert cap.ranges["end_ns"][outer] == 40
