"""The profile funnel: survey kernels → sol bottleneck → deep stall reasons and LOCALIZE
source lines, each profile labelled with the kernel.py hash it was taken on.

The kernel under the cursor is the one a deep profile (``d``) targets.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static

from console.episode.state import EpisodeState

from .common import NA, dig, fmt, get, number, short_sha, sync_table
from .pane import Pane

LEVEL_ORDER = {"survey": 0, "sol": 1, "deep": 2}


def kernel_duration_us(kernel) -> float | None:
    duration = number(get(kernel, "duration"))
    if duration is None:
        return None
    unit = get(kernel, "duration_unit") or "ns"
    return duration / 1000.0 if unit == "ns" else duration


def stall_reasons(profile) -> list[tuple[str, float]]:
    """Top stall reasons as (name, share) from whichever field the profile carries."""
    stalls = get(profile, "stalls") or get(profile, "top_stall_reasons") or dig(profile, "summary", "top_stall_reasons")
    out = []
    if isinstance(stalls, dict):
        stalls = list(stalls.items())
    for item in stalls or ():
        if isinstance(item, (tuple, list)) and len(item) >= 2:
            out.append((str(item[0]), number(item[1])))
        elif isinstance(item, dict):
            out.append((str(item.get("reason") or item.get("name")), number(item.get("value") or item.get("pct"))))
    return out


class ProfileFunnel(Pane):
    title = "Profile funnel"

    DEFAULT_CSS = """
    ProfileFunnel DataTable { height: 1fr; }
    ProfileFunnel #funnel-detail { height: auto; max-height: 8; }
    """

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._kernels: dict[str, object] = {}
        self._detail_key = None

    def compose(self):
        table = DataTable(id="funnel-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("kernel", "µs", "SM%", "mem%", "occ%", "bound", "level")
        yield table
        yield Static(id="funnel-detail")

    def latest_profiles(self, state: EpisodeState) -> list:
        return sorted(state.profiles, key=lambda p: (LEVEL_ORDER.get(get(p, "level"), -1), str(get(p, "dir"))))

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        if previous is not None and previous.profiles == state.profiles and previous.git == state.git \
                and self._detail_key == self.filter_text:
            return
        self._detail_key = self.filter_text
        rows = []
        self._kernels = {}
        for profile in self.latest_profiles(state):
            level = get(profile, "level") or NA
            for kernel in get(profile, "kernels") or ():
                name = get(kernel, "name")
                if not name:
                    continue
                key = f"{get(profile, 'dir')}::{name}"
                self._kernels[key] = kernel
                rows.append(
                    (
                        key,
                        (
                            name,
                            fmt(kernel_duration_us(kernel), ".2f"),
                            fmt(number(get(kernel, "compute_sol_pct")), ".1f"),
                            fmt(number(get(kernel, "mem_sol_pct")), ".1f"),
                            fmt(number(get(kernel, "occupancy_pct")), ".1f"),
                            fmt(get(kernel, "bound")),
                            level,
                        ),
                    )
                )
        sync_table(self.query_one(DataTable), rows, self.filter_text)
        self.query_one("#funnel-detail", Static).update(self._detail(state))

    def selected_kernel(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = list(table.rows)[table.cursor_row].value
        return get(self._kernels.get(key), "name")

    def _detail(self, state: EpisodeState) -> Text:
        profiles = self.latest_profiles(state)
        if not profiles:
            return Text("no profiles yet (s survey, o sol, d deep, S --source)", style="dim")
        profile = profiles[-1]
        current = get(state.git, "kernel_sha256")
        taken = get(profile, "kernel_sha256")
        text = Text()
        text.append(f"{get(profile, 'level') or NA} {get(profile, 'dir') or NA}\n", style="bold")
        stale = taken and current and taken != current
        text.append("kernel.py ")
        text.append(short_sha(taken, 12), style="red bold" if stale else "cyan")
        text.append("  (stale: kernel.py changed since)\n" if stale else "\n", style="red")
        text.append(f"bottleneck {fmt(get(profile, 'bottleneck'))}\n")
        stalls = stall_reasons(profile)
        if stalls:
            text.append("stalls " + ", ".join(f"{n} {fmt(v, '.1f')}" for n, v in stalls[:5]) + "\n")
        symptoms = get(profile, "symptoms") or ()
        if symptoms:
            text.append("SYMPTOMS " + ", ".join(symptoms) + "\n", style="yellow")
        for line in list(get(profile, "localize") or ())[:3]:
            text.append(f"LOCALIZE {line}\n", style="cyan")
        return text
