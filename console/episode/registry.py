"""Which artifact is which: one table from where a file lives to its reader and event kind.

Ingest classifies every file it walks or is told about through ``ARTIFACTS``; replay
decodes a recorded event's data through the row of its kind; the README's artifact table
is printed from it (``python -m console.episode.registry``, checked by a test). Adding an
artifact means adding one row here and one reader in ``console.formats``.

A row's ``layout`` says how its reader is called:

- ``lines``: an append-only JSON Lines file (or any line file); ``read(line)`` turns one
  line into a record and raises ``FormatError`` for a bad one. Each line is one event.
- ``document``: a whole file; ``read(path)`` returns a ``ReadResult``. Each new version of
  the file is one event.
- ``directory``: the files named by ``patterns`` together make one record of their
  directory; ``read(directory)`` returns ``(record or None, problems)``.
- ``derived``: not a file of the workspace (git facts, hardware samples); the events come
  from elsewhere, and the row only says how a recorded one is decoded.

Patterns are paths relative to a campaign root or an episode worktree, ``/``-separated:
``*`` stands for any part of one name, ``**/`` for any number of directories (none too),
``<N>`` for a decimal number. The first row whose pattern matches wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from console.formats import (
    abba,
    evaluations,
    handoff,
    job_log,
    job_record,
    journal,
    live_memory,
    memory,
    supervisor,
    telemetry,
    telemetry_summary,
    timeline,
)
from console.gpu.sampler import GpuReading
from console.profiling.result import ProfileResult, load_profile_dir

from . import events as ev
from .git_facts import GitFacts
from .preflight import Preflight

Layout = Literal["lines", "document", "directory", "derived"]
# Where an ended episode's runtime and ABBA directories are archived (console.episode.episodes):
# the same files as a live episode's, read by the same rows, told apart by their path.
ARCHIVED = ".atrex_long_horizon/episodes/e<N>/episode_runtime/"
ARCHIVED_VERIFY = ".atrex_long_horizon/episodes/e<N>/verification_runtime/*/"
# Profiles and sandbox job records are an episode's evidence and outlive it: AKA archives an
# ended episode's worktree files, its profiles/ among them, under WORKTREE_FILES; ingest also
# reads the profiles/ and the job records of every worktree of the campaign still on disk
# (``Artifact.every_worktree``), whichever path opened the campaign. Each one's path says its
# episode (console.episode.episodes.place_episode).
EPISODES_DIR = ".atrex_long_horizon/episodes/"
WORKTREE_FILES = "archive/worktree_files/"
ARCHIVED_WORKTREE = EPISODES_DIR + "e<N>/" + WORKTREE_FILES
PROFILES = "profiles/"
SANDBOX = ".atrex_long_horizon/sandbox/"


class Artifact(msgspec.Struct, frozen=True):
    kind: str  # the event kind its records arrive as (console.episode.events)
    patterns: tuple[str, ...]  # where it lives; empty for a derived kind
    layout: Layout
    record_type: type  # the type of an event's data
    read: Callable[..., Any] | None  # see the module docstring; None for a derived kind
    # A recorded JSON object -> the record, where the format has its own checks; without
    # one, replay converts the object to ``record_type`` with msgspec (a line file without
    # one is replayed through ``read``, its lines being JSON themselves).
    parse: Callable[[Any], Any] | None = None
    # Only the campaign root's copy counts: a worktree is a checkout of the base commit,
    # so its memory/ and runtime files say what the campaign already says.
    campaign_only: bool = False
    # The directory (relative to a worktree) ingest also walks in every other worktree of the
    # campaign, not only in the roots shown ("": only there); the ``PROFILES`` row is read in
    # the ended episodes' archived worktree files too.
    every_worktree: str = ""
    about: str = ""

    def reader(self) -> Callable[..., Any]:
        """``read``, for a row of a file artifact (a derived kind has none)."""
        if self.read is None:
            raise LookupError(f"{self.kind} is not read from a file")
        return self.read


ARTIFACTS: tuple[Artifact, ...] = (
    Artifact(ev.TELEMETRY, (".atrex_long_horizon/telemetry.jsonl", ARCHIVED + "telemetry.jsonl"), "lines", telemetry.TelemetryRecord,
             telemetry.parse_telemetry_line, about="phase markers, source reads, sandbox operations (FORMATS §2)"),
    Artifact(ev.EVALUATION, (".atrex_long_horizon/evaluations.jsonl", ARCHIVED + "evaluations.jsonl"), "lines", evaluations.EvaluationRecord,
             evaluations.parse_evaluation_line, about="one evaluator result per line"),
    Artifact(ev.STATE, (".atrex_long_horizon/state.json",), "document", supervisor.SupervisorState,
             supervisor.read_state, supervisor.parse_state, campaign_only=True, about="the supervisor's state"),
    Artifact(ev.ACTIVE_EPISODE, (".atrex_long_horizon/active_episode.json",), "document", supervisor.ActiveEpisode,
             supervisor.read_active_episode, supervisor.parse_active_episode, campaign_only=True,
             about="the episode running now"),
    Artifact(ev.JOURNAL, (".atrex_long_horizon/journal.json", ARCHIVED + "journal.json"), "document", journal.Journal,
             journal.read_journal, journal.parse_journal, about="the episode's experiment journal"),
    Artifact(ev.HANDOFF, (".atrex_long_horizon/handoff.json", ARCHIVED + "handoff.json"), "document", handoff.Handoff,
             handoff.read_handoff, handoff.parse_handoff, about="the candidate handed to the supervisor"),
    Artifact(ev.ATTEMPT, (".atrex_long_horizon/episodes/*/attempt.json",), "document", supervisor.Attempt,
             supervisor.read_attempt, supervisor.parse_attempt, campaign_only=True, about="an archived episode"),
    Artifact(ev.TELEMETRY_SUMMARY, (".atrex_long_horizon/episodes/*/telemetry.summary.json",), "document",
             telemetry_summary.TelemetrySummary, telemetry_summary.read_telemetry_summary,
             telemetry_summary.parse_telemetry_summary, campaign_only=True, about="an archived episode's token use"),
    Artifact(ev.JOB, (SANDBOX + "*/job.json",), "document", job_record.JobRecord,
             job_record.read_job_record, job_record.job_record_from_obj, every_worktree=SANDBOX,
             about="a sandbox job launched from the console"),
    Artifact(ev.JOB_LOG, (SANDBOX + "*/stdout.log", SANDBOX + "*/stderr.log"),
             "lines", str, job_log.parse_log_line, job_log.parse_recorded_line, every_worktree=SANDBOX,
             about="a sandbox job's output, one line per event"),
    Artifact(ev.LIVE_MEMORY, ("memory/live.json",), "document", live_memory.LiveMemory,
             live_memory.read_live_memory, live_memory.parse_live_memory, campaign_only=True,
             about="the supervisor's live memory"),
    Artifact(ev.MEMORY_VERSION, ("memory/v<N>.json",), "document", memory.MemoryVersion,
             memory.read_memory_version, memory.parse_memory_version, campaign_only=True,
             about="a canonical memory version"),
    Artifact(ev.ABBA, ("**/.atrex_long_horizon_verify/*/result.json", ARCHIVED_VERIFY + "result.json"), "document", abba.AbbaVerdict,
             abba.read_abba_verdict, abba.parse_verdict, about="an ABBA verification's verdict"),
    Artifact(ev.ABBA_RUN, ("**/.atrex_long_horizon_verify/*/runs.jsonl", ARCHIVED_VERIFY + "runs.jsonl"), "lines", abba.AbbaRun,
             abba.parse_abba_run_line, abba.parse_abba_run, about="ABBA runs as they complete"),
    Artifact(ev.PROFILE, (PROFILES + "**/gateway_profile.json", PROFILES + "**/summary.txt",
                          ARCHIVED_WORKTREE + PROFILES + "**/gateway_profile.json",
                          ARCHIVED_WORKTREE + PROFILES + "**/summary.txt"), "directory", ProfileResult,
             load_profile_dir, every_worktree=PROFILES, about="one profile directory, of any episode of the campaign"),
    Artifact(ev.TIMELINE_RECEIPT, ("**/receipt.json",), "document", timeline.TimelineReceipt,
             timeline.read_timeline_receipt, timeline.receipt_from_obj, about="a timeline capture's receipt"),
    Artifact(ev.MEASURE_RUN, ("**/*.runs.jsonl",), "lines", timeline.MeasureRun,
             timeline.parse_measure_run_line, about="timeline overhead measure runs as they arrive"),
    Artifact(ev.TIMELINE_MEASUREMENT, ("**/*measurement*.json",), "document", timeline.TimelineMeasurement,
             timeline.read_timeline_measurement, timeline.measurement_from_obj, about="a timeline overhead measurement"),
    Artifact(ev.GIT, (), "derived", GitFacts, None, about="the episode worktree's git facts"),
    Artifact(ev.GPU, (), "derived", GpuReading, None, about="NVML readings the live console samples"),
    Artifact(ev.PREFLIGHT, (), "derived", Preflight, None, about="whether this host can run the GPU actions"),
    Artifact(ev.TIMELINE_SITES, (), "derived", timeline.DecodedSites, None,
             about="per-site statistics the console decoded from a capture whose receipt states none"),
)

BY_KIND: dict[str, Artifact] = {row.kind: row for row in ARTIFACTS}
# Kinds whose every event is the whole of its record (a new one replaces the last from its path).
DOCUMENT_KINDS = frozenset(row.kind for row in ARTIFACTS if row.layout != "lines")


def _regex(pattern: str) -> str:
    out = []
    for token in re.split(r"(\*\*/|\*|<N>)", pattern):
        out.append({"**/": "(?:[^/]+/)*", "*": "[^/]*", "<N>": "[0-9]+"}.get(token) or re.escape(token))
    return "".join(out)


# Every pattern in one regex, one group each in row order: a path is matched once, and
# the group that matched (the first alternative that fits the whole path) names its row.
_ROW_OF_GROUP = tuple(row for row in ARTIFACTS for _ in row.patterns)
_PATTERNS = re.compile("|".join(f"({_regex(pattern)})" for row in ARTIFACTS for pattern in row.patterns))


def artifact_at(rel: str) -> Artifact | None:
    """The row for a path relative to a campaign root or worktree (None: not ours)."""
    match = _PATTERNS.fullmatch(rel)
    return _ROW_OF_GROUP[match.lastindex - 1] if match and match.lastindex else None


def markdown_table() -> str:
    """The artifact table of the README."""
    lines = ["| Path (campaign root or worktree) | What | Event kind | Layout | Record | Reader |",
             "|---|---|---|---|---|---|"]
    for row in ARTIFACTS:
        where = "<br>".join(f"`{p}`" for p in row.patterns) or "(not a file)"
        reader = f"`{row.read.__module__}.{row.read.__name__}`" if row.read is not None else "—"
        scope = " (campaign root only)" if row.campaign_only else " (every worktree)" if row.every_worktree else ""
        lines.append(f"| {where}{scope} | {row.about} | `{row.kind}` | {row.layout} | `{row.record_type.__name__}` | {reader} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
