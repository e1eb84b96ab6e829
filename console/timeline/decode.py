"""Vectorized decode of an ATREXLT1 buffer with every FORMATS §10 check, all errors together.

The buffer is read as numpy views (no per-record Python work), so a capture of millions of
records decodes in a fraction of a second. Every rejection is a :class:`Problem` with a
stable ``code`` (what tests and tools match on), a count, and the byte offsets of the first
offending records so a person can find them in the raw file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from . import abi
from .manifest import Dictionary, Manifest

MAX_EXAMPLES = 5
SITE_KIND_CODES = {"any": 0, "range": 1, "instant": 2, "counter": 3}
# ALLOWED[declared site kind code, record kind]: a range site takes only begin/end.
ALLOWED = np.array(
    [
        [True, True, True, True],
        [True, True, False, False],
        [False, False, True, False],
        [False, False, False, True],
    ]
)


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    message: str
    count: int = 1
    offsets: tuple[int, ...] = ()

    def __str__(self) -> str:
        where = f" at byte {', '.join(str(o) for o in self.offsets)}" if self.offsets else ""
        many = f" ({self.count}x)" if self.count > 1 else ""
        return f"{self.code}: {self.message}{many}{where}"

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "count": self.count,
                "offsets": list(self.offsets)}


class CaptureRejected(ValueError):
    """The capture failed at least one check; ``problems`` holds every one of them."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems

    @property
    def codes(self) -> set[str]:
        return {p.code for p in self.problems}


@dataclass(slots=True)
class Capture:
    """A capture that passed every check.

    ``events`` holds one numpy array per field in canonical order (owner, then sequence);
    ``ranges`` pairs begin/end per (owner, site), LIFO, indices pointing into ``events``.
    """

    header: abi.Header
    manifest: Manifest
    dictionary: Dictionary
    events: dict[str, np.ndarray]
    ranges: dict[str, np.ndarray]
    committed_records: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def event_count(self) -> int:
        return int(self.events["timestamp_ns"].size)


@lru_cache(maxsize=16)
def kind_tables(sites: tuple[tuple[int, str], ...]) -> tuple[np.ndarray, np.ndarray]:
    """(declared kind code per site id, -1 where undeclared; allowed flag per 18-bit (kind, site)
    key) of a dictionary's sites. Built once per dictionary: zeroing the 256 Ki-entry table
    costs more than decoding a small capture. Read-only, as they are shared."""
    table = np.full(abi.SITE_MASK + 1, -1, dtype=np.int8)
    valid = np.zeros(4 << 16, dtype=bool)
    for site_id, kind in sites:
        table[site_id] = SITE_KIND_CODES[kind]
        valid[np.arange(4) * (1 << 16) + site_id] = ALLOWED[SITE_KIND_CODES[kind]]
    table.flags.writeable = valid.flags.writeable = False
    return table, valid


def _offsets(slots: np.ndarray, base: int, stride: int) -> tuple[int, ...]:
    return tuple(int(base + stride * s) for s in slots[:MAX_EXAMPLES])


def _record_problem(problems, code, message, slots) -> None:
    if slots.size:
        problems.append(Problem(code, message, int(slots.size),
                                _offsets(slots, abi.HEADER_BYTES, abi.RECORD_BYTES)))


def _first_after_hole(committed: np.ndarray) -> np.ndarray:
    """Slot of the first committed record after the first empty slot, per owner with a hole."""
    rpo = committed.shape[1]
    per_owner = committed.sum(axis=1)
    first_empty = np.where(per_owner == rpo, rpo, np.argmin(committed, axis=1))
    holed = np.flatnonzero(per_owner > first_empty)
    after = committed[holed].copy()
    after[np.arange(rpo)[None, :] <= first_empty[holed, None]] = False
    return holed * rpo + np.argmax(after, axis=1)


