"""Host-side writer of ATREXLT1 buffers, bit-compatible with the device probe.

Used to build captures on machines without a GPU (decoder tests, the decode benchmark) and
to document the layout in executable form: records land in their owner's slot range in
order, and the claim word of every owner with records is set.
"""

from __future__ import annotations

import numpy as np

from . import abi
from .manifest import Manifest


def encode(manifest: Manifest, owner, timestamp_ns, site, kind, payload, sm, flags=None) -> bytearray:
    """A buffer holding the given events; events of one owner keep their given order."""
    owner = np.asarray(owner, dtype=np.int64)
    order = np.argsort(owner, kind="stable")
    owner = owner[order]
    n = owner.size
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if n else np.zeros(0, np.int64)
    group = np.cumsum(np.r_[True, owner[1:] != owner[:-1]]) - 1 if n else np.zeros(0, np.int64)
    seq = np.arange(n) - starts[group] if n else np.zeros(0, np.int64)
    rpo = manifest.records_per_owner
    if n and seq.max() >= rpo:
        raise ValueError(f"an owner has more than records_per_owner={rpo} events")
    header = abi.new_header(manifest.grid, manifest.block, manifest.owner_count, rpo, manifest.launch_id)
    data = abi.empty_buffer(header)
    cap = header.capacity
    words = np.frombuffer(data, dtype="<u4", count=cap * 4, offset=abi.HEADER_BYTES).reshape(cap, 4)
    ts = np.asarray(timestamp_ns, dtype=np.uint64)[order]
    flags = np.zeros(n, np.uint32) if flags is None else np.asarray(flags, dtype=np.uint32)[order]
    tag = ((np.asarray(site, dtype=np.uint32)[order] & abi.SITE_MASK)
           | ((np.asarray(kind, dtype=np.uint32)[order] & 3) << abi.KIND_SHIFT)
           | ((np.asarray(sm, dtype=np.uint32)[order] & abi.SM_MASK) << abi.SM_SHIFT)
           | ((flags & abi.FLAGS_MASK) << abi.FLAGS_SHIFT) | np.uint32(abi.COMMITTED))
    slot = owner * rpo + seq
    words[slot, 0] = (ts & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    words[slot, 1] = (ts >> np.uint64(32)).astype(np.uint32)
    words[slot, 2] = np.asarray(payload, dtype=np.uint32)[order]
    words[slot, 3] = tag
    claims = np.frombuffer(data, dtype="<u8", count=manifest.owner_count, offset=abi.HEADER_BYTES + cap * 16)
    wpc = len(manifest.writers)
    for o in np.unique(owner).tolist():
        claims[o] = abi.claim_word(o // wpc, manifest.writers[o % wpc].thread)
    return data
