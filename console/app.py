"""The operator console: one Textual app for live watching and for replay.

The app never parses files. Live, an async worker on the app's own loop follows the
workspace through ``Session.follow_events`` (watchfiles) and posts ``EpisodeChanged`` per
batch of new events; queued ones collapse into one, and a draw takes the newest state at
most five times a second, so a flood of events costs a few snapshots and redraws a second
and each pane touches only the cells that changed. In replay, the same panes draw the
states of a ``Replay`` on a virtual clock.

The first frame is the layout saying "scanning…" (benchmarks/console_first_paint.py): what
it does not need is imported where it is first used, after it (the session's ingest and
reducer, the GPU sampler and preflight, the keymap reader, the filter line, the diff, every
other screen).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.actions import parse as parse_action
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Container
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import DataTable, Input

from console.actions import (
    ACTIONS,
    ACTIONS_BY_NAME,
    TIMELINE_BASELINE_SOURCE,
    TIMELINE_BENCH,
    ActionRefused,
    JobLauncher,
    cancel,
)
from console.episode import events as ev
from console.episode.incumbent import abba_plan
from console.episode.job_outcome import failure_line, newly_failed
from console.episode.state import EpisodeState
from console.episode.summary import running_jobs
from console.episode.text import visible
from console.formats.job_record import MAX_SANDBOX_JOBS
from console.screens.dashboard import DashboardScreen
from widgets.abba_stats import AbbaStats
from widgets.alerts import AlertsPane
from widgets.gpu_pane import GpuPane
from widgets.header import EpisodeHeader
from widgets.jobs_pane import JobsPane
from widgets.key_bar import KeyBar
from widgets.pane import Pane, PaneRow
from widgets.phase_timeline import PhaseTimelinePane
from widgets.profile_funnel import ProfileFunnel
from widgets.replay_bar import ReplayBar
from widgets.unreadable_list import UnreadableList
from widgets.versions import VersionsPane

if TYPE_CHECKING:
    from console.episode.preflight import Preflight
    from console.episode.session import Session
    from console.episode.workspace import Workspace
    from console.gpu.sampler import GpuReading
    from console.screens.timeline import TimelineScreen

DRAW_SECONDS = 0.2  # at most five redraws a second, however fast events arrive
BACKLOG_MESSAGES = 20  # the follower reads no further while the app has this many messages to handle
TICK_SECONDS = 1.0  # the running phase grows this often without new events
REPLAY_SECONDS = 0.1
GPU_SAMPLE_SECONDS = 2.0  # an NVML pass can block for tens of milliseconds on a busy driver
REPLAY_ACTIONS = frozenset({"toggle_play", "speed", "step", "jump", "seek_end"})
NO_EPISODES = "no episode in this campaign yet"


def markup_text(text: str) -> str:
    """``text`` as markup that reads back as exactly ``text``.

    Textual's ``escape`` leaves alone a ``[`` its parser still takes as a tag (``[ @click=…]``
    with a space, ``[B]``, ``[$x]``); a backslash before every ``[`` leaves no tag at all (the
    parser keeps other backslashes as they are)."""
    return text.replace("[", "\\[")


class EpiscopeCommands(Provider):
    """Command palette entries built from what makes sense on the current state.

    Titles name jobs, kernels and receipts (agent-written): control characters are made
    visible, and the palette reads its strings (the match display, the help) as markup, so
    they go in as markup of the text itself (``markup_text``).
    """

    async def discover(self) -> Hits:
        for title, help_text, callback in self.app.palette_commands():
            title, help_text = visible(title), visible(help_text)
            yield DiscoveryHit(Text(title), callback, text=title, help=markup_text(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self.app.palette_commands():
            title, help_text = visible(title), visible(help_text)
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(markup_text(title)), callback, text=title,
                          help=markup_text(help_text))


class EpiscopeApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "episcope"
    COMMANDS = App.COMMANDS | {EpiscopeCommands}
    ENABLE_COMMAND_PALETTE = True

    # Every binding has an id (the keymap in config.toml remaps by id) and says what it does
    # in its tooltip, which the help screen lists; bindings that share a tooltip share a row.
    BINDINGS = [
        Binding("q", "quit", "quit", tooltip="quit (jobs this console started are ended)", id="app.quit"),
        Binding("question_mark,f1", "help", "help", tooltip="this help: every key and what it does now",
                id="app.help"),
        Binding("escape", "back", "back", show=False, tooltip="back: close the filter, clear it, or leave a screen",
                id="app.back"),
        # A priority binding, run as the key arrives, before the keys typed after it: those are
        # the filter's text, not the table's keys (a binding of the table's would run later).
        Binding("slash", "filter", "filter", tooltip="filter the focused table (Esc clears)", id="app.filter",
                priority=True),
        Binding("t", "open_timeline", "timeline", tooltip="open the newest intra-kernel timeline receipt",
                id="app.timeline"),
        Binding("D", "diff", "diff", tooltip="what changed in kernel.py: the working tree, or the version selected "
                "in pane 6, against the incumbent, with the latency change", id="app.diff"),
        Binding("h", "episodes", "history", tooltip="the campaign's history: every episode, archived or live, with "
                "its outcome, verdict and version", id="app.episodes"),
        *[Binding(str(n), f"focus_pane({n})", f"pane {n}", show=False, tooltip="move to that pane (Tab steps)",
                  id=f"app.pane{n}") for n in range(1, 9)],
        *[Binding(a.key, f"launch('{a.name}')", a.label, tooltip=f"{a.title}: {a.description}", id=f"job.{a.name}")
          for a in ACTIONS],
        Binding("x", "cancel_job", "cancel", tooltip="cancel the selected job (asks first)", id="job.cancel"),
        Binding("space", "toggle_play", "play/pause", tooltip="play / pause", id="replay.play"),
        Binding("plus", "speed(1)", "faster", tooltip="faster / slower", id="replay.faster"),
        Binding("minus", "speed(-1)", "slower", tooltip="faster / slower", id="replay.slower"),
        Binding("full_stop", "step(1)", "next event", tooltip="step to the next / previous event", id="replay.next"),
        Binding("comma", "step(-1)", "prev event", show=False, tooltip="step to the next / previous event",
                id="replay.prev"),
        Binding("greater_than_sign", "jump('phase', 1)", "next phase", show=False,
                tooltip="jump to the next / previous phase start", id="replay.next_phase"),
        Binding("less_than_sign", "jump('phase', -1)", "prev phase", show=False,
                tooltip="jump to the next / previous phase start", id="replay.prev_phase"),
        Binding("v", "jump('version', 1)", "next version", show=False,
                tooltip="jump to the next / previous canonical memory version", id="replay.next_version"),
        Binding("V", "jump('version', -1)", "prev version", show=False,
                tooltip="jump to the next / previous canonical memory version", id="replay.prev_version"),
        Binding("home", "seek_end(0)", "start", show=False, tooltip="start / end of the episode", id="replay.start"),
        Binding("end", "seek_end(1)", "end", show=False, tooltip="start / end of the episode", id="replay.end"),
    ]

    def __init__(self, *, session=None, workspace: Workspace | None = None,
                 open_session: Callable[[], Session] | None = None, replay=None,
                 state: EpisodeState | None = None, readonly: bool = False,
                 readonly_reason: str | None = None, launcher: JobLauncher | None = None, gpu_sampler=None, sample_gpu: bool = True, recorder=None,
                 clock: Callable[[], float] | None = time.time) -> None:
        """Live on an open ``session``, or on ``workspace``, whose session ``open_session()``
        opens after the first frame (in the scan's thread); in replay on ``replay``; or
        showing a fixed ``state``. ``clock`` None: a frozen record (an archive), whose "now"
        is its newest event (``_now``)."""
        super().__init__()
        self.session = session
        self.open_session = open_session
        self.replay = replay
        self.mode = "replay" if replay is not None else "live"
        self.readonly = readonly
        # What a dimmed action says when read-only: a replay is one by its nature.
        self.readonly_reason = readonly_reason or ("replay: read-only" if replay is not None else "read-only")
        self.launcher = launcher
        self.gpu_sampler = gpu_sampler
        self.sample_gpu = sample_gpu
        self.recorder = recorder
        self.clock = clock
        if state is None and replay is not None:
            state = replay.state()
        if session is not None:
            workspace = session.workspace
        if state is None and workspace is not None:
            # Before the first scan lands, say at least which workspace this is.
            state = EpisodeState(campaign_root=str(workspace.campaign_root), campaign=workspace.name,
                                 worktree=str(workspace.worktree) if workspace.worktree else None, scanning=True)
        self.episode_state: EpisodeState = state or EpisodeState()
        self._pending: EpisodeState | None = self.episode_state
        self._shown: EpisodeState | None = None
        self._stop = threading.Event()  # also read by the watcher's own thread
        self._session_changed = False
        self.scanned = False  # the scan's thread folds the session until this is set
        self._held_sites: list[TimelineScreen.SitesDecoded] = []  # decoded before the scan was in
        self._draw_timer: Timer | None = None
        self._drawn_at = 0.0
        self._filter_target: Pane | None = None
        self._replay_last = time.monotonic()
        self._availability: tuple | None = None
        self._preflight: Preflight | None = None  # the sampling thread's, folded into the state once
        self._jobs_seen: EpisodeState | None = None  # the state whose jobs the failure toasts last compared
        self._focus_pending = False  # no pane could take the first focus yet (see _give_first_focus)
        self.draws = 0  # how many states were drawn (the load benchmark reads it)

    # -- layout ----------------------------------------------------------------------------

    def get_default_screen(self) -> DashboardScreen:
        return DashboardScreen(id="_default", on_show=self._on_dashboard_shown)

    def compose(self) -> ComposeResult:
        label = "REPLAY" if self.mode == "replay" else "READ-ONLY" if self.readonly else "LIVE"
        yield EpisodeHeader(mode_label=label, id="header")
        with Container(id="panes"):
            with PaneRow(id="row-top"):
                yield PhaseTimelinePane(number=1, id="phases")
                yield AbbaStats(number=3, id="abba")
            with PaneRow(id="row-mid"):
                yield ProfileFunnel(number=2, id="funnel")
                yield JobsPane(number=4, id="jobs")
            with PaneRow(id="row-low"):
                yield GpuPane(sampled=self.samples_gpu(), number=5, id="gpu")
                yield VersionsPane(number=6, id="versions")
                yield AlertsPane(number=7, id="alerts")
                yield UnreadableList(number=8, id="unreadable")
        if self.replay is not None:
            yield ReplayBar(id="replay-bar")
        # A class given here costs nothing; added to the app once mounted, it restyled every widget.
        yield KeyBar(classes="-readonly" if self.readonly else None)

    def panes(self) -> list[Pane]:
        return sorted(self.query(Pane), key=lambda p: p.number or 0)

    def on_mount(self) -> None:
        self.set_interval(TICK_SECONDS, self._tick)
        if self.replay is not None:
            self.set_interval(REPLAY_SECONDS, self._replay_tick)
        self.draw_pending()
        self._focus_pending = not self._give_first_focus()
        # The rest waits for the first frame (_on_dashboard_shown): checking the keymap's ids
        # imports every screen (the timeline's brings numpy), and the scan's thread and the
        # GPU sampler would compete with the first paint for the interpreter
        # (benchmarks/console_first_paint.py).

    def _on_dashboard_shown(self) -> None:
        """Start following the workspace as the first frame goes out. The follower is a
        worker; where Textual starts workers eagerly (Python 3.12 and later) its scan thread
        starts within this call, and runs beside that frame's layout. Waiting for the frame
        first (``call_after_refresh`` waits for the start-up resizes' frames too) or scanning
        on the app's loop measured no sooner first data on the H200, and a later first paint
        (benchmarks/console_first_paint.py)."""
        if self.watches_workspace():
            self.follow_session()
        self.call_after_refresh(self._load_keymap)

    def _load_keymap(self) -> None:
        from console.paths import config_file
        from console.settings import load_keymap

        keymap, warning = load_keymap(config_file(), self.binding_ids())
        self.set_keymap(keymap)
        if warning:
            self.notify(warning, severity="warning", timeout=20, markup=False)

    # -- states in -------------------------------------------------------------------------

    class EpisodeChanged(Message):
        """The followed workspace produced new events. Only the newest state matters, so a
        run of these in the queue is handled as one."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, EpiscopeApp.EpisodeChanged)

    @work(exclusive=True, exit_on_error=False, group="follow")
    async def follow_session(self) -> None:
        """Scan (in a thread: a long episode takes a moment), draw what it found, then follow
        the workspace on the app's loop. While the app is behind on its messages the
        follower reads no further: the files keep the events, and the next batch brings
        them all.

        What the shown workspace's files say is drawn first: the git facts (GitPython's
        import alone is about as long as reading the files) and the campaign's other
        worktrees and ended episodes (history, not what the dashboard draws) come with the
        full refresh after that frame. Then
        following and GPU sampling start: the file watcher (watchfiles and its async
        backend) costs about as much to load as a frame, and pynvml up to 200 ms."""
        try:
            session = await asyncio.to_thread(self._scan)
            self._session_changed = True
            self.draw_pending()
            drawn = asyncio.Event()
            self.call_after_refresh(drawn.set)
            await drawn.wait()
            await asyncio.to_thread(session.refresh, None)
            self.scanned = True  # GPU readings and job-failure toasts wait for the whole scan
            self._fold_held_sites()
            self._session_changed = True
            self.draw_pending()
            if self.samples_gpu():
                self.sample_gpu_reading()
                self.set_interval(GPU_SAMPLE_SECONDS, self.sample_gpu_reading)
            async for _ in session.follow_events(self._stop):
                self.post_message(self.EpisodeChanged())
                while self.message_queue_size > BACKLOG_MESSAGES and not self._stop.is_set():
                    await asyncio.sleep(DRAW_SECONDS / 4)
        except Exception as exc:  # the console stays up, and says it no longer follows
            self.notify(f"stopped following the workspace: {exc}", severity="error", timeout=30, markup=False)

    def _scan(self) -> Session:
        """The session's cold scan of the files, opening the session first when the console
        was given only its workspace (runs in a thread)."""
        if self.session is None:
            self.session = self.open_session()
        self.session.scan(git=False, shown_only=True)
        return self.session

    def on_episcope_app_episode_changed(self, message: EpisodeChanged) -> None:
        # The snapshot is taken when the draw comes, at most once per draw interval.
        self._session_changed = True
        self.schedule_draw()

    # -- GPU readings ------------------------------------------------------------------------

    def samples_gpu(self) -> bool:
        """Live with a workspace and sampling on: readings become events of the session."""
        return self.sample_gpu and self.mode == "live" and self.watches_workspace()

    def watches_workspace(self) -> bool:
        """Live on a workspace: a session is open, or opens after the first frame."""
        return self.session is not None or self.open_session is not None

    class GpuSampled(Message):
        def __init__(self, reading: GpuReading, preflight: Preflight) -> None:
            super().__init__()
            self.reading = reading
            self.preflight = preflight

    @work(thread=True, exclusive=True, exit_on_error=False, group="gpu")
    def sample_gpu_reading(self) -> None:
        from console.episode.preflight import check_preflight
        from console.gpu.sampler import GpuSampler

        if self.gpu_sampler is None:
            self.gpu_sampler = GpuSampler()
        reading = self.gpu_sampler.sample()
        if self._preflight is None:  # once: what the host has does not change while the console runs
            self._preflight = check_preflight(reading)
        self.post_message(self.GpuSampled(reading, self._preflight))

    def on_episcope_app_gpu_sampled(self, message: GpuSampled) -> None:
        """Fold the reading into the state like any file's event (so it is recorded and
        replayed); the GPU pane draws it from the next state."""
        from console.episode.preflight import PREFLIGHT_PATH
        from console.gpu.sampler import NVML_PATH

        reading = message.reading
        if not self.scanned:
            return
        events = [ev.Event(ev.GPU, NVML_PATH, None, reading.sampled_at, reading)]
        if self.session.state.preflight is None:
            events.append(ev.Event(ev.PREFLIGHT, PREFLIGHT_PATH, None, reading.sampled_at, message.preflight))
        self.set_state(self.session.add(events))
        self._flush_recording()

    def on_timeline_screen_sites_decoded(self, message: TimelineScreen.SitesDecoded) -> None:
        """Per-site statistics the timeline screen decoded from a capture whose receipt states
        none: folded into the state like a GPU reading (recorded and replayed); the screen's
        table draws them from the next state. While the start-up scan still folds the session
        in its thread they wait for it (``_fold_held_sites``). A replay or a fixed state has no
        session to fold them into: the screen says so (``sites_not_decoded``)."""
        if not self.watches_workspace():
            return
        self._held_sites.append(message)
        if self.scanned:
            self._fold_held_sites()

    def _fold_held_sites(self) -> None:
        if not self._held_sites:
            return
        held, self._held_sites = self._held_sites, []
        # On the episode's clock: at its newest event, the moment of the episode the console had
        # read when they were decoded (the key press's wall time stretched a recording's span).
        at = self.session.state.last_event_at
        self.set_state(self.session.add([ev.Event(ev.TIMELINE_SITES, m.receipt_path, None, at, m.sites)
                                         for m in held]))
        self._flush_recording()

    def _flush_recording(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()

    def set_state(self, state: EpisodeState) -> None:
        """Hand the console a new state (tests and replay)."""
        self._pending = state
        self.schedule_draw()

    def schedule_draw(self) -> None:
        """Draw now, or when DRAW_SECONDS have passed since the last draw (one timer at most)."""
        if self._draw_timer is not None:
            return
        wait = self._drawn_at + DRAW_SECONDS - time.monotonic()
        if wait <= 0:
            self.draw_pending()
        else:
            self._draw_timer = self.set_timer(wait, self.draw_pending)

    def draw_pending(self) -> None:
        if self._draw_timer is not None:
            self._draw_timer.stop()
            self._draw_timer = None
        if self._session_changed:
            self._session_changed = False
            self._pending = self.session.state
            self._flush_recording()
        state = self._pending
        if state is None or state is self._shown:
            return
        self.episode_state = state
        try:
            self._draw(state)
        except NoMatches:
            # The dashboard is still mounting or already torn down: try again shortly.
            self._draw_timer = self.set_timer(DRAW_SECONDS, self.draw_pending)
            return
        self._shown = state
        self._drawn_at = time.monotonic()
        self.draws += 1

    def _draw(self, state: EpisodeState) -> None:
        now = self._now()
        self.query_one(EpisodeHeader).show_state(state, extra=self._header_note(), launched=self._launched_running())
        for pane in self.panes():
            pane.show_state(state, now)
        for row in self.query(PaneRow):  # after the panes drew: a row fits what they now show
            row.fold()
        if self._focus_pending and self.focused is None:
            self._focus_pending = not self._give_first_focus()
        self.refresh_availability()
        self._toast_failures(state)

    def _toast_failures(self, state: EpisodeState) -> None:
        """A job that ends badly while the console watches says why, in one toast. Jobs
        that had already ended when the console opened are the episode's past: no toast."""
        if self.mode != "live" or (self.watches_workspace() and not self.scanned):
            return
        if self._jobs_seen is not None:
            for job in newly_failed(self._jobs_seen, state):
                reason = failure_line(job, state.job_logs.get(job.job_id))
                what = job.category or job.kind or "job"
                self.notify(visible(f"job {job.job_id} ({what}) {job.state}: {reason}"), severity="error",
                            timeout=15, markup=False)
        self._jobs_seen = state

    def refresh_availability(self) -> None:
        """Announce new bindings only when what can run changed (the key bar re-checks them all)."""
        key = tuple(self.why_blocked(a.name) for a in ACTIONS) + (self.why_blocked("cancel_job"),
                                                                    bool(self.episode_state.episodes))
        if key != self._availability:
            self._availability = key
            self.refresh_bindings()

    def _now(self) -> float | None:
        if self.replay is not None:
            return self.replay.now
        if self.clock is None:
            # An archive is a record that stopped: a phase open in it has run for as long as
            # the record shows (status: no duration), not until this machine's wall clock.
            return self.episode_state.last_event_at
        return self.clock()

    def _tick(self) -> None:
        # The interval can fire while the screen is being built or torn down: tick what exists.
        now = self._now()
        for pane in self.query(Pane):
            pane.tick(now)

    def _header_note(self) -> str:
        if self.mode == "replay":
            return "replay: space play · ./, step · ctrl+p jump"
        if self.readonly:
            return f"{self.readonly_reason}: actions disabled"
        return ""

    def _launched_running(self) -> int:
        return len(self.launcher.running()) if self.launcher is not None else 0

    # -- what can run now --------------------------------------------------------------------

    def busy_jobs(self) -> int:
        return max(running_jobs(self.episode_state), self._launched_running())

    def selected_kernel(self) -> str | None:
        return self.query_one(ProfileFunnel).selected_kernel()

    def selected_job(self):
        return self.query_one(JobsPane).selected_job()

    def why_blocked(self, name: str) -> str | None:
        """Why an operator action cannot run now, or None when it can."""
        if self.readonly:
            return self.readonly_reason
        if self.mode == "replay":
            return "replay"
        if self.launcher is None:
            return "no workspace"
        if name == "cancel_job":
            job = self.selected_job()
            if job is None or job.state not in ("queued", "running"):
                return "select a queued or running job"
            return None
        action = ACTIONS_BY_NAME[name]
        if self.busy_jobs() >= MAX_SANDBOX_JOBS:
            return f"{MAX_SANDBOX_JOBS}/{MAX_SANDBOX_JOBS} jobs running"
        preflight = self.episode_state.preflight if self.launcher.runs_here else None
        if preflight is None and self.samples_gpu() and self.launcher.runs_here:
            return "checking for a GPU, ncu and cupy"
        if preflight is not None:
            missing = preflight.blocks(profiler=action.profiler)
            if missing:
                return missing
        if action.needs_kernel and not self.selected_kernel():
            return "select a kernel in the funnel"
        if name == "abba_compare":
            missing = abba_plan(self.episode_state).missing
            if missing:
                return missing
        if name == "timeline_measure":
            workspace = Path(self.launcher.workspace)
            missing = [n for n in (TIMELINE_BASELINE_SOURCE, TIMELINE_BENCH) if not (workspace / n).is_file()]
            if missing:
                return f"no {' or '.join(missing)} in the worktree (timeline skill)"
        return None

    def abba_commits(self) -> tuple[str | None, str | None]:
        """(incumbent, candidate) of an ABBA compare (console.episode.incumbent)."""
        plan = abba_plan(self.episode_state)
        return plan.incumbent, plan.candidate

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # True: enabled; None: shown dimmed and refused; False: hidden and refused.
        if action in REPLAY_ACTIONS:
            return self.mode == "replay"
        if action == "launch":
            return True if self.why_blocked(parameters[0]) is None else None
        if action == "cancel_job":
            return True if self.why_blocked("cancel_job") is None else None
        if action == "open_timeline":
            return True if self.receipts() else None
        if action == "diff":
            return True if self.why_no_diff() is None else None
        if action == "episodes":
            return True if self.episode_state.episodes else None
        if action in ("focus_pane", "filter") and not self.on_dashboard():
            return False  # the timeline and diff screens have no panes: not offered there
        if action == "filter" and isinstance(self.focused, Input):
            return False  # a slash typed into a text box is its text
        return True

    def on_dashboard(self) -> bool:
        """The dashboard is the screen in use (a dialog over it, such as help, counts)."""
        base = next((screen for screen in reversed(self.screen_stack) if not isinstance(screen, ModalScreen)), None)
        return isinstance(base, DashboardScreen)

    def why_binding_blocked(self, binding: Binding) -> str | None:
        """Why the action of a dimmed binding is refused now (the help screen shows it)."""
        _, name, parameters = parse_action(binding.action)
        return self.why_action_blocked(name, parameters)

    def why_action_blocked(self, name: str, parameters: tuple) -> str | None:
        """Why an app action that ``check_action`` dims is refused now (None: it is not)."""
        if name == "launch":
            return self.why_blocked(str(parameters[0]))
        if name == "cancel_job":
            return self.why_blocked("cancel_job")
        if name == "open_timeline" and not self.receipts():
            return "no timeline receipt in this episode yet"
        if name == "diff":
            return self.why_no_diff()
        if name == "episodes" and not self.episode_state.episodes:
            return NO_EPISODES
        return None

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """A dimmed key of the app says why it is refused instead of doing nothing."""
        if isinstance(action, str) and default_namespace in (None, self):
            destination, name, parameters = parse_action(action)
            if not destination and self.check_action(name, parameters) is None:
                why = self.why_action_blocked(name, parameters)
                if why is not None:
                    launched = ACTIONS_BY_NAME.get(str(parameters[0])) if name == "launch" and parameters else None
                    title = launched.title if launched is not None else name.replace("_", " ")
                    self.notify(visible(f"{title}: not now ({why})"), severity="warning", markup=False)
                    return True
        return await super().run_action(action, default_namespace, namespaces)

    def binding_ids(self) -> Iterator[str]:
        """Every binding id a keymap may name (the screens are imported only when asked)."""
        from console.screens.base import ConsoleScreen
        from console.screens.confirm import ConfirmScreen
        from console.screens.detail import DetailScreen
        from console.screens.diff import DiffScreen
        from console.screens.episodes import EpisodesScreen, EpisodesTable
        from console.screens.help import HelpScreen
        from console.screens.timeline import TimelineScreen

        for owner in (type(self), ConsoleScreen, HelpScreen, ConfirmScreen, TimelineScreen, DiffScreen, EpisodesScreen,
                      EpisodesTable, DetailScreen, ReplayBar, Pane):
            for binding in owner.BINDINGS:
                if isinstance(binding, Binding) and binding.id:
                    yield binding.id

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The selected kernel or job decides which actions are available.
        self.refresh_availability()

    # -- operator actions ------------------------------------------------------------------

    def action_launch(self, name: str) -> None:
        why = self.why_blocked(name)
        title = ACTIONS_BY_NAME[name].title
        if why is not None:
            self.notify(f"{title}: not now ({why})", severity="warning", markup=False)
            return
        active = self.episode_state.active_episode
        episode = active.episode if active else None
        commits = {}
        if name == "abba_compare":
            incumbent, candidate = self.abba_commits()
            commits = {"incumbent": incumbent, "candidate": candidate}
        try:
            job = self.launcher.launch(name, episode=episode, kernel=self.selected_kernel(), busy=self.busy_jobs(),
                                       **commits)
        except ActionRefused as exc:
            self.notify(visible(f"{title}: {exc}"), severity="error", markup=False)
            return
        self.notify(f"{title}: started (sandbox pid {job.process.pid})", markup=False)
        self.query_one(EpisodeHeader).show_state(self.episode_state, extra=self._header_note(), launched=self._launched_running())
        self.refresh_availability()

    def action_cancel_job(self) -> None:
        why = self.why_blocked("cancel_job")
        if why is not None:
            self.notify(f"cancel: not now ({why})", severity="warning", markup=False)
            return
        job = self.selected_job()
        from console.screens.confirm import ConfirmScreen

        question = (f"Cancel job {job.job_id} ({job.category or job.kind or 'job'}, {job.state})?\n"
                    "Its whole process group will be terminated.")
        self.push_screen(ConfirmScreen(question), partial(self._cancel_confirmed, job.workspace, job.job_id))

    def _cancel_confirmed(self, workspace: str | None, job_id: str, yes: bool | None) -> None:
        if yes:
            # The record names the workspace it was written in; a record copied from elsewhere
            # names another directory, which the cancel must not touch.
            roots = {root.resolve() for root in self.session.workspace.roots} if self.session is not None else set()
            inside = workspace is not None and Path(workspace).resolve() in roots
            self.cancel_in_background(workspace if inside else self.launcher.workspace, job_id)
        else:
            self.notify(visible(f"job {job_id} left running"), markup=False)

    @work(thread=True, exit_on_error=False, group="cancel")
    def cancel_in_background(self, workspace: str, job_id: str) -> None:
        try:
            record = cancel(workspace, job_id)
        except Exception as exc:
            self.call_from_thread(self.notify, visible(f"cancel {job_id}: {exc}"), severity="error", markup=False)
            return
        self.call_from_thread(self.notify, visible(f"job {job_id}: {record.state}"), markup=False)

    # -- navigation ------------------------------------------------------------------------

    def action_focus_pane(self, number: int) -> None:
        for pane in self.panes():
            if pane.number == number:
                if not pane.focus_pane():
                    pane.hold_focus()
                    self.notify(f"nothing to focus in pane {number} ({pane.title}): {pane.note or 'no data yet'}",
                                markup=False)
                return

    def _give_first_focus(self) -> bool:
        """The phases pane has the focus at start, else the first pane with data: pane 1,
        the top left one, where reading and the number keys start, and the overview an
        operator opens with Enter. While the workspace is scanned no pane has a body to
        focus: False, and the first draw with data tries again."""
        panes = [self.query_one("#phases", Pane), *(pane for pane in self.panes() if not pane.empty)]
        return any(pane.focus_pane() for pane in panes)

    def _focused_pane(self) -> Pane | None:
        node = self.focused
        while node is not None and not isinstance(node, Pane):
            node = node.parent
        return node

    async def action_filter(self) -> None:
        pane = self._focused_pane()
        if pane is not None and pane.empty:
            self.notify(f"nothing to filter in {pane.title}: {pane.note}", severity="warning", markup=False)
            return
        if pane is None or not pane.query(DataTable):
            self.notify("focus a table first (1-8 or Tab), then /", severity="warning")
            return
        self._filter_target = pane
        box = self._filter_box()
        if box is None:  # mounted the first time it is asked for
            box = Input(placeholder="filter the focused table (Enter keeps it, Esc closes)", id="filter")
            await self.screen.mount(box, before=self.screen.query_one(KeyBar))
        box.value = pane.filter_text
        box.display = True
        # At once, not by ``focus()`` (a callback queued behind them): keys typed right after
        # the slash are already waiting, and they are the filter's text, not the table's keys.
        self.screen.set_focus(box)

    def _filter_box(self) -> Input | None:
        return next(iter(self.screen.query("#filter")), None)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter" and self._filter_target is not None:
            self._filter_target.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._close_filter()

    def _close_filter(self) -> None:
        box = self._filter_box()
        if box is not None:
            box.display = False
        if self._filter_target is not None:
            self._filter_target.focus_pane()
        self._filter_target = None

    def action_back(self) -> None:
        box = self._filter_box()
        if box is not None and box.display:
            self._close_filter()
            return
        pane = self._focused_pane()
        if pane is not None and pane.filter_text:
            pane.set_filter("")
            return
        if len(self.screen_stack) > 1:
            self.pop_screen()

    def action_help(self) -> None:
        from console.screens.help import HelpScreen, help_rows

        pane = self._focused_pane()
        rows = help_rows(self.screen.active_bindings, key_display=self.get_key_display,
                         why_blocked=self.why_binding_blocked,
                         focused=f"in {pane.title}" if pane is not None else "focused widget")
        self.push_screen(HelpScreen(mode=self.mode, readonly=self.readonly_reason if self.readonly else None, rows=rows,
                                    header=self.query_one(EpisodeHeader).lines))

    def why_no_diff(self) -> str | None:
        """Why there is no kernel.py diff to show (None: there is)."""
        git = self.episode_state.git
        if git is None:
            return "no git repository read yet"
        if git.error:
            return f"git: {git.error}"
        if git.head is None:
            return "no commit yet"
        return None

    def action_diff(self) -> None:
        """The kernel.py diff: the version selected in the versions pane (when it has focus)
        or the working tree, against the incumbent."""
        from console.episode.kernel_diff import default_pair, diff_sides, version_side
        from console.screens.diff import DiffScreen

        why = self.why_no_diff()
        pane = self._focused_pane()
        version = pane.selected_version() if isinstance(pane, VersionsPane) else None
        state = self.episode_state
        sides = diff_sides(state)
        chosen = None
        if why is None and version is not None:
            chosen, why = version_side(sides, version)
        if why is not None:  # never the working tree in place of the version asked for
            self.notify(f"diff: not now ({why})", severity="warning", markup=False)
            return
        if chosen is not None and chosen not in sides:  # a candidate commit: a point of its own
            sides = (*sides[:-1], chosen, sides[-1])
        old, new = default_pair(state, sides, chosen)
        self.push_screen(DiffScreen(state, sides, old, new))

    def receipts(self) -> list[str]:
        """Paths of the timeline receipts the episode holds now."""
        return [receipt.path for receipt in self.episode_state.timeline_receipts if receipt.path]

    def action_episodes(self) -> None:
        """The campaign's history: every episode of the state, in a table of its own."""
        if not self.episode_state.episodes:
            self.notify(f"history: not now ({NO_EPISODES})", severity="warning", markup=False)
            return
        from console.screens.episodes import EpisodesScreen

        if not isinstance(self.screen, EpisodesScreen):  # already open: it follows the state itself
            self.push_screen(EpisodesScreen(self.episode_state))

    def action_open_timeline(self) -> None:
        receipts = self.receipts()
        if not receipts:
            self.notify("no timeline receipt in this episode yet", severity="warning")
            return
        self.open_timeline(receipts[-1])

    def open_timeline(self, receipt_path: str) -> None:
        from console.screens.timeline import TimelineScreen

        if isinstance(self.screen, TimelineScreen) and self.screen.receipt_path == Path(receipt_path):
            return  # already open (``t`` there would stack a second copy of it)
        self.push_screen(TimelineScreen(receipt_path, sites_not_decoded=self.sites_not_decoded()))

    def sites_not_decoded(self) -> str | None:
        """Why a receipt's per-site statistics, where it states none, stay unknown here (None:
        the timeline screen decodes them into the session)."""
        if self.watches_workspace():
            return None
        if self.mode == "replay":
            return ("this replay holds no per-site statistics for this receipt: a replay shows what was recorded "
                    "and decodes none (the live console, episcope watch, does)")
        return "this snapshot holds no per-site statistics for this receipt, and has no session to decode them into"

    # -- replay ----------------------------------------------------------------------------

    def _replay_tick(self) -> None:
        now = time.monotonic()
        elapsed, self._replay_last = now - self._replay_last, now
        if self.replay.advance(elapsed):
            self.set_state(self.replay.state())
        self._show_replay_bar()

    def _show_replay_bar(self, label: str = "") -> None:
        replay = self.replay
        event = replay.current_event()
        note = label or (f"{event.kind} {Path(event.path).name}" if event is not None else "")
        for bar in self.query(ReplayBar):  # absent while the dashboard mounts or is torn down
            bar.show(fraction=replay.fraction(), playing=replay.playing, speed=replay.speed,
                     position=replay.position, total=replay.total, now=replay.now, label=note)

    def _replay_moved(self, label: str = "") -> None:
        self.set_state(self.replay.state())
        self.draw_pending()
        self._show_replay_bar(label)

    def action_toggle_play(self) -> None:
        self._replay_last = time.monotonic()
        self.replay.toggle()
        self._show_replay_bar()

    def action_speed(self, direction: int) -> None:
        self.replay.faster(direction)
        self._show_replay_bar()

    def action_step(self, direction: int) -> None:
        self.replay.playing = False
        self.replay.step(direction)
        self._replay_moved()

    def action_jump(self, kind: str, direction: int) -> None:
        mark = self.replay.jump(kind, direction)
        if mark is None:
            self.notify(f"no {'later' if direction > 0 else 'earlier'} {kind}", severity="warning")
            return
        self._replay_moved(mark.label)

    def action_seek_end(self, end: int) -> None:
        self.replay.playing = False
        self.replay.seek_index(self.replay.total if end else 0)
        self._replay_moved()

    def on_replay_bar_seek(self, message: ReplayBar.Seek) -> None:
        self.replay.seek_fraction(message.fraction)
        self._replay_moved()

    def jump_to_mark(self, index: int) -> None:
        mark = self.replay.marks[index]
        self.replay.playing = False
        self.replay.seek_index(mark.index)
        self._replay_moved(mark.label)

    # -- palette ---------------------------------------------------------------------------

    def palette_commands(self) -> list[tuple[str, str, object]]:
        commands: list[tuple[str, str, object]] = []
        for action in ACTIONS:
            if self.why_blocked(action.name) is None:
                kernel = f" on {self.selected_kernel()}" if action.needs_kernel else ""
                commands.append((f"{action.title}{kernel}", action.description, partial(self.action_launch, action.name)))
        if self.why_no_diff() is None:
            commands.append(("What changed: kernel.py diff", "against the incumbent, with the latency change (D)",
                             self.action_diff))
        if self.why_blocked("cancel_job") is None:
            job = self.selected_job()
            commands.append((f"Cancel job {job.job_id if job else ''}", "asks before terminating its process group",
                             self.action_cancel_job))
        for path in self.receipts():
            commands.append((f"Open timeline {Path(path).parent.name}", path, partial(self.open_timeline, path)))
        if not self.receipts():  # t is listed either way, and says why it has nothing to open
            commands.append(("Open timeline (t)", "no timeline receipt in this episode yet", self.action_open_timeline))
        commands.append(("Campaign history: every episode (h)",
                         "outcome, verdict and version of each" if self.episode_state.episodes else NO_EPISODES,
                         self.action_episodes))
        focused = self._focused_pane()
        if focused is not None:
            commands.append((f"Show in full (Enter): {focused.title}", "the selected row or the pane, uncut",
                             focused.action_detail))
        for pane in self.panes() if self.on_dashboard() else ():
            commands.append((f"Go to pane {pane.number}: {pane.title}", "", partial(self.action_focus_pane, pane.number)))
        if self.replay is not None:
            for index, mark in enumerate(self.replay.marks):
                commands.append((f"Jump to {mark.kind} {mark.label}", "replay", partial(self.jump_to_mark, index)))
        commands.append(("Help", "every key and what it does now", self.action_help))
        return commands

    # -- leaving ---------------------------------------------------------------------------

    async def action_quit(self) -> None:
        running = self._launched_running()
        if not running:
            self._leave(True)
            return
        from console.screens.confirm import ConfirmScreen

        question = (f"Quit? {running} job(s) this console started are still running;\n"
                    "quitting terminates their process groups.")
        self.push_screen(ConfirmScreen(question), self._leave)

    def _leave(self, yes: bool | None) -> None:
        if yes:
            self.shutdown()
            self.exit()

    def shutdown(self) -> None:
        """Stop following, end the jobs this console started, close the recording."""
        self._stop.set()
        if self.gpu_sampler is not None:
            self.gpu_sampler.close()
        if self.launcher is not None:
            self.launcher.shutdown()
        if self.recorder is not None:
            self.recorder.close()

    def on_unmount(self) -> None:
        self.shutdown()