def check_header(raw, manifest: Manifest) -> tuple[abi.Header | None, list[Problem]]:
    """Header checks; a header whose layout cannot be trusted returns None (records unread)."""
    problems: list[Problem] = []
    size = len(raw)
    if size < abi.HEADER_BYTES:
        return None, [Problem("bad_length", f"buffer of {size} bytes is shorter than the 64-byte header")]
    h = abi.Header.unpack(raw)
    if h.magic != abi.MAGIC:
        problems.append(Problem("bad_magic", f"magic {h.magic:#018x} is not ATREXLT1", 1, (0,)))
    if (h.abi_major, h.abi_minor) != (abi.ABI_MAJOR, abi.ABI_MINOR):
        problems.append(Problem("bad_abi", f"ABI {h.abi_major}.{h.abi_minor} is not 1.0", 1, (8,)))
    if h.header_bytes != abi.HEADER_BYTES:
        problems.append(Problem("bad_sizes", f"header_bytes {h.header_bytes} != 64", 1, (12,)))
    if h.record_bytes != abi.RECORD_BYTES:
        problems.append(Problem("bad_sizes", f"record_bytes {h.record_bytes} != 16", 1, (14,)))
    if h.capacity != h.owner_count * h.records_per_owner:
        problems.append(Problem("bad_sizes", f"capacity {h.capacity} != owner_count {h.owner_count}"
                                f" x records_per_owner {h.records_per_owner}", 1, (16,)))
    expected = abi.buffer_bytes(h.owner_count, h.records_per_owner)
    if size != expected:
        problems.append(Problem("bad_length", f"buffer is {size} bytes, the header describes {expected}"))
    layout_ok = not problems
    mismatches = []
    if h.owner_count != manifest.owner_count:
        mismatches.append(f"owner_count {h.owner_count} != manifest {manifest.owner_count}")
        layout_ok = False
    if h.records_per_owner != manifest.records_per_owner:
        mismatches.append(f"records_per_owner {h.records_per_owner} != manifest {manifest.records_per_owner}")
        layout_ok = False
    if h.grid != manifest.grid:
        mismatches.append(f"grid {list(h.grid)} != manifest {list(manifest.grid)}")
    if h.block != manifest.block:
        mismatches.append(f"block {list(h.block)} != manifest {list(manifest.block)}")
    if h.launch_id != manifest.launch_id:
        mismatches.append(f"launch_id {h.launch_id} != manifest {manifest.launch_id}")
    for text in mismatches:
        problems.append(Problem("manifest_mismatch", text))
    status = h.status
    if status:
        for name in abi.status_names(status):
            problems.append(Problem(f"status_{name}", f"status bit {name} is set (status {status:#x})", 1, (28,)))
    return (h if layout_ok else None), problems


