"""The profile funnel: survey kernels → sol bottleneck → deep stall reasons and LOCALIZE
evidence, each profile labelled with the kernel.py hash it was taken on.

Rows are the kernels of every profile directory (``console.profiling.result.ProfileResult``),
survey first; the detail under the table explains the profile of the selected row. The
kernel under the cursor is the one a deep profile (``d``) targets.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static

from console.episode.state import EpisodeState

from .common import NA, fmt, get, short_sha, sync_table
from .pane import Pane

LEVEL_ORDER = {"survey": 0, "sol": 1, "deep": 2}
SEVERITY_STYLES = {"high": "bold red", "medium": "yellow", "low": "dim"}


def kernel_duration_us(kernel) -> float | None:
    duration = get(kernel, "duration_ns")
    return None if duration is None else duration / 1000.0


def funnel_order(profiles) -> list:
    """Survey, then sol, then deep (then anything else), by directory within a level."""
    return sorted(profiles, key=lambda p: (LEVEL_ORDER.get(get(p, "level"), len(LEVEL_ORDER)), str(get(p, "dir"))))


class ProfileFunnel(Pane):
    title = "Profile funnel"

    DEFAULT_CSS = """
    ProfileFunnel DataTable { height: 1fr; }
    ProfileFunnel #funnel-detail { height: auto; max-height: 8; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._rows: dict[str, tuple[object, object]] = {}  # row key -> (profile, kernel)
        self._shown_filter: str | None = None
        self._detail_for: tuple = (None, None, False)  # (profile, current kernel.py hash, drawn)

    def compose(self):
        table = DataTable(id="funnel-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("kernel", "µs", "SM%", "mem%", "occ%", "bound", "level")
        yield table
        yield Static(id="funnel-detail")

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        if previous is not None and previous.profiles == state.profiles and previous.git == state.git \
                and self._shown_filter == self.filter_text:
            return
        self._shown_filter = self.filter_text
        rows = []
        self._rows = {}
        for profile in funnel_order(state.profiles):
            level = get(profile, "level") or NA
            dominant = get(profile, "dominant_kernel")
            for kernel in get(profile, "kernels") or ():
                name = get(kernel, "name")
                key = f"{get(profile, 'dir')}::{name}"
                self._rows[key] = (profile, kernel)
                rows.append(
                    (
                        key,
                        (
                            Text(name, style="bold" if name == dominant else ""),
                            fmt(kernel_duration_us(kernel), ".2f"),
                            fmt(get(kernel, "compute_sol_pct"), ".1f"),
                            fmt(get(kernel, "mem_sol_pct"), ".1f"),
                            fmt(get(kernel, "occupancy_pct"), ".1f"),
                            fmt(get(kernel, "bound")),
                            level,
                        ),
                    )
                )
        sync_table(self.query_one(DataTable), rows, self.filter_text)
        self._show_detail()

    def _selected(self) -> tuple[object, object] | tuple[None, None]:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None, None
        key = list(table.rows)[table.cursor_row].value
        return self._rows.get(key, (None, None))

    def selected_kernel(self) -> str | None:
        return get(self._selected()[1], "name")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        profile, _ = self._selected()
        if profile is None and self.state is not None and self.state.profiles:
            profile = funnel_order(self.state.profiles)[-1]
        current = get(self.state.git, "kernel_sha256") if self.state is not None else None
        shown_profile, shown_sha, drawn = self._detail_for
        if drawn and profile is shown_profile and current == shown_sha:
            return
        self._detail_for = (profile, current, True)
        root = (self.state.worktree or self.state.campaign_root) if self.state is not None else None
        self.query_one("#funnel-detail", Static).update(self.detail(profile, current, root))

    @staticmethod
    def detail(profile, current_sha: str | None, root: str | None = None) -> Text:
        if profile is None:
            return Text("no profiles yet (s survey, o sol, d deep, S --source)", style="dim")
        text = Text()
        directory = str(get(profile, "dir") or NA)
        if root and directory.startswith(root.rstrip("/") + "/"):
            directory = directory[len(root.rstrip("/")) + 1:]
        text.append(f"{get(profile, 'level') or NA} {directory}\n", style="bold")
        taken = get(profile, "kernel_sha256")
        stale = bool(taken and current_sha and taken != current_sha)
        text.append("kernel.py ")
        text.append(short_sha(taken, 12), style="red bold" if stale else "cyan")
        text.append("  (stale: kernel.py changed since)" if stale else "", style="red")
        text.append(f"  bottleneck {fmt(get(profile, 'bottleneck'))}  dominant {fmt(get(profile, 'dominant_kernel'))}\n")
        stalls = get(profile, "stalls") or ()
        if stalls:
            text.append("stalls " + ", ".join(f"{name} {value:.1f}" for name, value in stalls[:5]) + "\n")
        for pattern_id, severity, label, evidence in list(get(profile, "patterns") or ())[:3]:
            text.append(f"{pattern_id} {label} ", style=SEVERITY_STYLES.get(severity, ""))
            text.append((evidence[0] if evidence else "") + "\n", style="dim")
        symptoms = get(profile, "symptoms") or ()
        if symptoms:
            text.append("SYMPTOMS " + ", ".join(symptoms) + "\n", style="yellow")
        localize = get(profile, "localize") or ()
        if localize:
            text.append("LOCALIZE " + ", ".join(localize) + "\n", style="cyan")
        text.rstrip()
        return text
