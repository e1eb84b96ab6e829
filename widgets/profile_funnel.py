"""The profile funnel: survey kernels → sol bottleneck → deep stall reasons and LOCALIZE
evidence, each profile labelled with the kernel.py hash it was taken on.

Rows are the kernels of every profile directory (``console.profiling.result.ProfileResult``),
survey first, each with the workload shape it was profiled on; the detail under the table
explains the profile of the selected row (Enter shows it uncut). The kernel under the cursor
is the one a deep profile (``d``) targets; until the operator moves it, the cursor follows
the episode's dominant kernel (``EpisodeState.dominant_kernel``), never an input generator.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable, Static

from console.episode.kernels import profile_shape
from console.episode.state import EpisodeState
from console.episode.text import visible

from .common import NA, add_columns, fmt, plain, selected_key, short_sha, sync_table
from .pane import Pane, PaneTable

if TYPE_CHECKING:
    from console.formats.profile_json import ProfileKernel
    from console.profiling.result import ProfileResult

LEVEL_ORDER = {"survey": 0, "sol": 1, "deep": 2}
SEVERITY_STYLES = {"high": "bold red", "medium": "yellow", "low": "dim"}
KERNEL_WIDTH = 22  # longer kernel names are cut in the table; Enter shows the row whole
SHORT_DETAIL = 2  # lines of the detail on a short terminal (Enter shows it whole)


def kernel_duration_us(kernel: ProfileKernel) -> float | None:
    return None if kernel.duration_ns is None else kernel.duration_ns / 1000.0


def funnel_order(profiles: Iterable[ProfileResult]) -> list[ProfileResult]:
    """Survey, then sol, then deep (then anything else), by directory within a level."""
    return sorted(profiles, key=lambda p: (LEVEL_ORDER.get(p.level or "", len(LEVEL_ORDER)), p.dir))


class ProfileFunnel(Pane):
    title = "Profile funnel"

    DEFAULT_CSS = """
    ProfileFunnel DataTable { height: 1fr; min-height: 3; }
    ProfileFunnel #funnel-detail { height: auto; max-height: 9; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._rows: dict[str, tuple[ProfileResult, ProfileKernel]] = {}  # row key -> (profile, kernel)
        self._shown_filter: str | None = None
        self._detail_for: tuple = (None, None, False)  # (profile, current kernel.py hash, drawn)
        self._followed: str | None = None  # the row key the cursor was put on for the dominant kernel

    def compose_body(self):
        table = PaneTable(id="funnel-table", cursor_type="row", zebra_stripes=True, classes="pane-body")
        table.add_column(Text("kernel"), width=KERNEL_WIDTH)
        add_columns(table, "shape", "µs", "SM%", "mem%", "occ%", "bound", "level")
        yield table
        yield Static(id="funnel-detail", classes="pane-body")

    def empty_note(self, state: EpisodeState) -> str | None:
        return None if state.profiles else "no profiles yet (s survey, o sol, d deep)"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        if not self.has_body:
            return
        if previous is not None and previous.profiles == state.profiles and previous.git == state.git \
                and self._shown_filter == self.filter_text:
            return
        self._shown_filter = self.filter_text
        rows = []
        self._rows = {}
        for profile in funnel_order(state.profiles):
            level = profile.level or NA
            for kernel in profile.kernels:
                key = f"{profile.dir}::{kernel.name}"
                self._rows[key] = (profile, kernel)
                rows.append(
                    (
                        key,
                        (
                            plain(kernel.name, "bold" if kernel.name == profile.dominant_kernel else ""),
                            fmt(profile_shape(profile.dir)),
                            fmt(kernel_duration_us(kernel), ".2f"),
                            fmt(kernel.compute_sol_pct, ".1f"),
                            fmt(kernel.mem_sol_pct, ".1f"),
                            fmt(kernel.occupancy_pct, ".1f"),
                            fmt(kernel.bound),
                            level,
                        ),
                    )
                )
        table = self.query_one(DataTable)
        sync_table(table, rows, self.filter_text)
        self._follow_dominant(table, state.dominant_kernel)
        self._show_detail()

    def fit_short(self, short: bool) -> None:
        super().fit_short(short)
        for detail in self.query("#funnel-detail"):
            detail.styles.max_height = SHORT_DETAIL if short else None

    def _follow_dominant(self, table: DataTable, dominant: str | None) -> None:
        """Put the cursor on the dominant kernel's first row, unless the operator moved it."""
        keys = [row_key.value for row_key in table.rows]
        current = keys[table.cursor_row] if keys and 0 <= table.cursor_row < len(keys) else None
        if self._followed is not None and current != self._followed:
            return  # the operator chose another row
        target = next((key for key in keys if self._rows[key][1].name == dominant), None)
        if target is None:
            return
        if target != current:
            table.move_cursor(row=keys.index(target), animate=False)
        self._followed = target

    def _selected(self) -> tuple[ProfileResult, ProfileKernel] | tuple[None, None]:
        if not self.has_body:
            return None, None
        key = selected_key(self.query_one(DataTable))
        return (None, None) if key is None else self._rows.get(key, (None, None))

    def selected_kernel(self) -> str | None:
        kernel = self._selected()[1]
        return kernel.name if kernel is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        profile, _ = self._selected()
        if profile is None and self.state is not None and self.state.profiles:
            profile = funnel_order(self.state.profiles)[-1]
        current = self.state.git.kernel_sha256 if self.state is not None and self.state.git is not None else None
        shown_profile, shown_sha, drawn = self._detail_for
        if drawn and profile is shown_profile and current == shown_sha:
            return
        self._detail_for = (profile, current, True)
        root = (self.state.worktree or self.state.campaign_root) if self.state is not None else None
        self.query_one("#funnel-detail", Static).update(self.detail(profile, current, root))

    @staticmethod
    def detail(profile: ProfileResult | None, current_sha: str | None, root: str | None = None) -> Text:
        if profile is None:
            return Text("no profiles yet (s survey, o sol, d deep, S --source)", style="dim")
        text = Text()
        directory = profile.dir
        if root and directory.startswith(root.rstrip("/") + "/"):
            directory = directory[len(root.rstrip("/")) + 1:]
        text.append(visible(f"{profile.level or NA} {directory}") + "\n", style="bold")
        taken = profile.kernel_sha256
        stale = bool(taken and current_sha and taken != current_sha)
        text.append("kernel.py ")
        text.append(short_sha(taken, 12), style="red bold" if stale else "cyan")
        text.append("  (stale: kernel.py changed since)" if stale else "", style="red")
        text.append(f"  bottleneck {fmt(profile.bottleneck)}  dominant {fmt(profile.dominant_kernel)}\n")
        if profile.stalls:
            text.append(visible("stalls " + ", ".join(f"{name} {value:.1f}" for name, value in profile.stalls[:5])) + "\n")
        for pattern_id, severity, label, evidence in profile.patterns[:3]:
            text.append(visible(f"{pattern_id} {label} "), style=SEVERITY_STYLES.get(severity, ""))
            text.append(visible(evidence[0] if evidence else "") + "\n", style="dim")
        if profile.aka_patterns is not None:  # AKA's classifier on the same metrics, beside episcope's
            named = ", ".join(f"{p.id} {p.label}" for p in profile.aka_patterns) or "no pattern"
            text.append(visible(f"AKA {named}") + "\n", style="magenta")
        if profile.symptoms:
            text.append(visible("SYMPTOMS " + ", ".join(profile.symptoms)) + "\n", style="yellow")
        if profile.localize:
            text.append(visible("LOCALIZE " + ", ".join(profile.localize)) + "\n", style="cyan")
        text.rstrip()
        return text

    def full_text(self) -> tuple[str, str] | None:
        profile, kernel = self._selected()
        if profile is None or kernel is None:
            return None
        current = self.state.git.kernel_sha256 if self.state is not None and self.state.git is not None else None
        root = (self.state.worktree or self.state.campaign_root) if self.state is not None else None
        table = self.query_one(DataTable)
        labels = [str(column.label) for column in table.columns.values()]
        cells = [getattr(cell, "plain", str(cell)) for cell in table.get_row_at(table.cursor_row)]
        row = "\n".join(f"{label}: {cell}" for label, cell in zip(labels, cells, strict=True))
        return f"{kernel.name} ({profile.level or NA})", f"{kernel.name}\n{row}\n\n{self.detail(profile, current, root).plain}"
