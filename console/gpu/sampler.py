"""NVML readings: every query may fail, and a failure reads N/A (None, never 0).

A reading is an event like any other (kind ``gpu``, path ``nvml``): the live console feeds
each one through the reducer, so it is recorded and replayed, and ``status`` takes one of
its own. ``pynvml`` (package nvidia-ml-py) is imported lazily so a machine without the
driver, or without the package, simply reports no GPU. Each field is queried on its own: a
driver that refuses the power reading must not hide the temperature.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

NVML_LIBRARY = "libnvidia-ml.so.1"  # the name pynvml opens on Linux
NVML_PATH = "nvml"  # the path of every GPU reading event: it comes from the driver, not a file


class GpuSample(msgspec.Struct, frozen=True):
    index: int
    name: str | None = None
    uuid: str | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None


class GpuReading(msgspec.Struct, frozen=True):
    """One sampling pass: the GPUs seen, or why none could be read."""

    sampled_at: float | None = None  # wall clock (unix seconds)
    gpus: tuple[GpuSample, ...] = ()
    unavailable: str | None = None  # one line: no driver, no package, no device


def _try(query: Callable[[], object]) -> object | None:
    try:
        return query()
    except Exception:  # NVMLError and friends: that one field is N/A
        return None


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


class GpuSampler:
    """Keeps NVML initialised for the console's lifetime; ``sample()`` never raises."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._unavailable: str | None = None
        self._started = False

    def _start(self) -> None:
        self._started = True
        if sys.platform.startswith("linux"):
            # pynvml's import costs 50-200 ms and loads subprocess (through ctypes.util);
            # the driver library it would open decides whether there is anything to read,
            # so a host without it is told so by that same dlopen, without the import.
            import ctypes  # here, not above: the registry imports this module for GpuReading alone

            try:
                ctypes.CDLL(NVML_LIBRARY)
            except OSError:
                self._unavailable = f"NVML unavailable: no {NVML_LIBRARY} (no NVIDIA driver)"
                return
        try:
            import pynvml
        except ImportError:
            self._unavailable = "NVML not installed (nvidia-ml-py)"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            self._unavailable = f"NVML unavailable: {' '.join(str(exc).split()) or type(exc).__name__}"
            return
        self._nvml = pynvml
        count = _try(pynvml.nvmlDeviceGetCount)
        if not isinstance(count, int) or count == 0:
            self._unavailable = "no NVIDIA GPU found"
            return
        for index in range(count):
            self._handles.append(_try(lambda i=index: pynvml.nvmlDeviceGetHandleByIndex(i)))

    def sample(self) -> GpuReading:
        if not self._started:
            self._start()
        at = self._clock()
        if self._nvml is None or not self._handles:
            return GpuReading(at, (), self._unavailable or "no NVIDIA GPU found")
        return GpuReading(at, tuple(self._sample_one(i, h) for i, h in enumerate(self._handles)))

    def _sample_one(self, index: int, handle: Any) -> GpuSample:
        if handle is None:
            return GpuSample(index)
        nv = self._nvml
        util = _try(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        memory = _try(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        power = _try(lambda: nv.nvmlDeviceGetPowerUsage(handle))
        limit = _try(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle))
        return GpuSample(
            index=index,
            name=_text(_try(lambda: nv.nvmlDeviceGetName(handle))),
            uuid=_text(_try(lambda: nv.nvmlDeviceGetUUID(handle))),
            utilization_pct=_number(getattr(util, "gpu", None)),
            memory_used_mib=_mib(getattr(memory, "used", None)),
            memory_total_mib=_mib(getattr(memory, "total", None)),
            sm_clock_mhz=_number(_try(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))),
            memory_clock_mhz=_number(_try(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))),
            power_w=_number(power) / 1000.0 if _number(power) is not None else None,
            power_limit_w=_number(limit) / 1000.0 if _number(limit) is not None else None,
            temperature_c=_number(_try(lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))),
        )

    def close(self) -> None:
        if self._nvml is not None:
            _try(self._nvml.nvmlShutdown)
            self._nvml = None
            self._handles = []


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _mib(value: object) -> float | None:
    number = _number(value)
    return None if number is None else number / (1024 * 1024)
