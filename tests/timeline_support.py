"""Shared helpers for the timeline tests: real H200 fixtures and their mutations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from console.timeline import abi
from console.timeline.manifest import parse_dictionary, parse_manifest

FIXTURES = Path(__file__).parent / "fixtures" / "timeline"


def load(name: str):
    raw = (FIXTURES / f"{name}.bin").read_bytes()
    man = json.loads((FIXTURES / f"{name}.manifest.json").read_text())
    dic = json.loads((FIXTURES / "fixture.events.json").read_text())
    return raw, man, dic


def parsed(name: str):
    raw, man, dic = load(name)
    return bytearray(raw), parse_manifest(man), parse_dictionary(dic)


def records(buf: bytearray, header: abi.Header) -> np.ndarray:
    """Writable (capacity, 4) u32 view of the record region."""
    return np.frombuffer(buf, dtype="<u4", count=header.capacity * 4, offset=abi.HEADER_BYTES).reshape(-1, 4)


def claims(buf: bytearray, header: abi.Header) -> np.ndarray:
    return np.frombuffer(buf, dtype="<u8", count=header.owner_count,
                         offset=abi.HEADER_BYTES + header.capacity * abi.RECORD_BYTES)
