"""Decode of an ATREXLT1 buffer with every FORMATS §10 check, all errors together, on the
standard library alone.

The ``timeline.py decode`` command must start as fast as AKA's standard-library tool, and
importing numpy alone costs about as long as AKA's whole command; so nothing on that path
imports it. Speed comes from whole-column work done by the interpreter's C code instead: the
record region is read as strided ``memoryview`` columns (``.tolist()``, ``bytes.translate``),
and the checks of the common cases compare whole lists (``min``, ``set``, ``sorted``, list
equality, ``count``); begin/end records are grouped by stable sorts and gathered with
``operator.itemgetter``. A Python loop over single records runs only for rare shapes (holes,
nested or unbalanced ranges) and to locate the offending records once a check has failed.

Every rejection is a :class:`Problem` with a stable ``code`` (what tests and tools match on),
a count, and the byte offsets of the first offending records so a person can find them in the
raw file.
"""

from __future__ import annotations

import sys
from itertools import chain, compress, repeat
from operator import itemgetter
from typing import NamedTuple

from . import abi
from .manifest import Dictionary, Manifest

MAX_EXAMPLES = 5
SITE_KIND_CODES = {"any": 0, "range": 1, "instant": 2, "counter": 3}
# ALLOWED[declared site kind code][record kind]: a range site takes only begin/end.
ALLOWED = (
    (True, True, True, True),
    (True, True, False, False),
    (False, False, True, False),
    (False, False, False, True),
)
# The columns are read through native-order memoryviews; ATREXLT1 is little-endian, as are the
# hosts CUDA runs on (x86-64, aarch64).
if sys.byteorder != "little":  # pragma: no cover - no big-endian CUDA host exists
    raise ImportError("the timeline decoder reads little-endian buffers on little-endian hosts only")


class Problem(NamedTuple):
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


class Capture(NamedTuple):
    """A capture that passed every check.

    ``events`` holds one list per field in canonical order (owner, then sequence);
    ``ranges`` pairs begin/end per (owner, site), LIFO, ``begin_event``/``end_event`` being
    positions in the ``events`` lists.
    """

    header: abi.Header
    manifest: Manifest
    dictionary: Dictionary
    events: dict[str, list[int]]
    ranges: dict[str, list[int]]
    committed_records: int = 0

    @property
    def event_count(self) -> int:
        return len(self.events["timestamp_ns"])

    def owner_sms(self) -> dict[int, int]:
        """The SM of each owner with records (decode checked that an owner never changes SM)."""
        return dict(zip(self.events["owner"], self.events["sm"]))


def _record_problem(problems: list[Problem], code: str, message: str, slots: list[int]) -> None:
    """A problem of every record in ``slots`` (none: no problem)."""
    if slots:
        _problem_at(problems, code, message, len(slots), slots)


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


# Fields of the tag that fill whole bytes of a record are read for every record at once with
# ``bytes.translate``, which looks each byte up in a 256-entry table of answers in C. Byte 14
# holds tag bits 16-23 (kind in its bits 0-1); byte 15 tag bits 24-31 (user flags in its bits
# 4-6, committed in bit 7).
KIND_BYTE, FLAGS_BYTE = 14, 15
KIND_OF_BYTE = bytes(b & 3 for b in range(256))
FLAGS_OF_BYTE = bytes((b >> (abi.FLAGS_SHIFT - 24)) & abi.FLAGS_MASK for b in range(256))
COMMITTED_OF_BYTE = bytes(b >> 7 for b in range(256))
IS_RANGE_KIND = bytes(int(b <= abi.KIND_END) for b in range(256))  # 1 for a begin or end kind code


def _columns(records: bytes) -> dict[str, list[int]]:
    """One list per field of a run of whole records."""
    view = memoryview(records)
    words = view.cast("I")  # a record is 4 words: timestamp (2), payload, tag
    return {
        "timestamp_ns": view.cast("Q")[0::2].tolist(),
        "payload": words[2::4].tolist(),
        "tag": words[3::4].tolist(),
        "site": view.cast("H")[6::8].tolist(),  # the tag's low half
        "kind": list(records[KIND_BYTE::abi.RECORD_BYTES].translate(KIND_OF_BYTE)),
        "flags": list(records[FLAGS_BYTE::abi.RECORD_BYTES].translate(FLAGS_OF_BYTE)),
    }


