"""NVML samples for the GPU pane: every query may fail, and a failure reads N/A.

``pynvml`` (package nvidia-ml-py) is imported lazily so a machine without the driver, or
without the package, simply reports no GPU. Each field is queried on its own: a driver that
refuses the power reading must not hide the temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True, slots=True)
class GpuSample:
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

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One sampling pass: the GPUs seen, or why none could be read."""

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

    def __init__(self) -> None:
        self._nvml = None
        self._handles: list = []
        self._unavailable: str | None = None
        self._started = False

    def _start(self) -> None:
        self._started = True
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
        if self._nvml is None or not self._handles:
            return GpuReading((), self._unavailable or "no NVIDIA GPU found")
        return GpuReading(tuple(self._sample_one(i, h) for i, h in enumerate(self._handles)))

    def _sample_one(self, index: int, handle) -> GpuSample:
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
