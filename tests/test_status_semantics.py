"""What the status document means: unknown is null with a reason, never 0; the top-level
episode keys are the current episode's record in ``episodes``; each sandbox job is counted
once and ``seconds`` covers exactly those jobs; a finished episode is ``archived``; a phase of
no known name is no phase; the human view prints what the JSON says.

Real workspaces, real files, the real CLI and the real sandbox."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.episode import events as ev
from console.episode.events import Event
from console.episode.reducer import fold
from console.episode.status_text import MAX_LINE
from console.episode.summary import status_document
from console.formats.evaluations import parse_evaluation_line
from console.formats.problems import Unreadable
from spine_helpers import tele, telemetry_record

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
ARCHIVE = REPO / "examples" / "episodes" / "row_softmax-h200.tar.gz"
# The top-level keys that are the current episode's runtime facts, and their name in episodes[].
RUNTIME = {"telemetry_events": "telemetry_events", "source_reads": "source_reads", "sandbox": "sandbox",
           "phase_timing": "phase_timing"}


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "EPISCOPE_")) and k != "PYTHONPATH"}
    return {**clean, "PYTHONPATH": str(REPO), **extra}


def episcope(*argv: str, environ: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "console.cli", *argv], cwd=REPO, env=environ or env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def status(path: Path, environ: dict[str, str] | None = None) -> dict:
    return json.loads(episcope("status", "--json", str(path), environ=environ).stdout)


def git_workspace(root: Path) -> Path:
    (root / ".atrex_long_horizon").mkdir(parents=True)
    (root / "kernel.py").write_text("x\n")
    for argv in (["init", "-q"], ["add", "."], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "i"]):
        subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)
    return root


def assert_top_level_is_the_current_record(doc: dict, record: dict) -> None:
    for top, key in RUNTIME.items():
        assert doc[top] == record[key], top
    assert doc["evaluations"]["count"] == record["evaluations"]
    for key, why in doc["unknown"].items():
        if key == "phases":  # episcope's own pairing, top level only: no telemetry, no phases
            assert why == doc["unknown"]["telemetry_events"] == record["unknown"]["telemetry_events"]
        elif not key.startswith("evaluations.last") and key != "dominant_kernel":  # a profiles fact
            assert record["unknown"][key] == why, key


# -- unknown is null with a reason, the same at the top level and in episodes[] -------------


def test_a_workspace_without_telemetry_says_unknown_not_zero(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    (ws / ".atrex_long_horizon" / "evaluations.jsonl").write_text(json.dumps(
        {"schema_version": 1, "timestamp": "2026-12-01T10:00:00+00:00",
         "result": {"all_pass": True, "failures": [], "latency_us_geomean": 12.5}}) + "\n")
    doc = status(ws)
    (record,) = doc["episodes"]
    assert doc["episode"]["runtime"] == record["source"] == "live"
    assert doc["telemetry_events"] is None and doc["source_reads"] is None and doc["sandbox"] is None
    assert doc["evaluations"]["count"] == 1
    # schema 1 names no kernel: how many kernels were evaluated is not known
    assert doc["evaluations"]["kernels"] is None
    assert doc["unknown"]["evaluations.kernels"] == "no evaluation names its kernel (kernel_sha256)"
    assert doc["unknown"]["telemetry_events"] == "no telemetry.jsonl in the episode worktree's .atrex_long_horizon/"
    assert_top_level_is_the_current_record(doc, record)
    text = episcope("status", str(ws)).stdout
    assert "sandbox   unknown  source reads unknown" in text and "succeeded 0" not in text


def test_between_episodes_the_reason_names_the_archived_episode_directory(tmp_path):
    ws = git_workspace(tmp_path / "campaign")
    archived = ws / ".atrex_long_horizon" / "episodes" / "e0001"
    (archived / "episode_runtime").mkdir(parents=True)
    (archived / "attempt.json").write_text(json.dumps(
        {"episode": 1, "version": "v1", "mode": "full", "status": "blocked", "accepted": False}))
    (archived / "episode_runtime" / "journal.json").write_text(json.dumps(
        {"schema_version": 1, "episode": 1, "state": "blocked", "experiments": []}))
    doc = status(ws)
    (record,) = doc["episodes"]
    assert doc["episode"]["runtime"] == record["source"] == "archived"
    assert doc["telemetry_events"] is None and doc["evaluations"]["count"] is None
    assert doc["journal"] == record["journal"] == {"state": "blocked", "experiments": 0}
    assert doc["unknown"]["telemetry_events"] == "no telemetry.jsonl in episodes/e0001/episode_runtime/"
    assert "eNNNN" not in json.dumps(doc)
    assert_top_level_is_the_current_record(doc, record)


def test_no_episode_at_all_is_null_everywhere(tmp_path):
    doc = status(git_workspace(tmp_path / "ws"))
    assert doc["episode"]["runtime"] is None and doc["episodes"] == []
    assert doc["telemetry_events"] is doc["source_reads"] is doc["sandbox"] is None
    assert doc["evaluations"] == {"count": None, "kernels": None, "last": None}
    assert set(doc["unknown"]) >= {"telemetry_events", "source_reads", "sandbox", "evaluations"}


def test_an_unreadable_runtime_file_is_the_reason_not_an_absent_one():
    """A telemetry file the scan could not open is listed in unreadable; the counts it would
    give are null, and the reason says it could not be read, not that there is none."""
    path = "/w/.atrex_long_horizon/telemetry.jsonl"
    evaluation = parse_evaluation_line(json.dumps(
        {"schema_version": 2, "kernel_sha256": "ab", "result": {"all_pass": True, "failures": []}}).encode())
    state = fold([
        Event(ev.UNREADABLE, path, None, None, Unreadable(path, None, "[Errno 13] Permission denied")),
        Event(ev.EVALUATION, "/w/.atrex_long_horizon/evaluations.jsonl", 0, None, evaluation),
    ])
    doc = status_document(state)
    assert doc["episode"]["runtime"] == "live" and doc["telemetry_events"] is None and doc["sandbox"] is None
    assert doc["unknown"]["telemetry_events"] == (
        "telemetry.jsonl in the episode worktree's .atrex_long_horizon/ could not be read (see unreadable)")
    assert doc["evaluations"]["kernels"] == 1
    assert_top_level_is_the_current_record(doc, doc["episodes"][-1])


def test_a_telemetry_file_the_os_refuses_is_unknown_for_that_reason(tmp_path):
    """The same, through the CLI on a real file of mode 000 (as root, without the capability
    that reads through file modes)."""
    ws = git_workspace(tmp_path / "ws")
    telemetry = ws / ".atrex_long_horizon" / "telemetry.jsonl"
    telemetry.write_text(json.dumps(tele("phase_started", 1.0, phase="profile")) + "\n")
    telemetry.chmod(0)
    argv = [sys.executable, "-m", "console.cli", "status", "--json", str(ws)]
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", *argv]
    try:
        proc = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=120)
    finally:
        telemetry.chmod(0o644)
    if proc.returncode != 0 and "setpriv" in proc.stderr:
        pytest.skip(f"setpriv refused here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [u["path"] for u in doc["unreadable"]] == [str(telemetry)]
    assert doc["telemetry_events"] is None and doc["phases"] is None
    assert doc["unknown"]["telemetry_events"].endswith("could not be read (see unreadable)")
    assert_top_level_is_the_current_record(doc, doc["episodes"][-1])


# -- one count per sandbox job, seconds over exactly those jobs ------------------------------


def test_sandbox_counts_each_job_once_and_seconds_cover_every_counted_job(tmp_path):
    ws = tmp_path / "ws"
    episcope("init", str(ws), "--problem", "row_softmax")
    tool = [sys.executable, "tools/sandbox.py", "--kind", "dev", "--"]
    run = {"cwd": ws, "capture_output": True, "timeout": 60, "check": True}
    subprocess.run([*tool, "sleep", "1"], env=env(PYTHONPATH="."), **run)  # untraced: a job record only
    trace = str(ws / ".atrex_long_horizon" / "telemetry.jsonl")
    subprocess.run([*tool, "true"], env=env(PYTHONPATH=".", ATREX_TELEMETRY_TRACE=trace), **run)  # record and operation
    doc = status(ws)
    (record,) = doc["episodes"]
    assert doc["sandbox"] == record["sandbox"]
    assert doc["sandbox"]["succeeded"] == 2 and doc["sandbox"]["jobs"] == {"succeeded": 2}
    durations = [job["duration_seconds"] for job in doc["jobs"]]
    assert doc["sandbox"]["seconds"] == pytest.approx(sum(durations), abs=1e-6) and doc["sandbox"]["seconds"] > 1
    assert "sandbox.seconds" not in doc["unknown"]


def test_seconds_is_null_with_a_reason_when_an_ended_job_states_no_duration():
    path = "/w/.atrex_long_horizon/telemetry.jsonl"
    records = [tele("sandbox_operation_completed", 5.0, operation_id="a", category="dev", status="succeeded",
                    duration_seconds=2.0),
               tele("sandbox_operation_completed", 6.0, operation_id="b", category="dev", status="failed")]
    state = fold(Event(ev.TELEMETRY, path, i * 100, None, telemetry_record(r)) for i, r in enumerate(records))
    doc = status_document(state)
    assert doc["sandbox"]["succeeded"] == 1 and doc["sandbox"]["failed"] == 1
    assert doc["sandbox"]["seconds"] is None  # 2.0 would be a part shown as the whole
    assert doc["unknown"]["sandbox.seconds"] == "1 ended sandbox job(s) state no duration"
    assert_top_level_is_the_current_record(doc, doc["episodes"][-1])


# -- a finished episode is archived -----------------------------------------------------------


def test_the_bundled_episode_is_archived_and_the_top_level_is_its_record(tmp_path):
    cache = env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    doc = status(ARCHIVE, cache)
    assert [(e["episode"], e["source"]) for e in doc["episodes"]] == [(1, "archived"), (2, "archived")]
    assert doc["episode"]["runtime"] == "archived" and doc["episode"]["number"] == 2
    assert_top_level_is_the_current_record(doc, doc["episodes"][1])
    # its worktree's job records count for it: each job once, beside its archived operation
    assert doc["sandbox"]["succeeded"] == doc["sandbox"]["jobs"]["succeeded"] == 5
    campaign = Path(doc["campaign"]["root"])
    (first,) = campaign.parent.glob(f".atrex_long_horizon_worktrees/{campaign.name}/e0001-*")
    one = status(first, cache)
    assert one["episode"]["runtime"] == "archived" and one["episode"]["number"] == 1
    assert_top_level_is_the_current_record(one, one["episodes"][0])


# -- a phase of no known name -----------------------------------------------------------------


def test_a_marker_of_no_known_phase_is_no_phase_and_leaves_the_pairing_alone():
    records = [tele("phase_started", 10.0, phase="profile"),
               tele("phase_started", 11.0, phase="\x1b[2Jbogus"),
               tele("phase_completed", 12.0, phase="\x1b[2Jbogus"),
               tele("phase_completed", 20.0, phase="profile")]
    path = "/w/.atrex_long_horizon/telemetry.jsonl"
    state = fold(Event(ev.TELEMETRY, path, i * 100, None, telemetry_record(r)) for i, r in enumerate(records))
    assert list(state.phase_totals) == ["profile"]
    assert state.phase_totals["profile"].measurement == "explicit"
    assert state.phase_totals["profile"].wall_seconds == pytest.approx(10.0)
    assert state.partial_reasons == {"invalid_phase_marker": 2}
    timing = state.current_episode.runtime.phase_timing  # the episode's own record holds AKA's reading
    assert timing is not None and timing.reason_codes == ("invalid_phase_marker",)
    (alert,) = state.alerts
    assert alert.message == "2 phase marker(s) of no known phase ignored: invalid_phase_marker"


def test_a_huge_phase_name_is_no_phase_and_no_huge_line(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    telemetry = ws / ".atrex_long_horizon" / "telemetry.jsonl"
    name = "\x1b[2J" + "x" * 30_000
    telemetry.write_text("".join(json.dumps(r) + "\n" for r in (
        tele("phase_started", 1.0, phase="profile"), tele("phase_started", 2.0, phase=name),
        tele("phase_completed", 3.0, phase="profile"))))
    doc = status(ws)
    assert list(doc["phases"]) == ["profile"] and doc["phases"]["profile"]["measurement"] == "explicit"
    text = episcope("status", str(ws)).stdout
    assert "\x1b" not in text
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE + len("… (99999 more characters)")


def test_a_long_agent_written_line_is_cut_and_says_so(tmp_path):
    ws = git_workspace(tmp_path / "ws")
    (ws / ".atrex_long_horizon" / "active_episode.json").write_text(json.dumps({"episode": 1, "mode": "y" * 5000}))
    doc = status(ws)
    assert doc["episode"]["mode"] == "y" * 5000  # the JSON keeps it whole
    text = episcope("status", str(ws)).stdout
    (cut,) = [line for line in text.splitlines() if line.startswith("episode ")]
    assert len(cut) <= MAX_LINE + 30 and cut.endswith(" more characters)")
    assert all(len(line) <= MAX_LINE + 30 for line in text.splitlines())


# -- the human view prints what the JSON says --------------------------------------------------


@pytest.mark.parametrize("stated, said", [("NaN", "nan"), ("-4.0", "-4.0"), ("0", "0.0")])
def test_a_latency_that_is_no_latency_is_unknown_in_both_views(tmp_path, stated, said):
    ws = git_workspace(tmp_path / "ws")
    (ws / ".atrex_long_horizon" / "evaluations.jsonl").write_text(
        '{"schema_version":2,"kernel_sha256":"ab","result":{"all_pass":true,"failures":[],"latency_us_geomean":'
        + stated + "}}\n")
    doc = status(ws)
    assert doc["evaluations"]["last"]["latency_us_geomean"] is None
    assert doc["unknown"]["evaluations.last.latency_us_geomean"] == f"the evaluation states {said}, not a latency"
    (line,) = [line for line in episcope("status", str(ws)).stdout.splitlines() if line.startswith("evals")]
    assert "all_pass True  unknown  kernel ab" in line and "nan" not in line and "-4" not in line


# -- the README names every key -----------------------------------------------------------------


def test_the_readme_lists_every_key_of_the_episode_block(tmp_path):
    listed = re.search(r"`episode` \{([^}]*)\}", README.read_text())
    assert listed is not None
    keys = {key.strip() for key in listed.group(1).replace("\n", " ").split(",")}
    doc = status(git_workspace(tmp_path / "ws"))
    assert keys == set(doc["episode"])
    assert doc["schema_version"] in README.read_text()