class _Records(NamedTuple):
    """The committed records in canonical order, one list per field (``columns``), and where
    each owner's records lie in them (``spans``: (owner, first position, end position) per owner
    with records)."""

    slot: list[int] | None  # buffer slot of each record; None when every slot is committed (slot = position)
    owner: list[int]
    sequence: list[int]
    columns: dict[str, list[int]]
    spans: list[tuple[int, int, int]]


def _read_records(raw: memoryview, header: abi.Header, problems: list[Problem]) -> _Records:
    """Gather the committed records; report stray bytes in empty slots and holes."""
    owners, rpo, cap = header.owner_count, header.records_per_owner, header.capacity
    size = abi.RECORD_BYTES
    region = raw[abi.HEADER_BYTES:abi.HEADER_BYTES + cap * size].tobytes()
    committed = region[FLAGS_BYTE::size].translate(COMMITTED_OF_BYTE)  # 1 or 0 per slot
    if 0 not in committed:
        # every slot committed: no holes, no gather, owner boundaries every rpo records
        return _Records(None, list(chain.from_iterable(repeat(o, rpo) for o in range(owners))),
                        list(range(rpo)) * owners, _columns(region),
                        [(o, o * rpo, (o + 1) * rpo) for o in range(owners)])
    stray: list[int] = []
    holes: list[int] = []
    slots: list[int] = []
    owner: list[int] = []
    sequence: list[int] = []
    pieces: list[bytes] = []  # the committed records, joined side by side below
    spans: list[tuple[int, int, int]] = []
    zeros = bytes(rpo * size)

    def nonzero(slot: int) -> bool:
        return any(region[slot * size:(slot + 1) * size])

    for o in range(owners):
        base = o * rpo
        row = committed[base:base + rpo]
        n = row.count(1)
        taken: range | list[int]
        if 0 not in row[:n]:
            # the committed records fill the start of the owner's range: one piece
            taken = range(base, base + n)
            if region[(base + n) * size:(base + rpo) * size] != zeros[:(rpo - n) * size]:
                # A slot without the committed flag must be all zero: anything in it is a torn
                # or stray write, and the capture is not trusted (AKA's decoder refuses it too).
                stray += [s for s in range(base + n, base + rpo) if nonzero(s)]
            pieces.append(region[base * size:(base + n) * size])
            sequence += range(n)
        else:
            holes.append(base + row.index(1, row.index(0)))
            stray += [s for s in range(base, base + rpo) if not committed[s] and nonzero(s)]
            taken = [s for s in range(base, base + rpo) if committed[s]]
            pieces += [region[s * size:(s + 1) * size] for s in taken]
            sequence += [s - base for s in taken]
        if n:
            spans.append((o, len(owner), len(owner) + n))
            owner += [o] * n
            slots += taken
    _record_problem(problems, "uncommitted_nonzero", "slot is nonzero without the committed flag", stray)
    _record_problem(problems, "hole", "committed record after an empty slot", holes)
    return _Records(slots, owner, sequence, _columns(b"".join(pieces)), spans)


