"""The ATREXLT1 buffer layout (ABI 1.0): header, 16-byte records, claim words.

Buffer = 64-byte header + capacity x 16-byte records + owner_count x 8-byte claim words.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = 0x31544C5845525441  # b"ATREXLT1" read as a little-endian u64
ABI_MAJOR = 1
ABI_MINOR = 0
HEADER_BYTES = 64
RECORD_BYTES = 16
CLAIM_BYTES = 8
HEADER_STRUCT = struct.Struct("<Q4H10IQ")
RECORD_STRUCT = struct.Struct("<QII")

STATUS_OVERFLOW = 1
STATUS_BAD_HEADER = 2
STATUS_BAD_OWNER = 4
STATUS_BAD_SM = 8
STATUS_DUPLICATE_OWNER = 16
STATUS_NAMES = {
    STATUS_OVERFLOW: "overflow",
    STATUS_BAD_HEADER: "bad_header",
    STATUS_BAD_OWNER: "bad_owner",
    STATUS_BAD_SM: "bad_sm",
    STATUS_DUPLICATE_OWNER: "duplicate_owner",
}

KIND_BEGIN = 0
KIND_END = 1
KIND_INSTANT = 2
KIND_COUNTER = 3
KIND_NAMES = ("begin", "end", "instant", "counter")

SITE_MASK = 0xFFFF
KIND_SHIFT = 16
SM_SHIFT = 18
SM_MASK = 0x3FF
FLAGS_SHIFT = 28
FLAGS_MASK = 0x7
COMMITTED = 1 << 31
MAX_RAW_BYTES = 1 << 30  # a raw buffer larger than this is not a capture episcope wrote


def status_names(status: int) -> list[str]:
    """Names of the set status bits, plus ``unknown_bits_0x..`` for bits ABI 1.0 does not define."""
    names = [name for bit, name in STATUS_NAMES.items() if status & bit]
    unknown = status & ~sum(STATUS_NAMES)
    if unknown:
        names.append(f"unknown_bits_{unknown:#x}")
    return names


def claim_word(cta: int, thread: int) -> int:
    return ((cta + 1) << 32) | (thread + 1)


def buffer_bytes(owner_count: int, records_per_owner: int) -> int:
    return HEADER_BYTES + owner_count * records_per_owner * RECORD_BYTES + owner_count * CLAIM_BYTES


class Header(NamedTuple):
    magic: int
    abi_major: int
    abi_minor: int
    header_bytes: int
    record_bytes: int
    capacity: int
    owner_count: int
    records_per_owner: int
    status: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    launch_id: int

    @classmethod
    def unpack(cls, data: bytes | memoryview) -> Header:
        f = HEADER_STRUCT.unpack_from(data, 0)
        return cls(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8],
                   (f[9], f[10], f[11]), (f[12], f[13], f[14]), f[15])

    def pack(self) -> bytes:
        return HEADER_STRUCT.pack(
            self.magic, self.abi_major, self.abi_minor, self.header_bytes, self.record_bytes,
            self.capacity, self.owner_count, self.records_per_owner, self.status,
            *self.grid, *self.block, self.launch_id,
        )

    def to_json(self) -> dict:
        return {
            "magic": f"{self.magic:#018x}",
            "abi": f"{self.abi_major}.{self.abi_minor}",
            "header_bytes": self.header_bytes,
            "record_bytes": self.record_bytes,
            "capacity": self.capacity,
            "owner_count": self.owner_count,
            "records_per_owner": self.records_per_owner,
            "status": self.status,
            "grid": list(self.grid),
            "block": list(self.block),
            "launch_id": self.launch_id,
        }


def new_header(grid, block, owner_count: int, records_per_owner: int, launch_id: int) -> Header:
    """The header a host writes before launch (status 0)."""
    return Header(MAGIC, ABI_MAJOR, ABI_MINOR, HEADER_BYTES, RECORD_BYTES,
                  owner_count * records_per_owner, owner_count, records_per_owner, 0,
                  tuple(int(v) for v in grid), tuple(int(v) for v in block), int(launch_id))


def empty_buffer(header: Header) -> bytearray:
    """A zeroed buffer with ``header`` in place: what a launch starts from."""
    data = bytearray(buffer_bytes(header.owner_count, header.records_per_owner))
    data[:HEADER_BYTES] = header.pack()
    return data
