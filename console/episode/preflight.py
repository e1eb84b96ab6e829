"""Can this machine run the GPU actions? Checked once, before any key launches one.

Three things decide it, each cheap: a GPU that NVML sees (the reading the console or
``status`` takes anyway), ``ncu`` on PATH (every profile action runs Nsight Compute), and a
``cupy`` this Python can import (the evaluator and the profiling driver use it; only its
presence is checked, importing it would take seconds and start CUDA). The result is an
event like a GPU reading, so it is in the state, in ``status --json`` and in a recording.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable

import msgspec

from console.gpu.sampler import GpuReading

PREFLIGHT_PATH = "preflight"  # the path of the preflight event: the host, not a file


class Preflight(msgspec.Struct, frozen=True):
    gpu: str | None = None  # why no GPU can be used (None: one is visible)
    ncu: str | None = None  # why ncu cannot run (None: it is on PATH)
    cupy: str | None = None  # why cupy cannot be imported (None: it can)

    def blocks(self, *, profiler: bool) -> str | None:
        """Why a GPU action cannot run here (None: it can); ``profiler``: it runs ncu."""
        reasons = [self.gpu, self.ncu if profiler else None, self.cupy]
        found = [reason for reason in reasons if reason]
        return "; ".join(found) if found else None


def check_preflight(reading: GpuReading, *, which: Callable[[str], str | None] = shutil.which,
                    has_module: Callable[[str], bool] | None = None) -> Preflight:
    """The preflight of this host, from a GPU reading just taken."""
    if reading.unavailable is not None:
        gpu: str | None = f"no GPU ({reading.unavailable})"
    elif not reading.gpus:
        gpu = "no GPU visible to NVML"
    else:
        gpu = None
    found = (has_module or _has_module)("cupy")
    return Preflight(
        gpu=gpu,
        ncu=None if which("ncu") else "ncu not on PATH (Nsight Compute)",
        cupy=None if found else "cupy not installed (pip install 'episcope-console[gpu]')",
    )


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
