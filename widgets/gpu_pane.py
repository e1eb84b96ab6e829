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

    def compose_body(self):
        yield Static(id="gpu-body", classes="pane-body")

    def empty_note(self, state: EpisodeState) -> str | None:
        """No readings folds the pane with the reason (no GPU, not sampled, first sample due)."""
        if state.gpu is not None and state.gpu.gpus:
            return None
        if state.gpu is not None:
            return f"N/A — {state.gpu.unavailable or 'no GPU'}"
        return "sampling…" if self.sampled else "N/A — not sampled (archive, replay, or sampling off)"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        if not self.has_body or (previous is not None and previous.gpu == state.gpu):
            return
        body = reading_table(state.gpu) if state.gpu is not None else plain(self.empty_note(state), "dim")
        self.query_one("#gpu-body", Static).update(body)

    def full_text(self) -> tuple[str, str] | None:
        state = self.state
        if state is None:
            return None
        if state.gpu is None or not state.gpu.gpus:
            return "GPU", self.empty_note(state) or NA
        lines = [f"{gpu.index} {gpu.name or NA}: util {fmt(gpu.utilization_pct, '.0f', '%')}, "
                 f"memory {fmt(gpu.memory_used_mib, '.0f')}/{fmt(gpu.memory_total_mib, '.0f')} MiB, "
                 f"SM/mem {fmt(gpu.sm_clock_mhz, '.0f')}/{fmt(gpu.memory_clock_mhz, '.0f')} MHz, "
                 f"power {fmt(gpu.power_w, '.0f')}/{fmt(gpu.power_limit_w, '.0f')} W, "
                 f"temp {fmt(gpu.temperature_c, '.0f', '°C')}" for gpu in state.gpu.gpus]
        return "GPU", "\n".join(lines)
