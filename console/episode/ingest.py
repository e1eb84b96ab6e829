"""Turning a workspace's files into events: a cold scan, then incremental refreshes.

``Ingest`` walks the workspace roots and asks the artifact registry (registry.py) what
each file is; it reads line files through a ``Tailer`` (only appended bytes) and whole
documents only when their size, mtime or inode changed. ``Session.follow_events`` calls
``refresh`` with the paths watchfiles reports.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from console.formats.job_record import JobRecord, job_record_from_obj
from console.formats.problems import FormatError, Unreadable, one_line
from console.formats.telemetry import decode_folded_lines, record_epoch

from . import events as ev
from .clock import iso_to_epoch
from .episodes import archived_episode
from .events import Event
from .git_repo import head_stamp
from .guards import GIT_RULE_DIRS, GIT_RULE_FILES, read_by_git_rules
from .incumbent import incumbent_version_commit
from .locations import WORKTREES_DIR
from .registry import ARTIFACTS, EPISODES_DIR, PROFILES, WORKTREE_FILES, Artifact, artifact_at
from .tailer import Tailer
from .workspace import Workspace

if TYPE_CHECKING:
    from .reducer import Reducer

Stamp = tuple[int, int, int]  # (inode, size, mtime in ns) of a file

SKIP_DIRS = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".hypothesis",
     WORKTREES_DIR, "archive", "slots", ".whl", "harness"}
)
MAX_DEPTH = 8
# What is read outside the roots shown (registry.Artifact.every_worktree), by the directory of
# a worktree it lives in: the profiles, the sandbox job records and their logs.
EVERY_WORKTREE: dict[str, frozenset[str]] = {
    place: frozenset(row.kind for row in ARTIFACTS if row.every_worktree == place)
    for place in dict.fromkeys(row.every_worktree for row in ARTIFACTS if row.every_worktree)
}


def _no_link_below(base: Path, relative: str) -> bool:
    """Whether ``base/relative`` is reached without a symbolic link below ``base``. The walk
    never follows a link it meets; a place it starts from outside the roots shown (another
    worktree's profiles/, an ended episode's archived files) must not be one either, or a
    link there would have it read a foreign tree (``profiles -> /``)."""
    path = base
    for part in PurePosixPath(relative).parts:
        path = path / part
        if path.is_symlink():
            return False
    return True


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Ingest:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._tailers: dict[str, tuple[Artifact, Tailer]] = {}  # line file -> (artifact, tailer)
        self._documents: dict[str, tuple[Artifact, Stamp | None]] = {}  # document -> (artifact, stamp)
        # directory -> (artifact, stamps of its files)
        self._directories: dict[str, tuple[Artifact, tuple[Stamp | None, ...]]] = {}
        self._git_context: dict[str, str | None] = {"base": None, "candidate": None}
        self._git_context_rank: tuple[int, int] = (0, -1)  # (live, archived episode) of its records
        self._git_stamp: tuple[object, ...] | None = None
        self._git_context_at: float | None = None  # when the documents naming base/candidate last named new ones
        # memory/v<N>.json -> its record: the incumbent version's commit is the candidate's
        # base where no episode names one (GitFacts.candidate_base)
        self._memory_versions: dict[str, Any] = {}

    # -- discovery -----------------------------------------------------------------------

    def _places(self, shown_only: bool = False) -> Iterator[tuple[str, str, bool, frozenset[str] | None]]:
        """Where to walk: (directory, its path relative to its root, whether that root is the
        campaign's, the kinds read there; None: every kind). The roots shown, then the profiles
        and job records of the campaign's other worktrees, and the profiles of its ended
        episodes' archived worktree files: an episode's record is the same whichever of its
        worktrees, or the campaign, opened it. ``shown_only``: the roots shown alone."""
        campaign_root = self.workspace.campaign_root
        for root in self.workspace.roots:
            yield str(root), "", root == campaign_root, None
        if shown_only:
            return
        for directory, prefix, kinds in self._other_places():
            yield directory, prefix, False, kinds

    def _other_places(self) -> Iterator[tuple[str, str, frozenset[str]]]:
        """(directory, its path relative to its root, the kinds read there) of each directory
        read outside the roots shown."""
        shown = set(self.workspace.roots)
        for worktree in self.workspace.worktrees:
            if worktree not in shown:
                for place, kinds in EVERY_WORKTREE.items():
                    if _no_link_below(worktree, place):
                        yield str(worktree / place), place, kinds
        episodes = self.workspace.campaign_root / EPISODES_DIR
        try:
            names = sorted(entry.name for entry in os.scandir(episodes) if entry.is_dir(follow_symlinks=False))
        except OSError:
            return
        for name in names:  # registry.artifact_at keeps only the eNNNN ones
            prefix = f"{EPISODES_DIR}{name}/{WORKTREE_FILES}{PROFILES}"
            if _no_link_below(self.workspace.campaign_root, prefix):
                yield str(self.workspace.campaign_root / prefix), prefix, EVERY_WORKTREE[PROFILES]

    def _walk(self, shown_only: bool = False) -> Iterator[tuple[Artifact, str]]:
        """(artifact, absolute path) of every artifact file under the workspace's places
        (``shown_only``: under the roots shown)."""
        for top, top_prefix, campaign, kinds in self._places(shown_only):
            # The relative path is carried down the walk ("a/b/"), not recomputed per file.
            stack = [(top, top_prefix, 0)]
            while stack:
                directory, prefix, depth = stack.pop()
                try:
                    entries = list(os.scandir(directory))
                except OSError:
                    continue
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if depth < MAX_DEPTH and entry.name not in SKIP_DIRS:
                            stack.append((entry.path, f"{prefix}{entry.name}/", depth + 1))
                    elif entry.is_file(follow_symlinks=False):
                        artifact = artifact_at(prefix + entry.name)
                        if artifact is not None and (campaign or not artifact.campaign_only) and (
                                kinds is None or artifact.kind in kinds):
                            yield artifact, entry.path

    def _found(self, shown_only: bool = False) -> list[tuple[Artifact, str]]:
        """Every artifact file, documents first: a cold scan then reads line files, by far
        the biggest, last."""
        return sorted(self._walk(shown_only), key=lambda item: (item[0].layout == "lines", item[1]))

    def _artifact_of(self, path: str) -> Artifact | None:
        """What a path is: remembered from an earlier read, else found by its place."""
        for known in (self._tailers, self._documents, self._directories):
            if path in known:
                return known[path][0]
        directory = self._directories.get(os.path.dirname(path))
        if directory is not None:
            return directory[0]
        for top, top_prefix, campaign, kinds in self._places():
            try:
                rel = os.path.relpath(path, top)
            except ValueError:
                continue
            if rel.startswith(".."):
                continue
            parts = rel.split(os.sep)
            if any(p in SKIP_DIRS for p in parts[:-1]):
                continue  # not walked from here (an archived profile is, from its own place)
            artifact = artifact_at(top_prefix + "/".join(parts))
            if artifact is not None and artifact.campaign_only and not campaign:
                continue
            if artifact is not None and kinds is not None and artifact.kind not in kinds:
                continue
            return artifact
        return None

    # -- reading -------------------------------------------------------------------------

    def scan(self, *, final: bool = False) -> Iterator[Event]:
        """Every event the workspace holds now (a generator: a huge file streams)."""
        for batch in self.scan_batches(final=final):
            yield from batch

    def scan_batches(self, *, git: bool = True, final: bool = False, shown_only: bool = False) -> Iterator[list[Event]]:
        """The cold scan in batches of at most one read chunk of a line file, the git facts
        last (``git=False``: left to the next ``refresh``; ``shown_only``: the roots shown
        alone, the campaign's other worktrees and ended episodes' files likewise left).

        ``final``: a one-shot read that no ``refresh`` will follow (``status``, ``events``
        without ``--follow``, replay): a line file's last line is read even without its
        newline (``Tailer.batches``). A live session leaves it for the writer to finish."""
        for artifact, path in self._found(shown_only):
            if artifact.layout == "lines":
                yield from self.read_lines_batched(artifact, path, final=final)
            else:
                yield self._read(artifact, path)
        if git:
            yield self._git_events(force=True)

    def scan_into(self, reducer: Reducer, *, git: bool = True, final: bool = False, shown_only: bool = False) -> None:
        """The cold scan folded straight into ``reducer`` (what ``status`` needs).

        Telemetry is decoded a chunk at a time into ``TelemetryRecord``s and
        handed over without Event objects; a read chunk with a bad line, and every other
        file, go through events as usual. ``final`` as for ``scan_batches``.
        """
        for artifact, path in self._found(shown_only):
            if artifact.kind == ev.TELEMETRY:
                tailer = self._tailer(artifact, path)
                failed_before = tailer.error
                for base, lines in tailer.batches(final=final):
                    records = decode_folded_lines(lines)
                    if records is None:
                        reducer.feed(_line_events(artifact, path, base, lines, tailer.mtime, tailer.unterminated))
                    else:
                        reducer.fold_telemetry(path, records)
                reducer.feed(self._read_failure(artifact, path, failed_before))
            elif artifact.layout == "lines":
                for batch in self.read_lines_batched(artifact, path, final=final):
                    reducer.feed(batch)
            else:
                reducer.feed(self._read(artifact, path))
        if git:
            reducer.feed(self._git_events(force=True))

    def refresh(self, changed: Iterable[str] | None = None) -> list[Event]:
        """Events for what changed: the given paths, or (None) a full re-check."""
        out: list[Event] = []
        if changed is None:
            known: dict[str, tuple[Artifact, object]] = {**self._tailers, **self._documents, **self._directories}
            for artifact, path in self._walk():
                known.pop(os.path.dirname(path) if artifact.layout == "directory" else path, None)
                out.extend(self._read(artifact, path))
            for path, (artifact, _) in known.items():  # vanished since the last look
                out.extend(self._read(artifact, path))
            out.extend(self._git_events(force=False))
            return out
        git_due = False
        for path in sorted(set(changed)):
            found = self._artifact_of(path)
            if found is not None:
                out.extend(self._read(found, path))
            if self._read_by_git_rules(path) or (
                    found is not None and found.kind in (ev.HANDOFF, ev.JOURNAL, ev.ACTIVE_EPISODE)):
                git_due = True
        if git_due:
            out.extend(self._git_events(force=True))
        return out

    def _read(self, artifact: Artifact, path: str) -> list[Event]:
        if artifact.layout == "lines":
            return [event for batch in self.read_lines_batched(artifact, path) for event in batch]
        if artifact.layout == "directory":
            return self._read_directory(artifact, path if path in self._directories else os.path.dirname(path))
        return self._read_document(artifact, path)

    def _tailer(self, artifact: Artifact, path: str) -> Tailer:
        """The line file's tailer, made on first use; it remembers how far the file was read."""
        known = self._tailers.get(path)
        if known is None:
            known = self._tailers[path] = (artifact, Tailer(path))
        return known[1]

    def _read_failure(self, artifact: Artifact, path: str, failed_before: str | None) -> list[Event]:
        """An unreadable event for each line the last read skipped as longer than the tailer
        allows (a line is skipped, so reported, once), then one for a line file the last read
        could not read, unless the read before failed the same way (a live session retries
        every tick: one event, not one a tick). Whatever read it next starts it over
        (``Tailer``), which drops the event."""
        tailer = self._tailer(artifact, path)
        too_long = [Event(ev.UNREADABLE, path, offset, tailer.mtime,
                          Unreadable(path, offset, f"line longer than {tailer.max_line} bytes"))
                    for offset in tailer.too_long]
        if tailer.error is None or (tailer.error == failed_before and not tailer.reset):
            return too_long
        stamp = _stamp(path)
        at = stamp[2] / 1e9 if stamp is not None else _removed_at(path)
        return [*too_long, Event(ev.UNREADABLE, path, None, at, Unreadable(path, None, one_line(tailer.error)))]

    def read_lines_batched(self, artifact: Artifact, path: str, *, final: bool = False) -> Iterator[list[Event]]:
        """Line events in read-chunk-sized batches (a huge file streams); ``final`` as for
        ``scan_batches``. A file that could not be read is an unreadable event after the
        lines read before the failure."""
        tailer = self._tailer(artifact, path)
        failed_before = tailer.error
        first = True
        for base, lines in tailer.batches(final=final):
            out = [Event(ev.REMOVED, path, None, _removed_at(path), artifact.kind)] if first and tailer.reset else []
            first = False
            out += _line_events(artifact, path, base, lines, tailer.mtime, tailer.unterminated)
            yield out
        if first and tailer.reset:
            yield [Event(ev.REMOVED, path, None, _removed_at(path), artifact.kind)]
        failure = self._read_failure(artifact, path, failed_before)
        if failure:
            yield failure

    def _read_document(self, artifact: Artifact, path: str) -> list[Event]:
        stamp = _stamp(path)
        previous = self._documents.get(path)
        if previous is not None and previous[1] == stamp:
            return []
        self._documents[path] = (artifact, stamp)
        if stamp is None:
            self._memory_versions.pop(path, None)
            return [Event(ev.REMOVED, path, None, _removed_at(path), artifact.kind)] if previous is not None else []
        at = stamp[2] / 1e9
        try:
            result = artifact.reader()(path)
        except Exception as exc:  # a reader bug becomes a visible problem, not a crash
            return [Event(ev.UNREADABLE, path, None, at, Unreadable(path, None, f"reader error: {one_line(exc)}"))]
        events = [Event(ev.UNREADABLE, path, p.offset, at, p) for p in result.problems]
        if result.value is not None:
            self._remember_git_context(artifact.kind, path, result.value, at)
            event = Event(artifact.kind, path, None, at, result.value)
            events += job_stages(event) if artifact.kind == ev.JOB and previous is None else [event]
        # after the document: its reading clears the problems of its last reading
        events += [Event(ev.UNREADABLE, path, p.offset, at, p) for p in self.workspace.problems if p.path == path]
        return events

    def _read_directory(self, artifact: Artifact, directory: str) -> list[Event]:
        names = list(dict.fromkeys(pattern.rsplit("/", 1)[-1] for pattern in artifact.patterns))
        stamp = tuple(_stamp(os.path.join(directory, name)) for name in names)
        previous = self._directories.get(directory)
        if previous is not None and previous[1] == stamp:
            return []
        self._directories[directory] = (artifact, stamp)
        latest = max((s[2] for s in stamp if s is not None), default=None)
        at = latest / 1e9 if latest is not None else _removed_at(directory)
        if all(s is None for s in stamp):
            return [Event(ev.REMOVED, directory, None, at, artifact.kind)]
        try:
            result, problems = artifact.reader()(directory)
        except Exception as exc:
            return [Event(ev.UNREADABLE, directory, None, at, Unreadable(directory, None, f"reader error: {one_line(exc)}"))]
        events = [Event(ev.UNREADABLE, p.path, p.offset, at, p) for p in problems]
        if result is not None:
            events.append(Event(artifact.kind, directory, None, at, result))
        return events

    # -- git -----------------------------------------------------------------------------

    def _read_by_git_rules(self, path: str) -> bool:
        """Whether a changed path can change a git rule's answer (guards.read_by_git_rules):
        an edit to the evaluator must show at once, an appended telemetry line runs no git."""
        rel = os.path.relpath(path, self.workspace.episode_root)
        return not rel.startswith("..") and read_by_git_rules(rel)

    def _remember_git_context(self, kind: str, path: str, value: Any, at: float) -> None:
        """The base and candidate the git facts are read against: the live episode's records
        win over archived ones, a later archived episode over an earlier one, whatever order
        the files are read in (an in-flight episode must not show the last one's candidate)."""
        if kind == ev.MEMORY_VERSION:
            self._memory_versions[path] = value
            if getattr(value, "git_commit_hash", None):  # it may be the new base of last resort
                self._git_context_at = max(at, self._git_context_at or at)
            return
        archived = archived_episode(path)
        rank = (1, 0) if archived is None else (0, archived)
        if kind in (ev.ACTIVE_EPISODE, ev.JOURNAL, ev.HANDOFF):
            if rank < self._git_context_rank:
                return
            if rank > self._git_context_rank:
                self._git_context_rank = rank
                self._git_context = {"base": None, "candidate": None}
        if kind in (ev.ACTIVE_EPISODE, ev.JOURNAL):
            base = getattr(value, "base_commit", None)
            if base and base != self._git_context["base"]:
                self._git_context["base"] = base
                self._git_context_at = max(at, self._git_context_at or at)
        if kind in (ev.HANDOFF, ev.JOURNAL):
            candidate = getattr(value, "candidate_commit", None)
            if candidate and candidate != self._git_context["candidate"]:
                self._git_context["candidate"] = candidate
                self._git_context_at = max(at, self._git_context_at or at)

    def _git_events(self, *, force: bool) -> list[Event]:
        root = self.workspace.episode_root
        if not (root / ".git").exists():
            return []
        files, head = tuple(_stamp(str(root / name)) for name in GIT_RULE_FILES), head_stamp(root)
        directories = tuple(_stamp(str(root / name)) for name in GIT_RULE_DIRS)
        version = incumbent_version_commit(self._memory_versions.values())
        stamp = (files, directories, tuple(self._git_context.values()), version, head)
        if not force and stamp == self._git_stamp:
            return []
        self._git_stamp = stamp
        from .git_facts import read_git_facts

        facts = read_git_facts(root, base_commit=self._git_context["base"], version_commit=version,
                               candidate_commit=self._git_context["candidate"])
        # The facts are as of the last change to what they are read from (kernel.py, the
        # protected files, HEAD, the index, the documents naming base and candidate), not as
        # of this read: an archive opened days later still replays on the episode's own clock.
        # (A directory's mtime is when it was unpacked.)
        moments = [s[2] / 1e9 for s in (*files, *(head or ())) if s is not None]
        if self._git_context_at is not None:
            moments.append(self._git_context_at)
        return [Event(ev.GIT, str(root), None, max(moments) if moments else _removed_at(str(root / "kernel.py")), facts)]


# What a job record holds only once its job has reached a stage (console.jobs.record
# writes the whole record when queued, when running and at the end).
_SET_AT_RUNNING = ("started_at", "operation_id")
_SET_AT_END = ("finished_at", "exit_code", "result_code", "message", "synced", "refused")


def job_stages(event: Event) -> list[Event]:
    """A job record read for the first time, as the stages it went through: queued at its
    ``created_at``, running at its ``started_at``, then as it stands (ended at its
    ``finished_at``).

    A record first read after its job ended (an episode never watched, an archive) would
    otherwise say only how the job ended, and replay would never show the jobs that ran
    at once running together. A stage whose time the record lacks is left out.
    """
    record: JobRecord = event.data
    created, started = iso_to_epoch(record.created_at), iso_to_epoch(record.started_at)
    ended = iso_to_epoch(record.finished_at) if record.terminal else None
    at = ended if ended is not None and event.at is not None and ended <= event.at else event.at
    out: list[Event] = []
    if record.state != "queued" and created is not None and at is not None and created <= at:
        out.append(event._replace(at=created, data=_job_at_stage(record, "queued", _SET_AT_RUNNING + _SET_AT_END)))
    if record.terminal and started is not None and at is not None and started <= at:
        out.append(event._replace(at=started, data=_job_at_stage(record, "running", _SET_AT_END)))
    out.append(event._replace(at=at))
    return out


def _job_at_stage(record: JobRecord, state: str, not_yet: tuple[str, ...]) -> JobRecord:
    return job_record_from_obj({**record.raw, "state": state, **dict.fromkeys(not_yet)})


def _removed_at(path: str) -> float:
    """When ``path`` went away or was replaced: its directory's mtime (an entry removed or
    renamed changes it), else the time of looking."""
    try:
        return os.stat(os.path.dirname(path)).st_mtime
    except OSError:
        return time.time()


def _line_events(artifact: Artifact, path: str, base: int, lines: list[bytes], written_by: float | None,
                 unterminated: int | None = None) -> list[Event]:
    """One event per line, parsed alone: a bad line becomes an Unreadable at its offset.
    ``lines`` start at byte ``base`` of the file; empty ones are skipped. A line whose format
    states no time is placed at ``written_by``, the file's mtime when it was read (the line
    was written by then), so replay never shows it earlier than it could have happened.
    The line at ``unterminated`` lacks its newline: if it cannot be parsed, its writer most
    likely stopped half-way, and the problem says so."""
    read = artifact.reader()
    out: list[Event] = []
    offset = base
    for line in lines:
        here, offset = offset, offset + len(line) + 1
        if not line:
            continue
        cut_short = "incomplete last line (no newline at its end): " if here == unterminated else ""
        try:
            record = read(line)
        except FormatError as exc:
            out.append(Event(ev.UNREADABLE, path, here, written_by, Unreadable(path, here, cut_short + one_line(exc))))
        except Exception as exc:  # a parser bug must not hide the record's position
            out.append(Event(ev.UNREADABLE, path, here, written_by,
                             Unreadable(path, here, f"{cut_short}parser error: {one_line(exc)}")))
        else:
            # A format with times of its own keeps a missing one unknown (the record is at
            # fault); one without (job logs, ABBA runs) takes the file's.
            at = _record_time(record) if hasattr(record, "timestamp") else written_by
            out.append(Event(artifact.kind, path, here, at, record))
    return out


def _record_time(record: object) -> float | None:
    """The wall-clock time a record states (seconds since the epoch), if any."""
    timestamp = getattr(record, "timestamp", None)
    if isinstance(timestamp, datetime):
        return record_epoch(timestamp)
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return float(timestamp)
    return iso_to_epoch(timestamp)
