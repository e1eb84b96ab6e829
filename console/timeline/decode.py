"""Decode of an ATREXLT1 buffer with every FORMATS §10 check, all errors together, on the
standard library alone.

The ``timeline.py decode`` command must start as fast as AKA's standard-library tool, and
importing numpy alone costs about as long as AKA's whole command; so nothing on that path
imports it. Speed comes from whole-column work done by the interpreter's C code instead: the
record region is read as strided ``memoryview`` columns (``.tolist()``, ``bytes.translate``),
and the checks of the common cases compare whole lists and byte strings (``sorted``, equality,
``count``); begin/end records are grouped by a stable sort of each owner's by site and gathered
with ``operator.itemgetter``. A Python loop over single records runs only for rare shapes (holes,
nested or unbalanced ranges) and to locate the offending records once a check has failed.

Every rejection is a :class:`Problem` with a stable ``code`` (what tests and tools match on),
a count, and the byte offsets of the first offending records so a person can find them in the
raw file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from itertools import accumulate, chain, compress, repeat
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


def _record_problem(problems: list[Problem], code: str, message: str, slots: list[int]) -> None:
    if slots:
        problems.append(Problem(code, message, len(slots),
                                tuple(abi.HEADER_BYTES + abi.RECORD_BYTES * s for s in slots[:MAX_EXAMPLES])))


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
# ``bytes.translate``, which looks each byte up in a 256-entry table of answers in C. Byte 12
# holds tag bits 0-7 (the site's low byte), byte 13 bits 8-15, byte 14 bits 16-23 (kind in
# its bits 0-1, SM bits 0-5 in its bits 2-7), byte 15 bits 24-31 (SM bits 6-9 in its bits 0-3,
# user flags in 4-6, committed in 7).
SITE_LOW_BYTE, SITE_HIGH_BYTE, KIND_BYTE, FLAGS_BYTE = 12, 13, 14, 15
KIND_OF_BYTE = bytes(b & 3 for b in range(256))
FLAGS_OF_BYTE = bytes((b >> (abi.FLAGS_SHIFT - 24)) & abi.FLAGS_MASK for b in range(256))
COMMITTED_OF_BYTE = bytes(b >> 7 for b in range(256))
IS_RANGE_KIND = bytes(int(b <= abi.KIND_END) for b in range(256))  # 1 for a begin or end kind code
SM_LOW_OF_BYTE = bytes(b >> 2 for b in range(256))  # from byte 14
SM_HIGH_OF_BYTE = bytes(b & 0xF for b in range(256))  # from byte 15
SM_LOW_BITS = 6
# The declared site kind code each record kind needs (begin/end: range); a site of kind "any"
# takes every record kind, so a dictionary with one is checked tag by tag instead.
SITE_KIND_OF_KIND = bytes((1, 1, 2, 3)) + bytes(252)
UNDECLARED = 255


class _Records(NamedTuple):
    """The committed records in canonical order: how many each owner holds (``counts``), each
    one's owner and sequence (its buffer slot is owner x records_per_owner + sequence), and the
    records themselves side by side (``records``, 16 bytes each)."""

    counts: list[int]
    owner: list[int]
    sequence: list[int]
    records: bytes


def _read_records(raw: memoryview, header: abi.Header, problems: list[Problem]) -> _Records:
    """Gather the committed records; report stray bytes in empty slots and holes."""
    owners, rpo, cap = header.owner_count, header.records_per_owner, header.capacity
    size = abi.RECORD_BYTES
    region = raw[abi.HEADER_BYTES:abi.HEADER_BYTES + cap * size].tobytes()
    committed = region[FLAGS_BYTE::size].translate(COMMITTED_OF_BYTE)  # 1 or 0 per slot
    if 0 not in committed:
        # every slot committed: no holes, no gather
        return _Records([rpo] * owners, list(chain.from_iterable(repeat(o, rpo) for o in range(owners))),
                        list(range(rpo)) * owners, region)
    bases = range(0, cap, rpo)
    counts = [committed.count(1, base, base + rpo) for base in bases]
    filled = b"\1" * rpo + bytes(rpo)  # filled[rpo - n:2 * rpo - n]: n committed slots, then empty ones
    if committed == b"".join([filled[rpo - n:2 * rpo - n] for n in counts]):
        # the usual layout: each owner's committed records fill the start of its slots
        sequence = list(chain.from_iterable(map(range, counts)))
        records = b"".join([region[base * size:(base + n) * size] for base, n in zip(bases, counts)])
        empty = b"".join([region[(base + n) * size:(base + rpo) * size] for base, n in zip(bases, counts)])
        written = empty != bytes(len(empty))
    else:
        taken = list(compress(range(cap), committed))
        sequence = [s % rpo for s in taken]
        records = b"".join([region[s * size:(s + 1) * size] for s in taken])
        written = True  # a rare layout: the empty slots are looked at one by one below
    if written:
        # A slot without the committed flag must be all zero: anything in it is a torn or stray
        # write, and the capture is not trusted (AKA's decoder refuses it too).
        stray = [s for s in range(cap) if not committed[s] and any(region[s * size:(s + 1) * size])]
        _record_problem(problems, "uncommitted_nonzero", "slot is nonzero without the committed flag", stray)
    holes = [committed.index(1, committed.index(0, base, base + n), base + rpo)
             for base, n in zip(bases, counts) if 0 in committed[base:base + n]]
    _record_problem(problems, "hole", "committed record after an empty slot", holes)
    return _Records(counts, list(chain.from_iterable(map(repeat, range(owners), counts))), sequence, records)


def _check_claims(raw: memoryview, header: abi.Header, manifest: Manifest, counts: list[int],
                  problems: list[Problem]) -> None:
    """Each owner with records must have claimed, with its own CTA and writer thread."""
    owners = header.owner_count
    start = abi.HEADER_BYTES + header.capacity * abi.RECORD_BYTES
    claims = raw[start:start + owners * abi.CLAIM_BYTES].cast("Q").tolist()
    threads = [w.thread for w in manifest.writers]
    expected = [abi.claim_word(cta, thread) for cta in range(owners // len(threads)) for thread in threads]
    if claims == expected:
        return
    foreign = [o for o in range(owners) if claims[o] and claims[o] != expected[o]]
    if foreign:
        problems.append(Problem("foreign_claim", "claim word does not match its owner's CTA/thread", len(foreign),
                                tuple(start + abi.CLAIM_BYTES * o for o in foreign[:MAX_EXAMPLES])))
    unclaimed = [o * header.records_per_owner for o in range(owners) if counts[o] and not claims[o]]
    _record_problem(problems, "unclaimed", "records of an owner that never claimed", unclaimed)


def decode(raw, manifest: Manifest, dictionary: Dictionary) -> Capture:
    """Decode and check ``raw``; raise :class:`CaptureRejected` listing every problem."""
    raw = memoryview(raw).cast("B")
    header, problems = check_header(raw, manifest)
    if header is None:
        raise CaptureRejected(problems)
    rec = _read_records(raw, header, problems)
    _check_claims(raw, header, manifest, rec.counts, problems)
    rpo = header.records_per_owner

    def slots_of(positions: list[int]) -> list[int]:
        """Buffer slots of event positions."""
        return [rec.owner[p] * rpo + rec.sequence[p] for p in positions]

    records = rec.records
    view = memoryview(records)
    size = abi.RECORD_BYTES
    ts = view.cast("Q")[0::2].tolist()
    site = view.cast("H")[6::8].tolist()  # the tag's low half
    kind = records[KIND_BYTE::size].translate(KIND_OF_BYTE)
    bounds = list(accumulate(rec.counts, initial=0))
    spans = [(first, end) for first, end in zip(bounds, bounds[1:]) if first != end]  # per owner with records
    back: list[int] = []
    zero = False
    for first, end in spans:
        # whole-list tests per owner; the records are walked only in an owner that failed one
        row = ts[first:end]
        ordered = sorted(row)
        zero = zero or ordered[0] == 0
        if row != ordered:
            back += [i for i in range(first + 1, end) if ts[i] < ts[i - 1]]
    # An owner stays on one SM: its SM bytes repeat its first record's (a byte string per owner,
    # compared in C); only otherwise is each record's SM computed and walked.
    sm_low = records[KIND_BYTE::size].translate(SM_LOW_OF_BYTE)
    sm_high = records[FLAGS_BYTE::size].translate(SM_HIGH_OF_BYTE)
    moved: list[int] = []
    if sm_low == b"".join([sm_low[first:first + 1] * (end - first) for first, end in spans]) \
            and sm_high == b"".join([sm_high[first:first + 1] * (end - first) for first, end in spans]):
        sm = list(chain.from_iterable(repeat(sm_low[first] | sm_high[first] << SM_LOW_BITS, end - first)
                                      for first, end in spans))
    else:
        sm = [low | high << SM_LOW_BITS for low, high in zip(sm_low, sm_high)]
        moved = [i for first, end in spans for i in range(first + 1, end) if sm[i] != sm[i - 1]]
    declared = {s.site_id: SITE_KIND_CODES[s.kind] for s in dictionary.sites}
    # Every record's site declared, with a kind its site takes: with site ids below 256 and no
    # site of kind "any", that is one byte string (each record's declared site kind) equal to
    # another (the site kind each record's kind needs).
    declared_of_byte = bytearray([UNDECLARED]) * 256
    for site_id, code in declared.items():
        if site_id < 256:
            declared_of_byte[site_id] = code
    if not (records[SITE_HIGH_BYTE::size].count(0) == len(kind)
            and records[SITE_LOW_BYTE::size].translate(declared_of_byte) == kind.translate(SITE_KIND_OF_KIND)):
        # otherwise each distinct tag is checked (a capture holds few: sites x kinds x SMs x flags)
        tags = set(view.cast("I")[3::4].tolist())
        if not all((t & abi.SITE_MASK) in declared
                   and ALLOWED[declared[t & abi.SITE_MASK]][(t >> abi.KIND_SHIFT) & 3] for t in tags):
            # locate only when something is wrong
            _record_problem(problems, "unknown_site", "site id not in the event dictionary",
                            slots_of([i for i, s in enumerate(site) if s not in declared]))
            _record_problem(problems, "wrong_kind", "record kind contradicts its site's declared kind",
                            slots_of([i for i, (k, s) in enumerate(zip(kind, site))
                                      if s in declared and not ALLOWED[declared[s]][k]]))
    if zero:
        _record_problem(problems, "zero_timestamp", "zero timestamp", slots_of([i for i, t in enumerate(ts) if t == 0]))
    _record_problem(problems, "decreasing_timestamp", "timestamp decreases within an owner", slots_of(back))
    _record_problem(problems, "sm_change", "owner changes SM", slots_of(moved))

    payload = view.cast("I")[2::4].tolist()
    ranges = _pair_ranges(rec.owner, bounds, site, kind, ts, payload, problems, slots_of)
    if not ts:
        problems.append(Problem("no_events", "the capture holds no committed record"))
    if problems:
        raise CaptureRejected(problems)
    events = {
        "owner": rec.owner,
        "sequence": rec.sequence,
        "timestamp_ns": ts,
        "site": site,
        "kind": list(kind),
        "sm": sm,
        "flags": list(records[FLAGS_BYTE::size].translate(FLAGS_OF_BYTE)),
        "payload": payload,
    }
    return Capture(header, manifest, dictionary, events, ranges, committed_records=len(ts))


def _pair_ranges(owner, bounds, site, kind, ts, payload, problems, slots_of) -> dict[str, list[int]]:
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
    # positions of the begin/end records, grouped by (owner, site), each group in record order:
    # the records come owner by owner already, so each owner's are sorted (stably) by site alone
    is_range = kind.translate(IS_RANGE_KIND)
    ridx = list(compress(range(n), is_range))
    per_owner = [is_range.count(1, first, end) for first, end in zip(bounds, bounds[1:])]
    cuts = list(accumulate(per_owner, initial=0))
    ridx = list(chain.from_iterable(sorted(ridx[first:end], key=site.__getitem__)
                                    for first, end in zip(cuts, cuts[1:]) if first != end))
    pick = _picker(ridx)  # one gather of the range records, applied to each column it needs
    r_site = pick(site)
    if not any(count % 2 for count in per_owner):
        # Common case: inside each group begins and ends alternate (B E B E ...), no nesting;
        # then the pairing is positional. (Every owner holding an even number of range records,
        # no pair straddles two owners.)
        r_kind = pick(kind)
        pairs = len(ridx) // 2
        if r_kind[0::2].count(abi.KIND_BEGIN) == pairs and r_kind[1::2].count(abi.KIND_END) == pairs \
                and r_site[0::2] == r_site[1::2]:
            r_ts, r_payload = pick(ts), pick(payload)
            return {"owner": list(chain.from_iterable(repeat(o, count // 2) for o, count in enumerate(per_owner))),
                    "site": list(r_site[0::2]), "begin_ns": list(r_ts[0::2]),
                    "end_ns": list(r_ts[1::2]), "begin_payload": list(r_payload[0::2]),
                    "end_payload": list(r_payload[1::2]), "depth": [0] * pairs, "begin_event": ridx[0::2],
                    "end_event": ridx[1::2]}
    key = list(zip(chain.from_iterable(map(repeat, range(len(per_owner)), per_owner)), r_site))
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


def _picker(positions: list[int]) -> Callable[[Sequence[int]], tuple[int, ...]]:
    """A function giving ``values[p]`` for every position, as a tuple, gathered in C by
    ``operator.itemgetter`` (a Python loop or ``map`` calls back into the interpreter once per
    element)."""
    if len(positions) < 2:  # itemgetter needs one position at least and returns one bare
        return lambda values: tuple(values[p] for p in positions)
    return itemgetter(*positions)


def _take(values: list[int], positions: list[int]) -> list[int]:
    """``values[p]`` for every position."""
    return list(_picker(positions)(values))


def _problem_at(problems: list[Problem], code: str, message: str, count: int, slots: list[int]) -> None:
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
