"""One watched workspace: scan once, then follow it live.

This is the object every front door holds. The live console and ``events --follow`` use
``follow_events``/``follow``; ``status`` uses ``scan``. watchfiles reports changed paths,
``Ingest.refresh`` reads only what changed, and the reducer folds the new events.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from .events import Event
from .ingest import Ingest
from .reducer import Reducer
from .state import EpisodeState
from .workspace import Workspace, resolve_workspace

if TYPE_CHECKING:  # asyncio costs ~50 ms to import; status never needs it
    import asyncio

# watchfiles groups changes that arrive within DEBOUNCE_MS; it checks every STEP_MS.
# Both are small so an appended line reaches the screen well inside 50 ms.
DEBOUNCE_MS = 10
STEP_MS = 5
TICK_MS = 1000  # without file changes, re-check everything (cheap stats) this often


class Session:
    def __init__(self, path: str | os.PathLike[str] | None = None, *, workspace: Workspace | None = None,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self.path = path
        self.workspace = workspace or resolve_workspace(path)
        self.on_event = on_event  # e.g. the console's recorder
        self._start()

    def _start(self) -> None:
        self.ingest = Ingest(self.workspace)
        self.reducer = Reducer()
        ws = self.workspace
        self.reducer.set_workspace(str(ws.campaign_root), ws.name, str(ws.worktree) if ws.worktree else None)

    @property
    def state(self) -> EpisodeState:
        return self.reducer.snapshot()

    def _feed(self, events: Iterable[Event]) -> None:
        if self.on_event is not None:
            events = list(events)
            for event in events:
                self.on_event(event)
        self.reducer.feed(events)

    def add(self, events: list[Event]) -> EpisodeState:
        """Fold events that no file produced (GPU readings), recorded like the rest."""
        self._feed(events)
        return self.state

    def scan(self, *, git: bool = True, final: bool = False, shown_only: bool = False) -> EpisodeState:
        """The cold scan; ``git=False`` reads the files only (the next ``refresh`` reads the
        git facts: the console draws the files' data before git runs), ``shown_only`` those
        of the roots shown only (the next full ``refresh`` reads the campaign's other
        worktrees and ended episodes' files: what the dashboard draws is the current
        episode's). ``final``: nothing will follow this scan (``status``): a line file's
        last line counts even without its newline (``Ingest.scan_batches``); a session that
        goes on to follow leaves it to its writer."""
        if self.on_event is None:
            self.ingest.scan_into(self.reducer, git=git, final=final, shown_only=shown_only)
        else:
            for batch in self.ingest.scan_batches(git=git, final=final, shown_only=shown_only):
                self._feed(batch)
        return self.state

    def scan_events(self, *, final: bool = False) -> Iterator[Event]:
        """The cold scan as events, folded on the way through (``final`` as for ``scan``)."""
        for batch in self.ingest.scan_batches(final=final):
            self._feed(batch)
            yield from batch

    def refresh(self, changed: Iterable[str] | None = None) -> list[Event]:
        events = self.ingest.refresh(changed)
        self._feed(events)
        return events

    def _reresolve(self) -> bool:
        """Pick up a new episode worktree (an episode started or ended)."""
        try:
            fresh = resolve_workspace(self.path) if self.path is not None else self.workspace
        except Exception:
            return False
        if fresh == self.workspace:
            return False
        self.workspace = fresh
        self._start()
        return True

    async def follow_events(self, stop: asyncio.Event | None = None) -> AsyncIterator[list[Event]]:
        """Batches of new events as files change (call ``scan`` first)."""
        import watchfiles

        while stop is None or not stop.is_set():
            roots = [str(r) for r in self.workspace.roots]
            restart = False
            async for changes in watchfiles.awatch(
                *roots,
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
                stop_event=stop,
                watch_filter=_watch_filter,
                recursive=True,
            ):
                if changes:
                    events = self.refresh([path for _, path in changes])
                elif self._reresolve():
                    events = list(self.scan_events())
                    restart = True
                else:
                    # A quiet tick: catch anything the watcher could not have reported
                    # (changes made between the scan and the watcher's start, files on
                    # filesystems without inotify) and re-check the git facts.
                    events = self.refresh(None)
                if events:
                    yield events
                if restart:
                    break
            if not restart:
                return

    async def follow(self, stop: asyncio.Event | None = None) -> AsyncIterator[EpisodeState]:
        async for _ in self.follow_events(stop):
            yield self.state


def _watch_filter(change: object, path: str) -> bool:
    name = os.path.basename(path)
    if name.endswith((".tmp", ".swp", ".lock", "~")) or name.startswith(".#"):
        return False
    parts = path.split(os.sep)
    return ".git" not in parts and "__pycache__" not in parts
