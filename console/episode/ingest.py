"""Turning a workspace's files into events: a cold scan, then incremental refreshes.

``Ingest`` knows which files of FORMATS §1 carry which artifact, reads line files through
a ``Tailer`` (only appended bytes) and whole documents only when their size, mtime or
inode changed. ``follow`` (live.py) calls ``refresh`` with the paths watchfiles reports.
Parsers come from console.formats; ingest only decides which parser a path needs.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import accumulate, repeat
from pathlib import Path

from console.formats.problems import FormatError, Unreadable, one_line
from console.formats.telemetry import decode_telemetry_all, decode_telemetry_block, record_epoch, record_epochs

from . import events as ev
from .clock import iso_to_epoch
from .events import Event
from .tailer import Tailer
from .workspace import RUNTIME_DIR, WORKTREES_DIR, Workspace

SKIP_DIRS = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".hypothesis",
     WORKTREES_DIR, "archive", "slots", ".whl", "harness"}
)
MAX_DEPTH = 8

_MEMORY_VERSION = re.compile(r"^v\d+\.json$")

# kind -> (module, function) of the document reader; imported on first use so a
# headless verb pays only for the readers its workspace needs.
DOCUMENT_READERS = {
    ev.STATE: ("console.formats.supervisor", "read_state"),
    ev.ACTIVE_EPISODE: ("console.formats.supervisor", "read_active_episode"),
    ev.ATTEMPT: ("console.formats.supervisor", "read_attempt"),
    ev.JOURNAL: ("console.formats.journal", "read_journal"),
    ev.HANDOFF: ("console.formats.handoff", "read_handoff"),
    ev.LIVE_MEMORY: ("console.formats.live_memory", "read_live_memory"),
    ev.MEMORY_VERSION: ("console.formats.memory", "read_memory_version"),
    ev.TELEMETRY_SUMMARY: ("console.formats.telemetry_summary", "read_telemetry_summary"),
    ev.ABBA: ("console.formats.abba", "read_abba_verdict"),
    ev.TIMELINE_RECEIPT: ("console.formats.timeline", "read_timeline_receipt"),
    ev.TIMELINE_MEASUREMENT: ("console.formats.timeline", "read_timeline_measurement"),
    ev.JOB: ("console.formats.job_record", "read_job_record"),
}
LINE_PARSERS = {
    ev.TELEMETRY: ("console.formats.telemetry", "parse_telemetry_line"),  # hot path: _telemetry_events
    ev.EVALUATION: ("console.formats.evaluations", "parse_evaluation_line"),
    ev.MEASURE_RUN: ("console.formats.timeline", "parse_measure_run_line"),
    ev.ABBA_RUN: ("console.formats.abba", "parse_abba_run_line"),
}
GIT_TRIGGERS = frozenset({"kernel.py"})
# Kinds only the campaign root holds: a worktree is a checkout of the base commit, so its
# memory/ is a copy of what the campaign already says (and editing it is a guard alert).
CAMPAIGN_KINDS = frozenset(
    {ev.STATE, ev.ACTIVE_EPISODE, ev.ATTEMPT, ev.TELEMETRY_SUMMARY, ev.MEMORY_VERSION, ev.LIVE_MEMORY}
)


def _resolve(spec: tuple[str, str]):
    module, name = spec
    return getattr(importlib.import_module(module), name)


def classify(rel: str) -> str | None:
    """The artifact kind of a path relative to a campaign root or worktree (None: not ours)."""
    parts = rel.split("/")
    name = parts[-1]
    if parts[0] == RUNTIME_DIR:
        if len(parts) == 2:
            return {
                "telemetry.jsonl": ev.TELEMETRY,
                "evaluations.jsonl": ev.EVALUATION,
                "state.json": ev.STATE,
                "active_episode.json": ev.ACTIVE_EPISODE,
                "journal.json": ev.JOURNAL,
                "handoff.json": ev.HANDOFF,
            }.get(name)
        if len(parts) == 4 and parts[1] == "episodes":
            return {"attempt.json": ev.ATTEMPT, "telemetry.summary.json": ev.TELEMETRY_SUMMARY}.get(name)
        if len(parts) == 4 and parts[1] == "sandbox" and name == "job.json":
            return ev.JOB
    if parts[0] == "memory" and len(parts) == 2:
        if name == "live.json":
            return ev.LIVE_MEMORY
        if _MEMORY_VERSION.match(name):
            return ev.MEMORY_VERSION
        return None
    if len(parts) >= 3 and parts[-3] == ".atrex_long_horizon_verify":
        return {"result.json": ev.ABBA, "runs.jsonl": ev.ABBA_RUN}.get(name)
    if parts[0] == "profiles" and name in ("gateway_profile.json", "summary.txt"):
        return ev.PROFILE
    if name == "receipt.json":
        return ev.TIMELINE_RECEIPT
    if name.endswith(".runs.jsonl"):
        return ev.MEASURE_RUN
    if name.endswith(".json") and "measurement" in name:
        return ev.TIMELINE_MEASUREMENT
    return None


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Ingest:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._tailers: dict[str, tuple[str, Tailer]] = {}  # path -> (kind, tailer)
        self._documents: dict[str, tuple[str, tuple | None]] = {}  # path -> (kind, stamp)
        self._profiles: dict[str, tuple | None] = {}  # profile dir -> combined stamp
        self._git_context: dict[str, str | None] = {"base": None, "candidate": None}
        self._git_stamp: tuple | None = None

    # -- discovery -----------------------------------------------------------------------

    def _walk(self) -> Iterator[tuple[str, str]]:
        """(kind, absolute path) of every artifact file under the workspace roots."""
        for root in self.workspace.roots:
            # The relative path is carried down the walk ("a/b/") rather than recomputed
            # with os.path.relpath, which was most of the walk's cost on `status`.
            stack = [(str(root), "", 0)]
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
                        kind = classify(prefix + entry.name)
                        if kind is not None and (root == self.workspace.campaign_root or kind not in CAMPAIGN_KINDS):
                            yield kind, entry.path

    # -- reading -------------------------------------------------------------------------

    def scan(self) -> Iterator[Event]:
        """Every event the workspace holds now (a generator: a huge file streams)."""
        for batch in self.scan_batches():
            yield from batch

    def scan_into(self, reducer) -> None:
        """The cold scan folded straight into ``reducer`` (what ``status`` needs).

        Telemetry blocks that decode cleanly go to ``Reducer.fold_telemetry_rows`` as
        rows, without per-line offsets or Event objects; a block with a bad line, and
        everything else, goes through events as usual.
        """
        found = sorted(self._walk(), key=lambda item: (item[0] in LINE_PARSERS, item[1]))
        for kind, path in found:
            if kind != ev.TELEMETRY:
                for batch in (self.read_lines_batched(kind, path) if kind in LINE_PARSERS else [self._read(kind, path)]):
                    reducer.feed(batch)
                continue
            for base, block in self._tailer(kind, path).blocks():
                decoded = decode_telemetry_block(block)
                if decoded is not None:
                    reducer.fold_telemetry_rows(path, *decoded)
                else:
                    out: list[Event] = []
                    _record_events(ev.TELEMETRY, (base, bytes(block).split(b"\n")), path, out)
                    reducer.feed(out)
        reducer.feed(self._git_events(force=True))

    def scan_batches(self) -> Iterator[list[Event]]:
        """The cold scan in batches of at most one read chunk of a line file."""
        found = sorted(self._walk(), key=lambda item: (item[0] in LINE_PARSERS, item[1]))
        for kind, path in found:
            if kind in LINE_PARSERS:
                yield from self.read_lines_batched(kind, path)
            else:
                yield self._read(kind, path)
        yield self._git_events(force=True)

    def refresh(self, changed: Iterable[str] | None = None) -> list[Event]:
        """Events for what changed: the given paths, or (None) a full re-check."""
        out: list[Event] = []
        if changed is None:
            known = set(self._tailers) | set(self._documents)
            for kind, path in self._walk():
                known.discard(path)
                out.extend(self._read(kind, path))
            for path in known:  # vanished since the last look
                out.extend(self._read(self._kind_of(path), path))
            out.extend(self._git_events(force=False))
            return out
        git_due = False
        for path in sorted(set(changed)):
            kind = self._kind_of(path)
            if kind is None:
                kind = self._classify_abs(path)
            if kind is not None:
                out.extend(self._read(kind, path))
            if os.path.basename(path) in GIT_TRIGGERS or kind in (ev.HANDOFF, ev.JOURNAL, ev.ACTIVE_EPISODE):
                git_due = True
        if git_due:
            out.extend(self._git_events(force=True))
        return out

    def _kind_of(self, path: str) -> str | None:
        if path in self._tailers:
            return self._tailers[path][0]
        if path in self._documents:
            return self._documents[path][0]
        if os.path.dirname(path) in self._profiles:
            return ev.PROFILE
        return None

    def _classify_abs(self, path: str) -> str | None:
        for root in self.workspace.roots:
            try:
                rel = os.path.relpath(path, root)
            except ValueError:
                continue
            if rel.startswith(".."):
                continue
            parts = rel.split(os.sep)
            if any(p in SKIP_DIRS for p in parts[:-1]):
                return None
            kind = classify("/".join(parts))
            if kind in CAMPAIGN_KINDS and Path(root) != self.workspace.campaign_root:
                continue
            return kind
        return None

    def _read(self, kind: str | None, path: str) -> list[Event]:
        if kind is None:
            return []
        if kind in LINE_PARSERS:
            return list(self._read_lines(kind, path))
        if kind == ev.PROFILE:
            return self._read_profile(os.path.dirname(path))
        return self._read_document(kind, path)

    def _tailer(self, kind: str, path: str) -> Tailer:
        """The line file's tailer, made on first use; it remembers how far the file was read."""
        known = self._tailers.get(path)
        if known is None:
            known = self._tailers[path] = (kind, Tailer(path))
        return known[1]

    def read_lines_batched(self, kind: str, path: str) -> Iterator[list[Event]]:
        """Line events in chunk-sized batches (the cold-ingest path for huge files)."""
        tailer = self._tailer(kind, path)
        first = True
        for batch in tailer.batches():
            out: list[Event] = []
            if first and tailer.reset:
                out.append(Event(ev.REMOVED, path, None, time.time(), kind))
            first = False
            if kind == ev.TELEMETRY:
                _telemetry_events(batch, path, out)
            else:
                _record_events(kind, batch, path, out)
            yield out
        if first and tailer.reset:
            yield [Event(ev.REMOVED, path, None, time.time(), kind)]

    def _read_lines(self, kind: str, path: str) -> Iterator[Event]:
        for batch in self.read_lines_batched(kind, path):
            yield from batch

    def _read_document(self, kind: str, path: str) -> list[Event]:
        stamp = _stamp(path)
        previous = self._documents.get(path)
        if previous is not None and previous[1] == stamp:
            return []
        self._documents[path] = (kind, stamp)
        if stamp is None:
            return [Event(ev.REMOVED, path, None, time.time(), kind)] if previous is not None else []
        at = stamp[2] / 1e9
        try:
            result = _resolve(DOCUMENT_READERS[kind])(path)
        except Exception as exc:  # a reader bug becomes a visible problem, not a crash
            return [Event(ev.UNREADABLE, path, None, at, Unreadable(path, None, f"reader error: {one_line(exc)}"))]
        events = [Event(ev.UNREADABLE, path, p.offset, at, p) for p in result.problems]
        if result.value is not None:
            self._remember_git_context(kind, result.value)
            events.append(Event(kind, path, None, at, result.value))
        return events

    def _read_profile(self, directory: str) -> list[Event]:
        stamp = tuple(_stamp(os.path.join(directory, n)) for n in ("gateway_profile.json", "summary.txt"))
        previous = self._profiles.get(directory)
        if previous == stamp:
            return []
        self._profiles[directory] = stamp
        at = max((s[2] for s in stamp if s is not None), default=None)
        at = at / 1e9 if at is not None else time.time()
        if all(s is None for s in stamp):
            return [Event(ev.REMOVED, directory, None, at, ev.PROFILE)]
        from console.profiling.result import load_profile_dir

        try:
            result, problems = load_profile_dir(directory)
        except Exception as exc:
            return [Event(ev.UNREADABLE, directory, None, at, Unreadable(directory, None, f"reader error: {one_line(exc)}"))]
        events = [Event(ev.UNREADABLE, p.path, p.offset, at, p) for p in problems]
        if result is not None:
            events.append(Event(ev.PROFILE, directory, None, at, result))
        return events

    # -- git -----------------------------------------------------------------------------

    def _remember_git_context(self, kind: str, value) -> None:
        if kind in (ev.ACTIVE_EPISODE, ev.JOURNAL):
            base = getattr(value, "base_commit", None)
            if base:
                self._git_context["base"] = base
        if kind in (ev.HANDOFF, ev.JOURNAL):
            candidate = getattr(value, "candidate_commit", None)
            if candidate:
                self._git_context["candidate"] = candidate

    def _git_events(self, *, force: bool) -> list[Event]:
        root = self.workspace.episode_root
        if not (root / ".git").exists():
            return []
        stamp = (_stamp(str(root / "kernel.py")), tuple(self._git_context.values()), _git_head_stamp(root))
        if not force and stamp == self._git_stamp:
            return []
        self._git_stamp = stamp
        from .git_cache import cached_git_facts

        facts = cached_git_facts(root, base_commit=self._git_context["base"], candidate_commit=self._git_context["candidate"])
        return [Event(ev.GIT, str(root), None, time.time(), facts)]


