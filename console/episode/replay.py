"""Replay: the same events, fed through the same reducer on a virtual clock.

Two sources give the events. An episode that was never watched is read from its
append-only files and snapshots (the ingest's cold scan) with canonical memory versions
placed at the time git says the supervisor committed them. A recording is what the console
kept while watching: every event it saw, one JSON line each, under the user's state
directory (``console.paths.state_dir``, e.g. ``~/.local/state/episcope``), never inside the
workspace.

``Replay`` holds the events in time order and a position: the number of events applied.
Moving forward feeds the reducer; moving back folds again from the start, which is
linear in the events and fast enough for an operator's keystroke.

The live console only records (``Recorder``) and loads this module before its first frame;
the reducer and the artifact registry, which replaying needs, are imported where replaying
starts.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import orjson
from msgspec.structs import replace

from console.formats.problems import FormatError, Unreadable, one_line
from console.paths import state_dir

from . import events as ev
from .events import Event
from .state import EpisodeState
from .summary import event_to_json
from .workspace import Workspace

if TYPE_CHECKING:
    from .reducer import Reducer

RECORDING_SCHEMA = "episcope-recording/v1"
KEEP_RECORDINGS = 20  # per campaign; older ones are deleted when a new console session starts
SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class RecordingError(Exception):
    """A recording that cannot be replayed (message is one line)."""


# -- where recordings live ------------------------------------------------------------------


def recordings_dir() -> Path:
    return state_dir() / "recordings"


def _file_stem(campaign: str | None) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in (campaign or "episode"))


def _campaign_prefix(campaign: str | None, campaign_root: str | os.PathLike[str]) -> str:
    """What one campaign's recordings are named by: its name, which a listing shows, and a
    digest of its root's real path. Campaigns share names (every ``episcope init --problem
    row_softmax`` workspace is row_softmax), and each keeps its own newest recordings."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(campaign_root))).hexdigest()[:8]
    return f"{_file_stem(campaign)}-{digest}"


def new_recording_path(campaign: str | None, campaign_root: str | os.PathLike[str]) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return recordings_dir() / f"{_campaign_prefix(campaign, campaign_root)}-{stamp}-{os.getpid()}.jsonl"


def prune_recordings(campaign: str | None, campaign_root: str | os.PathLike[str],
                     keep: int = KEEP_RECORDINGS) -> list[Path]:
    """Delete all but the ``keep`` newest recordings of the campaign at ``campaign_root``
    (every console session writes one); returns the paths deleted. Another campaign's
    recordings are left alone whatever its name, and so are those named without a digest
    (``<name>-<time>-<pid>.jsonl``, as earlier versions wrote them), which name no root."""
    prefix = _campaign_prefix(campaign, campaign_root)
    named = re.compile(re.escape(prefix) + r"-[0-9]{8}T[0-9]{6}-[0-9]+\.jsonl")
    directory = recordings_dir()
    try:
        mine = [entry for entry in os.scandir(directory) if named.fullmatch(entry.name) and entry.is_file()]
    except OSError:
        return []
    # Newest first by the time in the name, then by mtime (two sessions in one second).
    mine.sort(key=lambda entry: (entry.name.rsplit("-", 2)[-2], entry.stat().st_mtime), reverse=True)
    deleted = []
    for entry in mine[keep:]:
        try:
            os.unlink(entry.path)
        except OSError:
            continue  # gone already, or not ours to delete: the next prune tries again
        deleted.append(Path(entry.path))
    return deleted


# Kinds recorded as the record's own fields (what ``episcope events`` writes) rather than as
# the object read: an ABBA ``result.json`` may be a run payload, which the live read scores
# with the repeat count of the request beside it, a file a recording does not hold. The
# scored verdict, ``gate`` included, is what ``parse_verdict`` reads back.
_RECORDED_AS_FIELDS = frozenset({ev.ABBA})


def _to_raw(kind: str, data: object) -> object:
    """What a recording keeps of an event's data: what its kind's parse reads back into the
    value the live read gave (the object read, where that is all the read used)."""
    raw = getattr(data, "raw", None)
    if isinstance(raw, dict) and not isinstance(data, dict) and kind not in _RECORDED_AS_FIELDS:
        return raw
    return event_to_json(Event(kind, "", None, None, data))["data"]