def decode(raw, manifest: Manifest, dictionary: Dictionary) -> Capture:
    """Decode and check ``raw``; raise :class:`CaptureRejected` listing every problem."""
    raw = memoryview(raw).cast("B")
    header, problems = check_header(raw, manifest)
    if header is None:
        raise CaptureRejected(problems)
    owners = header.owner_count
    rpo = header.records_per_owner
    cap = header.capacity
    words = np.frombuffer(raw, dtype="<u4", count=cap * 4, offset=abi.HEADER_BYTES).reshape(cap, 4)
    claims = np.frombuffer(raw, dtype="<u8", count=owners, offset=abi.HEADER_BYTES + cap * abi.RECORD_BYTES)
    tag_all = np.ascontiguousarray(words[:, 3])
    full = cap > 0 and int(tag_all.min()) >= abi.COMMITTED
    if full:
        # every slot committed: no holes, no gather, owner boundaries every rpo records
        has_records = None
        tag = tag_all
        ts = np.frombuffer(raw, dtype="<u8", count=cap * 2, offset=abi.HEADER_BYTES)[0::2]
        payload = words[:, 2]
        owner = np.repeat(np.arange(owners, dtype=np.int32), rpo)
        seq = np.tile(np.arange(rpo, dtype=np.int32), owners)
        same = np.ones(max(cap - 1, 0), dtype=bool)
        same[rpo - 1::rpo] = False
    else:
        committed = (tag_all >= abi.COMMITTED).reshape(owners, rpo)
        # A slot without the committed flag must be all zero: anything in it is a torn or
        # stray write, and the capture is not trusted (AKA's decoder refuses it too).
        empty = ~committed.reshape(-1)
        if np.count_nonzero(words[empty]):
            _record_problem(problems, "uncommitted_nonzero", "slot is nonzero without the committed flag",
                            np.flatnonzero(empty & words.any(axis=1)))
        if (committed[:, 1:] > committed[:, :-1]).any():
            _record_problem(problems, "hole", "committed record after an empty slot", _first_after_hole(committed))
        has_records = committed.any(axis=1)
        rows, cols = np.nonzero(committed)  # canonical order: owner, then sequence
        owner = rows.astype(np.int32)
        seq = cols.astype(np.int32)
        sel = np.frombuffer(raw, dtype=abi.RECORD_DTYPE, count=cap, offset=abi.HEADER_BYTES)[committed.reshape(-1)]
        tag = np.ascontiguousarray(sel["tag"])
        ts = sel["timestamp_ns"]
        payload = sel["payload"]
        same = owner[1:] == owner[:-1]

    def at(positions: np.ndarray) -> np.ndarray:
        """Buffer slots of event positions (the same in a full buffer)."""
        return positions if full else owner[positions].astype(np.int64) * rpo + seq[positions]

    # Claims: each owner with records must have claimed, with its own CTA and writer thread
    # (row c, column w: writer w of CTA c; the claim word of abi.claim_word).
    threads = np.array([w.thread for w in manifest.writers], dtype=np.uint64)
    ctas = np.arange(1, owners // threads.size + 1, dtype=np.uint64)
    expected = ((ctas[:, None] << np.uint64(32)) | (threads + np.uint64(1))).reshape(-1)
    claimed = claims != 0
    wrong_claim = claims != expected
    if wrong_claim.any():
        foreign = np.flatnonzero(claimed & wrong_claim)
        if foreign.size:
            problems.append(Problem("foreign_claim", "claim word does not match its owner's CTA/thread",
                                    int(foreign.size), _offsets(foreign, abi.HEADER_BYTES + cap * 16, 8)))
        unclaimed = np.flatnonzero(~claimed if has_records is None else has_records & ~claimed)
        if unclaimed.size:
            _record_problem(problems, "unclaimed", "records of an owner that never claimed", unclaimed * rpo)

    halves = tag.view(np.uint16).reshape(-1, 2)
    site = halves[:, 0]
    high = halves[:, 1]
    kind = high & 3
    sm = (high >> 2) & abi.SM_MASK
    # detect with one lookup of the 18-bit (kind, site) key; locate only when something is wrong
    table, valid = kind_tables(tuple((s.site_id, s.kind) for s in dictionary.sites))
    if not valid[tag & 0x3FFFF].all():
        declared = table[site]
        unknown = declared < 0
        if unknown.any():
            _record_problem(problems, "unknown_site", "site id not in the event dictionary",
                            at(np.flatnonzero(unknown)))
        wrong = ~unknown & ~ALLOWED[np.maximum(declared, 0), kind]
        if wrong.any():
            _record_problem(problems, "wrong_kind", "record kind contradicts its site's declared kind",
                            at(np.flatnonzero(wrong)))

    if ts.size and int(ts.min()) == 0:
        _record_problem(problems, "zero_timestamp", "zero timestamp", at(np.flatnonzero(ts == 0)))
    if full:  # whole owners side by side: compare within rows, no boundary mask
        ts2 = ts.reshape(owners, rpo)
        sm2 = sm.reshape(owners, rpo)
        suspect = bool((ts2[:, 1:] < ts2[:, :-1]).any()), bool((sm2 != sm2[:, :1]).any())
    else:
        suspect = True, True
    back = same & (ts[1:] < ts[:-1]) if suspect[0] else None
    if back is not None and back.any():
        _record_problem(problems, "decreasing_timestamp", "timestamp decreases within an owner",
                        at(np.flatnonzero(back) + 1))
    moved = same & (sm[1:] != sm[:-1]) if suspect[1] else None
    if moved is not None and moved.any():
        _record_problem(problems, "sm_change", "owner changes SM", at(np.flatnonzero(moved) + 1))

    ranges = _pair_ranges(owner, site, kind, ts, payload, problems, at)
    if ts.size == 0:
        problems.append(Problem("no_events", "the capture holds no committed record"))
    if problems:
        raise CaptureRejected(problems)
    events = {
        "owner": owner,
        "sequence": seq,
        "timestamp_ns": ts,
        "site": site,
        "kind": kind,
        "sm": sm,
        "flags": (high >> 12) & abi.FLAGS_MASK,
        "payload": payload,
    }
    return Capture(header, manifest, dictionary, events, ranges, committed_records=int(ts.size))


def _pair_ranges(owner, site, kind, ts, payload, problems, at) -> dict[str, np.ndarray]:
    """Pair begin/end per (owner, site) LIFO; report ends without begin and open begins."""
    is_range = kind <= abi.KIND_END
    every = bool(is_range.all())
    if every and kind.size % 2 == 0 and (kind[0::2] == abi.KIND_BEGIN).all() and (kind[1::2] == abi.KIND_END).all() \
            and (site[0::2] == site[1::2]).all() and (owner[0::2] == owner[1::2]).all():
        # Only ranges, each begin directly followed by its end: strided views, no gather.
        bi = np.arange(0, kind.size, 2)
        return _ranges(owner, site, ts, payload, bi, bi + 1, np.zeros(bi.size, np.int64),
                       slice(0, None, 2), slice(1, None, 2))
    ridx = np.arange(kind.size) if every else np.flatnonzero(is_range)
    key = owner[ridx].astype(np.int64) * (abi.SITE_MASK + 1) + site[ridx]
    if key.size > 1 and not (key[1:] >= key[:-1]).all():
        # group by (owner, site); the stable sort keeps each group's own order
        order = np.argsort(key, kind="stable")
        ridx = ridx[order]
        key = key[order]
    if ridx.size % 2 == 0:
        # Common case: inside each group begins and ends alternate (B E B E ...), no nesting;
        # then the pairing is positional.
        rkind = kind[ridx]
        if (rkind[0::2] == abi.KIND_BEGIN).all() and (rkind[1::2] == abi.KIND_END).all() \
                and (key[0::2] == key[1::2]).all():
            return _ranges(owner, site, ts, payload, ridx[0::2], ridx[1::2], np.zeros(ridx.size // 2, np.int64))
    begin = kind[ridx] == abi.KIND_BEGIN
    delta = np.where(begin, 1, -1).astype(np.int64)
    first_of_group = np.concatenate(([True], key[1:] != key[:-1])) if key.size else np.zeros(0, bool)
    starts = np.flatnonzero(first_of_group)
    csum = np.cumsum(delta)
    group = np.cumsum(first_of_group) - 1
    depth = csum - (csum - delta)[starts][group] if key.size else csum
    # depth after each event inside its (owner, site) group
    none = np.zeros(0, np.int64)
    if key.size == 0:
        return _ranges(owner, site, ts, payload, none, none, none)
    low = np.minimum.reduceat(np.minimum(depth, 0), starts)
    final = depth[np.append(starts[1:] - 1, key.size - 1)]
    orphan_ends = -low
    open_begins = final + orphan_ends
    bad = False
    if (orphan_ends > 0).any():
        bad = True
        # the first end that drove the depth below zero, per bad group
        neg = np.flatnonzero(depth < 0)
        first = neg[np.concatenate(([True], group[neg][1:] != group[neg][:-1]))]
        problems.append(Problem("end_without_begin", "range end without a matching begin",
                                int(orphan_ends.sum()),
                                _offsets(at(ridx[first]), abi.HEADER_BYTES, abi.RECORD_BYTES)))
    if (open_begins > 0).any():
        bad = True
        last_of = np.append(starts[1:] - 1, key.size - 1)[open_begins > 0]
        problems.append(Problem("unmatched_begin", "range begin never ended",
                                int(open_begins.sum()),
                                _offsets(at(ridx[last_of]), abi.HEADER_BYTES, abi.RECORD_BYTES)))
    if bad:
        return _ranges(owner, site, ts, payload, none, none, none)
    level = np.where(begin, depth, depth + 1)
    if level.max(initial=0) <= 1:
        b = np.flatnonzero(begin)
        e = b + 1
    else:
        order = np.lexsort((np.arange(key.size), level, group))
        b = order[0::2]
        e = order[1::2]
    return _ranges(owner, site, ts, payload, ridx[b], ridx[e], level[b] - 1)


def _ranges(owner, site, ts, payload, bi, ei, depth, take_b=None, take_e=None) -> dict[str, np.ndarray]:
    tb = bi if take_b is None else take_b
    te = ei if take_e is None else take_e
    return {
        "owner": owner[tb],
        "site": site[tb],
        "begin_ns": ts[tb],
        "end_ns": ts[te],
        "begin_payload": payload[tb],
        "end_payload": payload[te],
        "depth": depth,
        "begin_event": bi,
        "end_event": ei,
    }