def _git_head_stamp(root: Path) -> tuple | None:
    dotgit = root / ".git"
    try:
        if dotgit.is_file():
            text = dotgit.read_text().strip()
            gitdir = Path(text.split(":", 1)[1].strip()) if text.startswith("gitdir:") else dotgit
            if not gitdir.is_absolute():
                gitdir = (root / gitdir).resolve()
        else:
            gitdir = dotgit
        return (_stamp(str(gitdir / "HEAD")), _stamp(str(gitdir / "index")))
    except OSError:
        return None


_new_tuple = tuple.__new__
_plus_newline = (1).__add__


def _telemetry_events(batch: tuple[int, list[bytes]], path: str, out: list) -> None:
    """The hot loop of a cold ingest read as events: a batch of telemetry lines -> events.

    The lines are decoded in one C loop and the events are assembled by C iterators
    (each offset from the lengths of the lines before it); a batch holding a bad or blank
    line is read line by line, so a bad one is reported with its offset and every good
    one is kept.
    """
    base, lines = batch
    records = decode_telemetry_all(lines)
    if records is None:
        _record_events(ev.TELEMETRY, (base, lines), path, out)
        return
    offsets = accumulate(map(_plus_newline, map(len, lines)), initial=base)
    out.extend(map(_new_tuple, repeat(Event), zip(repeat(ev.TELEMETRY), repeat(path), offsets, record_epochs(records), records)))


def _record_events(kind: str, batch: tuple[int, list[bytes]], path: str, out: list) -> None:
    """One event per line, parsed alone: a bad line becomes an Unreadable at its offset."""
    parse = _resolve(LINE_PARSERS[kind])
    append = out.append
    base, lines = batch
    pos = base
    for line in lines:
        offset = pos
        pos += len(line) + 1
        if not line:
            continue
        try:
            record = parse(line)
        except FormatError as exc:
            append(Event(ev.UNREADABLE, path, offset, None, Unreadable(path, offset, one_line(exc))))
            continue
        except Exception as exc:  # a parser bug must not hide the record's position
            append(Event(ev.UNREADABLE, path, offset, None, Unreadable(path, offset, f"parser error: {one_line(exc)}")))
            continue
        append(Event(kind, path, offset, _record_time(record), record))


def _record_time(record) -> float | None:
    timestamp = getattr(record, "timestamp", None)
    if timestamp is None and isinstance(record, dict):
        timestamp = record.get("timestamp")
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return float(timestamp)
    if isinstance(timestamp, datetime):  # telemetry records decode their timestamp in C
        return record_epoch(timestamp)
    return iso_to_epoch(timestamp)
