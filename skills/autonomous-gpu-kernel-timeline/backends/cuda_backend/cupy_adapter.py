"""cupy adapter for the ATREXLT1 probe: buffer set-up, source embedding, raw capture.

Runs on the GPU machine with the standard library, numpy and cupy only.

    buf = TimelineBuffer(manifest)              # header written, records and claims zeroed
    mod = compile_module(kernel_src, dictionary, enabled=True, source_name="kernel.cu")
    mod.get_function("k")(grid, block, (..., buf.ptr))
    buf.save("capture.bin")                     # raw bytes, written atomically
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np

HEADER_PATH = Path(__file__).with_name("atrex_timeline.cuh")
_ROOT = Path(__file__).resolve().parents[4]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from console.formats.plainjson import atomic_write_bytes  # noqa: E402
from console.timeline import abi  # noqa: E402


def _cupy():
    import cupy  # imported late: this module is importable (and testable) without a GPU

    return cupy


def site_constants(dictionary: dict | None) -> str:
    """``constexpr`` site ids named after the dictionary, e.g. ``atrex_sites::mainloop``."""
    if not dictionary:
        return ""
    lines = ["namespace atrex_sites {"]
    for site in dictionary.get("sites", []):
        ident = re.sub(r"\W", "_", site["name"])
        if not ident or ident[0].isdigit():
            ident = "_" + ident
        lines.append(f"constexpr unsigned int {ident} = {int(site['site_id'])}u;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def instrument_source(kernel_source: str, dictionary: dict | None = None, *, enabled: bool = True,
                      source_name: str = "kernel.cu") -> str:
    """The probe header, site constants, then the kernel with a ``#line`` so compiler
    messages point at the candidate's own lines."""
    prefix = "#define ATREX_TIMELINE_ENABLED 1\n" if enabled else ""
    return (prefix + HEADER_PATH.read_text() + "\n" + site_constants(dictionary)
            + f'#line 1 "{source_name}"\n' + kernel_source)


def compile_module(kernel_source: str, dictionary: dict | None = None, *, enabled: bool = True,
                   source_name: str = "kernel.cu", options: tuple[str, ...] = ("-std=c++17",),
                   name_expressions=None):
    cupy = _cupy()
    code = instrument_source(kernel_source, dictionary, enabled=enabled, source_name=source_name)
    return cupy.RawModule(code=code, options=options, name_expressions=name_expressions)


class TimelineBuffer:
    """A device buffer laid out for one launch described by ``manifest``."""

    def __init__(self, manifest: dict) -> None:
        cupy = _cupy()
        writers = len(manifest["owner_layout"]["writers"])
        grid, block = manifest["grid"], manifest["block"]
        owners = grid[0] * grid[1] * grid[2] * writers
        self.header = abi.new_header(grid, block, owners, manifest["records_per_owner"], manifest["launch_id"])
        self.nbytes = abi.buffer_bytes(owners, manifest["records_per_owner"])
        self.array = cupy.zeros(self.nbytes, dtype=cupy.uint8)
        self.array[: abi.HEADER_BYTES] = cupy.asarray(np.frombuffer(self.header.pack(), dtype=np.uint8))

    @property
    def ptr(self):
        """Pass as the kernel's ``void*`` argument."""
        return self.array.data.ptr

    def reset(self) -> None:
        self.array[abi.HEADER_BYTES:] = 0
        self.array[: abi.HEADER_BYTES] = _cupy().asarray(np.frombuffer(self.header.pack(), dtype=np.uint8))

    def raw(self) -> bytes:
        return _cupy().asnumpy(self.array).tobytes()

    def save(self, path: str | os.PathLike) -> bytes:
        data = self.raw()
        atomic_write_bytes(path, data)
        return data
