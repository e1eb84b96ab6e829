"""The episode header: campaign, episode, mode, supervisor phase, branch, HEAD vs candidate,
the incumbent figure and the job slots in use."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from console.episode.state import EpisodeState
from console.episode.summary import episode_facts, running_jobs
from console.formats.job_record import MAX_SANDBOX_JOBS

from .common import NA, fmt, plain, short_sha


def incumbent_figure(state: EpisodeState) -> str:
    """The latest point of the incumbent curve: latency in µs, or a score."""
    if not state.incumbent_curve:
        return NA
    version, value, kind = state.incumbent_curve[-1]
    unit = "" if kind == "performance_score" else " µs"
    return f"v{version} {value:.3f}{unit}"


class EpisodeHeader(Widget):
    # A fixed height: a new header then repaints two lines instead of re-laying out the screen.
    DEFAULT_CSS = """
    EpisodeHeader {
        height: 2;
        padding: 0 1;
        background: $boost;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, mode_label: str = "LIVE", id: str | None = None) -> None:
        super().__init__(id=id)
        self.mode_label = mode_label
        self._key: tuple | None = None
        self._lines = Text("")

    def render(self) -> Text:
        return self._lines

    @property
    def lines(self) -> Text:
        """The two lines as drawn last, uncut (help shows them whole)."""
        return self._lines.copy()

    def show_state(self, state: EpisodeState, *, extra: str = "", launched: int = 0) -> None:
        active = state.active_episode
        facts = episode_facts(state)
        episode = facts["number"] or (state.live_memory.episode if state.live_memory else None)
        git = state.git
        candidate = ((git.candidate_commit if git else None) or (state.handoff.candidate_commit if state.handoff else None)
                     or (state.journal.candidate_commit if state.journal else None))
        slots = max(running_jobs(state), launched)
        key = (
            state.campaign,
            episode,
            facts["mode"],
            facts["phase"] or facts["status"],  # an archived episode has no supervisor phase, only its outcome
            (git.branch if git else None) or (active.episode_branch if active else None),
            git.head if git else None,
            candidate,
            incumbent_figure(state),
            slots,
            state.active_phase.phase if state.active_phase else None,
            extra,
            len(state.alerts),
            state.scanning,
        )
        if key == self._key:
            return
        self._key = key
        # Two lines, most telling first: a narrow terminal cuts the tail of a line, not every column.
        slot_style = "bold red" if slots >= MAX_SANDBOX_JOBS else "bold"
        head_vs = "=" if key[5] and candidate and key[5] == candidate else "≠" if key[5] and candidate else " "
        top = Text.assemble(
            (f" {self.mode_label} ", "reverse bold"), " ", plain(key[0] or state.campaign_root, "bold"),
            "  episode ", (fmt(episode), "bold"), " ", (fmt(key[2]), "bold"),
            "  jobs ", (f"{slots}/{MAX_SANDBOX_JOBS}", slot_style), "  alerts ", (str(key[11]), "bold red" if key[11] else "bold"),
            "  supervisor ", (fmt(key[3]), "bold"), "  phase ", (fmt(key[9]), "bold"),
        )
        bottom = Text.assemble(
            # The first paint, before any file is read, says so: it is not an empty episode.
            ("scanning the workspace…  " if state.scanning else "", "bold yellow"),
            "incumbent ", (key[7], "bold green"),
            "  HEAD ", (short_sha(key[5]), "cyan"), f" {head_vs} cand ", (short_sha(candidate), "cyan"),
            "  branch ", (fmt(key[4]), "cyan"),
            (f"  {extra}" if extra else "", "yellow"),
        )
        self._lines = Text("\n").join((top, bottom))
        self.refresh()
