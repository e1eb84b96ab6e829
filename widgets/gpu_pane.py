"""The GPU pane: NVML utilization, memory, clocks, power and temperature, N/A without a GPU.

Sampling runs in a worker thread every few seconds (an NVML call can block for tens of
milliseconds on a busy driver) and only the finished reading touches the screen.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import work
from textual.widgets import Static

from console.gpu.sampler import GpuReading, GpuSampler

from .common import NA, fmt
from .pane import Pane

SAMPLE_SECONDS = 2.0


def reading_table(reading: GpuReading) -> Table | Text:
    if not reading.gpus:
        return Text(f"N/A — {reading.unavailable or 'no GPU'}", style="dim")
    table = Table.grid(padding=(0, 1))
    for name in ("gpu", "util", "memory", "sm/mem MHz", "power", "temp"):
        table.add_column(name)
    table.add_row(*(Text(h, style="dim") for h in ("gpu", "util", "memory MiB", "sm/mem MHz", "power W", "temp")))
    for gpu in reading.gpus:
        memory = f"{fmt(gpu.memory_used_mib, '.0f')}/{fmt(gpu.memory_total_mib, '.0f')}"
        clocks = f"{fmt(gpu.sm_clock_mhz, '.0f')}/{fmt(gpu.memory_clock_mhz, '.0f')}"
        power = f"{fmt(gpu.power_w, '.0f')}/{fmt(gpu.power_limit_w, '.0f')}"
        table.add_row(
            f"{gpu.index} {gpu.name or NA}"[:24],
            fmt(gpu.utilization_pct, ".0f", "%"),
            memory,
            clocks,
            power,
            fmt(gpu.temperature_c, ".0f", "°C"),
        )
    return table


class GpuPane(Pane, can_focus=True):
    title = "GPU"

    def __init__(self, sampler: GpuSampler | None = None, *, sample: bool = True, number: int | None = None,
                 id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self.sampler = sampler or GpuSampler()
        self.sample_live = sample
        self.reading: GpuReading | None = None

    def compose(self):
        waiting = "sampling…" if self.sample_live else "N/A — not sampled (replay, or sampling off)"
        yield Static(Text(waiting, style="dim"), id="gpu-body")

    def on_mount(self) -> None:
        super().on_mount()
        if self.sample_live:
            self.sample()
            self.set_interval(SAMPLE_SECONDS, self.sample)

    @work(thread=True, exclusive=True, exit_on_error=False, group="gpu")
    def sample(self) -> None:
        reading = self.sampler.sample()
        self.app.call_from_thread(self.show_reading, reading)

    def show_reading(self, reading: GpuReading) -> None:
        if reading == self.reading:
            return
        self.reading = reading
        for body in self.query("#gpu-body").results(Static):  # absent while unmounting
            body.update(reading_table(reading))

    def on_unmount(self) -> None:
        self.sampler.close()