class Recorder:
    """Appends every event the console sees to a recording, whole lines only."""

    def __init__(self, path: Path, *, campaign_root: str | None, campaign: str | None, worktree: str | None) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._pending: list[bytes] = []
        header = {"schema": RECORDING_SCHEMA, "campaign_root": campaign_root, "campaign": campaign,
                  "worktree": worktree, "started_at": time.time()}
        self._pending.append(orjson.dumps(header) + b"\n")
        self.flush()

    def record(self, event: Event) -> None:
        line = {"kind": event.kind, "path": event.path, "offset": event.offset, "at": event.at,
                "data": _to_raw(event.kind, event.data)}
        self._pending.append(orjson.dumps(line, default=str, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")

    def flush(self) -> None:
        if self._pending and self._fd is not None:
            # One write per batch: a reader never sees half a line, even if we die here.
            os.write(self._fd, b"".join(self._pending))
            self._pending.clear()

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None


class RecordingHeader(msgspec.Struct, frozen=True):
    schema: str
    campaign_root: str | None = None
    campaign: str | None = None
    worktree: str | None = None
    started_at: float | None = None


class _RecordedProblem(msgspec.Struct):
    """A recorded ``Unreadable`` (a NamedTuple, which msgspec reads only from an array)."""

    path: str
    offset: int | None
    error: str


class _RecordedEvent(msgspec.Struct):
    """One line of a recording after the header; ``data`` is decoded by its kind's row."""

    kind: str
    path: str
    offset: int | None = None
    at: float | None = None
    data: msgspec.Raw = msgspec.Raw(b"null")


_header_decoder = msgspec.json.Decoder(RecordingHeader)
_line_decoder = msgspec.json.Decoder(_RecordedEvent)


def _decode_data(kind: str, data: bytes, path: str) -> object:
    """A recorded event's data as the type a live read gives (raises on data that is not)."""
    from .registry import BY_KIND

    if kind == ev.UNREADABLE:
        problem = msgspec.json.decode(data, type=_RecordedProblem)
        return Unreadable(problem.path, problem.offset, problem.error)
    if kind == ev.REMOVED:
        return msgspec.json.decode(data, type=str)
    artifact = BY_KIND.get(kind)
    if artifact is None:
        raise FormatError(f"unknown event kind {kind!r}")
    if artifact.layout == "lines" and artifact.parse is None:
        return artifact.reader()(data)  # the very reader that read the line from its file
    obj = msgspec.json.decode(data)
    if artifact.parse is None:
        return msgspec.convert(obj, artifact.record_type)
    value = artifact.parse(obj)
    # A receipt names its files relative to itself; the reader took its path from the
    # file, a recording keeps it as the event's path.
    return replace(value, path=path) if kind == ev.TIMELINE_RECEIPT else value


def load_recording(path: str | os.PathLike[str]) -> tuple[RecordingHeader, list[Event], list[Unreadable]]:
    """The events of a recording; lines that cannot be read are returned as problems,
    with the recording's path and the line's offset."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RecordingError(f"{path}: {exc.strerror or exc}") from None
    where = str(path)
    events: list[Event] = []
    problems: list[Unreadable] = []
    header = None
    offset = 0
    for line in data.split(b"\n"):
        here, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        if header is None:
            try:
                header = _header_decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                header = None
            if header is None or header.schema != RECORDING_SCHEMA:
                raise RecordingError(f"{path}: not an episcope recording (first line lacks schema {RECORDING_SCHEMA})")
            continue
        try:
            recorded = _line_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            problems.append(Unreadable(where, here, f"not a recorded event: {one_line(exc)}"))
            continue
        try:
            value = _decode_data(recorded.kind, bytes(recorded.data), recorded.path)
        except Exception as exc:  # whatever a reader raises, the recording still replays
            problems.append(Unreadable(where, here, f"{recorded.kind} event: {one_line(exc)}"))
            continue
        events.append(Event(recorded.kind, recorded.path, recorded.offset, recorded.at, value))
    if header is None:
        raise RecordingError(f"{path}: empty recording")
    return header, events, problems


def is_recording(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096)
        return bool(orjson.loads(first).get("schema") == RECORDING_SCHEMA)
    except (OSError, ValueError, AttributeError):
        return False


# -- an episode that was never watched ---------------------------------------------------------


def version_commit_times(campaign_root: str | os.PathLike[str]) -> dict[str, float]:
    """memory/v<N>.json -> when the commit that added it was made (git history)."""
    from .git_repo import GIT_TIMEOUT_SECONDS, open_repo, read_errors

    try:
        with open_repo(campaign_root) as repo:
            out = repo.git.log("--no-show-signature", "--no-ext-diff", "--no-textconv", "--format=%x00%ct",
                               "--name-only", "--diff-filter=A", "--", "memory/", kill_after_timeout=GIT_TIMEOUT_SECONDS)
    except read_errors():
        return {}
    times: dict[str, float] = {}
    for block in out.split("\0"):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines or not lines[0].strip().isdigit():
            continue
        when = float(lines[0])
        for name in lines[1:]:
            # git log lists newest first: the oldest commit adding a path wins.
            times[str(Path(campaign_root) / name)] = when
    return times


def episode_events(path: str | os.PathLike[str] | None) -> tuple[Workspace, list[Event]]:
    """(workspace, events) read from the files of an episode, for replay."""
    from .session import Session

    session = Session(path)
    events = list(session.ingest.scan(final=True))
    committed = version_commit_times(session.workspace.campaign_root)
    if committed:
        events = [
            e._replace(at=committed[e.path]) if e.kind == ev.MEMORY_VERSION and e.path in committed else e
            for e in events
        ]
    return session.workspace, events


# -- the virtual clock -------------------------------------------------------------------------


def _order(events: Iterable[Event]) -> list[Event]:
    """Time order; events without a time keep their place before the first timed one."""
    indexed = list(enumerate(events))
    first = min((e.at for _, e in indexed if e.at is not None), default=0.0)
    indexed.sort(key=lambda item: (item[1].at if item[1].at is not None else first, item[0]))
    return [e for _, e in indexed]


@dataclass(frozen=True, slots=True)
class Mark:
    """A place the operator can jump to: a phase start or a canonical memory version."""

    kind: str  # "phase" | "version"
    label: str
    index: int  # position just after the event
    at: float | None


class Replay:
    def __init__(self, events: Iterable[Event], *, campaign_root: str | None = None, campaign: str | None = None,
                 worktree: str | None = None) -> None:
        self.events = _order(events)
        self.times = [e.at for e in self.events]
        known = [t for t in self.times if t is not None]
        self.start = known[0] if known else None
        self.end = known[-1] if known else None
        self._sort_times = [t if t is not None else (self.start or 0.0) for t in self.times]
        self._meta = (campaign_root, campaign, worktree)
        self.position = 0
        self.now = self.start
        self.playing = False
        self.speed_index = SPEEDS.index(1.0)
        self._reducer = self._new_reducer()
        self.marks = self._find_marks()

    def _new_reducer(self) -> Reducer:
        from .reducer import Reducer

        reducer = Reducer()
        reducer.set_workspace(*self._meta)
        return reducer

    def _find_marks(self) -> list[Mark]:
        marks = []
        for index, event in enumerate(self.events):
            if event.kind == ev.TELEMETRY and event.data.event == "phase_started":
                data = event.data
                marks.append(Mark("phase", f"{data.phase} {data.iteration_id}/{data.attempt_id}", index + 1, event.at))
            elif event.kind == ev.MEMORY_VERSION:
                marks.append(Mark("version", f"v{event.data.version}", index + 1, event.at))
        return marks

    # -- state ---------------------------------------------------------------------------

    @property
    def speed(self) -> float:
        return SPEEDS[self.speed_index]

    @property
    def total(self) -> int:
        return len(self.events)

    @property
    def finished(self) -> bool:
        return self.position >= self.total

    def state(self) -> EpisodeState:
        return self._reducer.snapshot()

    def fraction(self) -> float:
        if self.start is None or self.end is None or self.end <= self.start or self.now is None:
            return self.position / self.total if self.total else 0.0
        return min(1.0, max(0.0, (self.now - self.start) / (self.end - self.start)))

    def current_event(self) -> Event | None:
        return self.events[self.position - 1] if self.position else None

    # -- moving --------------------------------------------------------------------------

    def seek_index(self, index: int) -> None:
        index = max(0, min(self.total, index))
        if index < self.position:
            self._reducer = self._new_reducer()
            self._reducer.feed(self.events[:index])
        else:
            self._reducer.feed(self.events[self.position:index])
        self.position = index
        at = self.times[index - 1] if index else self.start
        self.now = at if at is not None else self.now

    def seek_time(self, moment: float) -> None:
        self.seek_index(bisect_right(self._sort_times, moment))
        self.now = moment

    def seek_fraction(self, fraction: float) -> None:
        if self.start is None or self.end is None:
            self.seek_index(round(fraction * self.total))
            return
        self.seek_time(self.start + fraction * (self.end - self.start))

    def step(self, direction: int) -> None:
        self.seek_index(self.position + (1 if direction > 0 else -1))

    def jump(self, kind: str, direction: int) -> Mark | None:
        """To the next (or previous) mark of ``kind`` after (before) the current position."""
        candidates = [m for m in self.marks if m.kind == kind]
        if direction > 0:
            target = next((m for m in candidates if m.index > self.position), None)
        else:
            target = next((m for m in reversed(candidates) if m.index < self.position), None)
        if target is not None:
            self.seek_index(target.index)
        return target

    def advance(self, wall_seconds: float) -> bool:
        """Let ``wall_seconds`` of real time pass at the current speed; True if events were applied."""
        if not self.playing or self.now is None:
            return False
        target = self.now + wall_seconds * self.speed
        before = self.position
        index = bisect_right(self._sort_times, target)
        if index > self.position:
            self._reducer.feed(self.events[self.position:index])
            self.position = index
        self.now = target if self.end is None else min(target, self.end)
        if self.position >= self.total and (self.end is None or self.now >= self.end):
            self.playing = False
        return self.position != before

    def toggle(self) -> bool:
        if self.finished and not self.playing:
            self.seek_index(0)
        self.playing = not self.playing
        return self.playing

    def faster(self, direction: int) -> float:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + (1 if direction > 0 else -1)))
        return self.speed