def _check_claims(raw: memoryview, header: abi.Header, manifest: Manifest, with_records: set[int],
                  problems: list[Problem]) -> None:
    """Each owner with records must have claimed, with its own CTA and writer thread."""
    owners = header.owner_count
    start = abi.HEADER_BYTES + header.capacity * abi.RECORD_BYTES
    claims = raw[start:start + owners * abi.CLAIM_BYTES].cast("Q").tolist()
    writers = manifest.writers
    expected = [abi.claim_word(o // len(writers), writers[o % len(writers)].thread) for o in range(owners)]
    if claims == expected:
        return
    foreign = [o for o in range(owners) if claims[o] and claims[o] != expected[o]]
    if foreign:
        problems.append(Problem("foreign_claim", "claim word does not match its owner's CTA/thread", len(foreign),
                                tuple(start + abi.CLAIM_BYTES * o for o in foreign[:MAX_EXAMPLES])))
    unclaimed = [o * header.records_per_owner for o in range(owners) if o in with_records and not claims[o]]
    _record_problem(problems, "unclaimed", "records of an owner that never claimed", unclaimed)


def decode(raw, manifest: Manifest, dictionary: Dictionary) -> Capture:
    """Decode and check ``raw``; raise :class:`CaptureRejected` listing every problem."""
    raw = memoryview(raw).cast("B")
    header, problems = check_header(raw, manifest)
    if header is None:
        raise CaptureRejected(problems)
    rec = _read_records(raw, header, problems)
    _check_claims(raw, header, manifest, {o for o, _, _ in rec.spans}, problems)

    def slots_of(positions: list[int]) -> list[int]:
        """Buffer slots of event positions (the same when every slot is committed)."""
        return positions if rec.slot is None else [rec.slot[p] for p in positions]

    col = rec.columns
    site, kind, ts = col["site"], col["kind"], col["timestamp_ns"]
    declared = {s.site_id: SITE_KIND_CODES[s.kind] for s in dictionary.sites}
    tags: set[int] = set()  # a capture holds few distinct tags (sites x kinds x SMs x flags)
    sm: list[int] = []
    back: list[int] = []
    moved: list[int] = []
    for _, first, end in rec.spans:
        # whole-list tests per owner; the records are walked only in an owner that failed one
        row = ts[first:end]
        if row != sorted(row):
            back += [i for i in range(first + 1, end) if ts[i] < ts[i - 1]]
        own_tags = set(col["tag"][first:end])
        tags |= own_tags
        own_sms = {(t >> abi.SM_SHIFT) & abi.SM_MASK for t in own_tags}
        if len(own_sms) == 1:
            sm += [own_sms.pop()] * (end - first)
        else:
            sm += [(t >> abi.SM_SHIFT) & abi.SM_MASK for t in col["tag"][first:end]]
            moved += [i for i in range(first + 1, end) if sm[i] != sm[i - 1]]
    if not all((t & abi.SITE_MASK) in declared and ALLOWED[declared[t & abi.SITE_MASK]][(t >> abi.KIND_SHIFT) & 3]
               for t in tags):
        # locate only when something is wrong
        _record_problem(problems, "unknown_site", "site id not in the event dictionary",
                        slots_of([i for i, s in enumerate(site) if s not in declared]))
        _record_problem(problems, "wrong_kind", "record kind contradicts its site's declared kind",
                        slots_of([i for i, (k, s) in enumerate(zip(kind, site))
                                  if s in declared and not ALLOWED[declared[s]][k]]))
    if ts and min(ts) == 0:
        _record_problem(problems, "zero_timestamp", "zero timestamp", slots_of([i for i, t in enumerate(ts) if t == 0]))
    _record_problem(problems, "decreasing_timestamp", "timestamp decreases within an owner", slots_of(back))
    _record_problem(problems, "sm_change", "owner changes SM", slots_of(moved))

    ranges = _pair_ranges(rec.owner, site, kind, ts, col["payload"], problems, slots_of)
    if not ts:
        problems.append(Problem("no_events", "the capture holds no committed record"))
    if problems:
        raise CaptureRejected(problems)
    events = {
        "owner": rec.owner,
        "sequence": rec.sequence,
        "timestamp_ns": ts,
        "site": site,
        "kind": kind,
        "sm": sm,
        "flags": col["flags"],
        "payload": col["payload"],
    }
    return Capture(header, manifest, dictionary, events, ranges, committed_records=len(ts))


def _pair_ranges(owner, site, kind, ts, payload, problems, slots_of) -> dict[str, list[int]]:
    """Pair begin/end per (owner, site) LIFO; report ends without begin and open begins.

    Ranges come out grouped by (owner, site), then by nesting depth, in record order; except
    when every record is a range and each begin is directly followed by its end: then in record
    order.
    """
    n = len(kind)
    half = n // 2
    if n % 2 == 0 and kind[0::2].count(abi.KIND_BEGIN) == half and kind[1::2].count(abi.KIND_END) == half \
            and site[0::2] == site[1::2] and owner[0::2] == owner[1::2]:
        # Only ranges, each begin directly followed by its end: strided slices, no pairing walk.
        return {"owner": owner[0::2], "site": site[0::2], "begin_ns": ts[0::2], "end_ns": ts[1::2],
                "begin_payload": payload[0::2], "end_payload": payload[1::2], "depth": [0] * half,
                "begin_event": list(range(0, n, 2)), "end_event": list(range(1, n, 2))}
    # positions of the begin/end records, grouped by (owner, site): two stable sorts (by site,
    # then owner) keep each group's records in their own order
    ridx = list(compress(range(n), bytes(kind).translate(IS_RANGE_KIND)))
    ridx.sort(key=site.__getitem__)
    ridx.sort(key=owner.__getitem__)
    r_owner, r_site = _take(owner, ridx), _take(site, ridx)
    if len(ridx) % 2 == 0:
        # Common case: inside each group begins and ends alternate (B E B E ...), no nesting;
        # then the pairing is positional.
        r_kind = _take(kind, ridx)
        pairs = len(ridx) // 2
        if r_kind[0::2].count(abi.KIND_BEGIN) == pairs and r_kind[1::2].count(abi.KIND_END) == pairs \
                and r_owner[0::2] == r_owner[1::2] and r_site[0::2] == r_site[1::2]:
            return _ranges(ts, payload, ridx[0::2], ridx[1::2], r_owner[0::2], r_site[0::2], [0] * pairs)
    key = list(zip(r_owner, r_site))
    # General case: a stack per (owner, site) group, walked record by record.
    orphan_count = open_count = 0
    orphan_first: list[int] = []  # per group with an orphan end: its first one
    open_last: list[int] = []  # per group with an open begin: the group's last range record
    found: list[tuple[tuple[int, int], int, int, int]] = []  # (group, depth, begin's place in ridx, end)
    start = 0
    while start < len(ridx):
        end = start
        while end < len(ridx) and key[end] == key[start]:
            end += 1
        stack: list[int] = []
        orphans = 0
        for j in range(start, end):  # j: place in ridx, i: place in the events
            i = ridx[j]
            if kind[i] == abi.KIND_BEGIN:
                stack.append(j)
            elif stack:
                found.append((key[start], len(stack) - 1, stack.pop(), i))
            else:
                if not orphans:
                    orphan_first.append(i)
                orphans += 1
        orphan_count += orphans
        if stack:
            open_count += len(stack)
            open_last.append(ridx[end - 1])
        start = end
    if orphan_count:
        _problem_at(problems, "end_without_begin", "range end without a matching begin", orphan_count,
                    slots_of(orphan_first))
    if open_count:
        _problem_at(problems, "unmatched_begin", "range begin never ended", open_count, slots_of(open_last))
    if orphan_count or open_count:
        return _ranges(ts, payload, [], [], [], [], [])
    # ranges by group, then nesting depth, then the begin's place in the group
    found.sort(key=lambda r: r[:3])
    return _ranges(ts, payload, [ridx[r[2]] for r in found], [r[3] for r in found], [r[0][0] for r in found],
                   [r[0][1] for r in found], [r[1] for r in found])


def _take(values: list[int], positions: list[int]) -> list[int]:
    """``values[p]`` for every position, gathered in C by ``operator.itemgetter`` (a Python loop
    or ``map`` calls back into the interpreter once per element)."""
    if len(positions) < 2:  # itemgetter needs one position at least and returns one bare
        return [values[p] for p in positions]
    return list(itemgetter(*positions)(values))


def _problem_at(problems: list[Problem], code: str, message: str, count: int, slots: list[int]) -> None:
    """A problem counted ``count`` times, located at the first records of ``slots``."""
    problems.append(Problem(code, message, count,
                            tuple(abi.HEADER_BYTES + abi.RECORD_BYTES * s for s in slots[:MAX_EXAMPLES])))


def _ranges(ts, payload, begins: list[int], ends: list[int], owner: list[int], site: list[int],
            depth: list[int]) -> dict[str, list[int]]:
    """The range columns of begin/end event positions, and each range's owner, site and depth."""
    return {
        "owner": owner,
        "site": site,
        "begin_ns": _take(ts, begins),
        "end_ns": _take(ts, ends),
        "begin_payload": _take(payload, begins),
        "end_payload": _take(payload, ends),
        "depth": depth,
        "begin_event": begins,
        "end_event": ends,
    }
