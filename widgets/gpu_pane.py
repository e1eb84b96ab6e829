"""The GPU pane: the state's latest NVML reading (utilization, memory, clocks, power,
temperature), N/A without a GPU.

The pane samples nothing: the live console folds GPU readings into the state like any other
event (so they are recorded and replayed), and the pane draws the latest one.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from console.episode.state import EpisodeState

from .common import NA, fmt, plain
from .pane import Pane


def reading_table(reading) -> Table | Text:  # EpisodeState.gpu (widgets do not import console.gpu)
    if not reading.gpus:
        return plain(f"N/A — {reading.unavailable or 'no GPU'}", "dim")
    table = Table.grid(padding=(0, 1))
    for name in ("gpu", "util", "memory", "sm/mem MHz", "power", "temp"):
        table.add_column(name)
    table.add_row(*(Text(h, style="dim") for h in ("gpu", "util", "memory MiB", "sm/mem MHz", "power W", "temp")))
    for gpu in reading.gpus:
        memory = f"{fmt(gpu.memory_used_mib, '.0f')}/{fmt(gpu.memory_total_mib, '.0f')}"
        clocks = f"{fmt(gpu.sm_clock_mhz, '.0f')}/{fmt(gpu.memory_clock_mhz, '.0f')}"
        power = f"{fmt(gpu.power_w, '.0f')}/{fmt(gpu.power_limit_w, '.0f')}"
        table.add_row(
            plain(f"{gpu.index} {gpu.name or NA}"[:24]),
            Text(fmt(gpu.utilization_pct, ".0f", "%")),
            Text(memory),
            Text(clocks),
            Text(power),
            Text(fmt(gpu.temperature_c, ".0f", "°C")),
        )
    return table


class GpuPane(Pane, can_focus=True):
    title = "GPU"

    def __init__(self, *, sampled: bool = True, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self.sampled = sampled  # whether readings are expected (live with sampling on)

    def compose(self):
        waiting = "sampling…" if self.sampled else "N/A — not sampled (replay, or sampling off)"
        yield Static(Text(waiting, style="dim"), id="gpu-body")

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        if state.gpu is None or (previous is not None and previous.gpu == state.gpu):
            return
        self.query_one("#gpu-body", Static).update(reading_table(state.gpu))
