"""examples/make_example_campaign.py: a consistent AKA-layout campaign, readable by episcope."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.abba import parse_abba_batch, parse_abba_request
from console.formats.evaluations import parse_evaluation_line
from console.formats.handoff import read_handoff
from console.formats.journal import read_journal
from console.formats.memory import read_memory_version
from console.formats.supervisor import read_active_episode, read_attempt, read_state
from console.formats.telemetry import parse_telemetry_line
from console.formats.telemetry_summary import read_telemetry_summary

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "make_example_campaign.py"


def build(out: Path, seed: int = 7) -> Path:
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--seed", str(seed)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def git(cwd: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("camp"))


def worktree_of(campaign: Path) -> Path:
    (wt,) = (campaign.parent / ".atrex_long_horizon_worktrees" / campaign.name).iterdir()
    return wt


def test_git_layout_and_candidate_rules(campaign):
    wt = worktree_of(campaign)
    assert wt.name.startswith("e0001-") and len(wt.name) == len("e0001-") + 8
    assert git(wt, "rev-parse", "--abbrev-ref", "HEAD") == f"atrex/long-{wt.name}"
    assert Path(git(wt, "rev-parse", "--path-format=absolute", "--git-common-dir")) == campaign / ".git"
    assert git(wt, "status", "--porcelain") == "" and git(campaign, "status", "--porcelain") == ""
    active = read_active_episode(campaign / ".atrex_long_horizon" / "active_episode.json").value
    handoff = read_handoff(wt / ".atrex_long_horizon" / "handoff.json").value
    assert handoff.status == "candidate_ready" and handoff.candidate_commit == git(wt, "rev-parse", "HEAD")
    assert git(wt, "diff", "--name-only", active.base_commit, handoff.candidate_commit) == "kernel.py"
    assert git(wt, "merge-base", "--is-ancestor", active.base_commit, handoff.candidate_commit) == ""
    assert active.phase == "promoted" and active.promotion_commit == git(campaign, "rev-parse", "HEAD")
    assert git(campaign, "show", "HEAD:kernel.py") == git(wt, "show", "HEAD:kernel.py")
    assert set(git(campaign, "ls-files", "memory").split()) == {"memory/v0.json", "memory/v1.json"}


def test_records_are_readable_and_agree(campaign):
    wt = worktree_of(campaign)
    runtime = wt / ".atrex_long_horizon"
    kernel_sha = hashlib.sha256((wt / "kernel.py").read_bytes()).hexdigest()
    evaluations = [parse_evaluation_line(line) for line in (runtime / "evaluations.jsonl").read_bytes().splitlines()]
    assert len(evaluations) == 6 and all(e.schema_version == 2 for e in evaluations)
    assert evaluations[-1].kernel_sha256 == kernel_sha
    trial2 = hashlib.sha256((wt / "plans" / "e0001-trial2-kernel.py").read_bytes()).hexdigest()
    assert evaluations[3].kernel_sha256 == trial2
    base_sha = hashlib.sha256(git(wt, "show", "HEAD~1:kernel.py").encode() + b"\n").hexdigest()
    assert evaluations[0].kernel_sha256 == base_sha
    journal = read_journal(runtime / "journal.json")
    assert journal.ok and [e.decision for e in journal.value.experiments] == ["continue", "revert"]
    v0 = read_memory_version(campaign / "memory" / "v0.json").value
    v1 = read_memory_version(campaign / "memory" / "v1.json").value
    assert v1.performance.latency_us_geomean < v0.performance.latency_us_geomean / 20
    state = read_state(campaign / ".atrex_long_horizon" / "state.json")
    attempt = read_attempt(campaign / ".atrex_long_horizon" / "episodes" / "e0001" / "attempt.json")
    assert state.ok and attempt.ok and attempt.value.verification.gate == "PASS"
    assert state.value.attempts[0].candidate_commit == journal.value.candidate_commit
    assert read_telemetry_summary(campaign / attempt.value.telemetry_summary).ok
    artifacts = Path(campaign / attempt.value.verification.artifact)
    request = parse_abba_request(json.loads((artifacts / "request-0001.json").read_text()))
    assert request.schedule == (("incumbent", 0), ("candidate", 0), ("candidate", 1), ("incumbent", 1))
    assert len(parse_abba_batch(json.loads((artifacts / "result.json").read_text())).runs) == 4


def test_telemetry_is_monotonic_with_paired_phases_and_waves(campaign):
    lines = (worktree_of(campaign) / ".atrex_long_horizon" / "telemetry.jsonl").read_bytes().splitlines()
    records = [parse_telemetry_line(line) for line in lines]
    times = [r.monotonic_seconds for r in records]
    assert times == sorted(times)
    open_phase, running = None, set()
    for r in records:
        if r.event == "phase_started":
            assert open_phase is None
            open_phase = r.phase
        elif r.event == "phase_completed":
            assert open_phase == r.phase
            open_phase = None
        elif r.event == "sandbox_operation_started":
            running.add(r.operation_id)
            assert len(running) <= 4
        elif r.event == "sandbox_operation_completed":
            running.remove(r.operation_id)
    assert open_phase is None and not running


def test_status_shows_it_without_alerts_or_unreadable_records(campaign):
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(campaign)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["alerts"] == [] and status["unreadable"] == []
    assert status["episode"]["handoff"] == "candidate_ready"
    assert status["evaluations"]["count"] == 6


def test_same_seed_same_campaign(tmp_path, campaign):
    again = build(tmp_path / "again")
    assert git(again, "rev-parse", "HEAD") == git(campaign, "rev-parse", "HEAD")
    rel = ".atrex_long_horizon/telemetry.jsonl"
    assert (worktree_of(again) / rel).read_bytes() == (worktree_of(campaign) / rel).read_bytes()
    other = build(tmp_path / "other", seed=8)
    assert git(other, "rev-parse", "HEAD") != git(campaign, "rev-parse", "HEAD")


def test_profiles_and_verification_are_where_and_as_akas_tools_read_them(campaign):
    """The synced profiles are the sandbox's job records with AKA-layout metrics; the ABBA
    directory sits in the worktree and, copied whole, under the episode's record."""
    wt = worktree_of(campaign)
    records = [json.loads(p.read_text()) for p in sorted(wt.glob("profiles/**/gateway_profile.json"))]
    assert len(records) == 13
    assert all(set(r) == {"job_id", "kind", "status", "result", "error"} and r["kind"] == "profile"
               and r["status"] == "succeeded" and r["result"]["kernels"] for r in records)
    metrics = [json.loads(p.read_text()) for p in wt.glob("profiles/**/analysis/metrics_key_run.json")]
    assert len(metrics) == 3 and all(m["__kernel_name__"] == "row_softmax_naive" for m in metrics)
    (live,) = (wt / "verification_artifacts" / ".atrex_long_horizon_verify").iterdir()
    archived = campaign / ".atrex_long_horizon" / "episodes" / "e0001" / "verification_runtime"
    assert [p.name for p in archived.iterdir()] == [live.name]
    assert {f.name: f.read_bytes() for f in live.iterdir()} == {f.name: f.read_bytes() for f in (archived / live.name).iterdir()}
    attempt = read_attempt(campaign / ".atrex_long_horizon" / "episodes" / "e0001" / "attempt.json").value
    assert attempt.verification.artifact == f".atrex_long_horizon/episodes/e0001/verification_runtime/{live.name}"
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(campaign)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    profiles = json.loads(proc.stdout)["profiles"]
    measured = [p for p in profiles if "/survey/" not in p["dir"]]
    assert len(measured) == 3 and all([a["id"] for a in p["aka_patterns"]] == ["A", "C", "E", "J"] for p in measured)


def test_a_verification_archived_while_its_live_directory_remains_is_listed_once(campaign):
    """At ``promoted`` AKA has copied the verification into the episode's archive and the
    live directory is still there: status lists one verification, the archived copy."""
    from console.episode.session import Session
    from console.episode.summary import status_document

    wt = worktree_of(campaign)
    live = list((wt / "verification_artifacts" / ".atrex_long_horizon_verify").iterdir())
    archived = list(campaign.glob(".atrex_long_horizon/episodes/e0001/verification_runtime/*"))
    assert len(live) == 1 and [a.name for a in archived] == [live[0].name]  # both copies are on disk
    document = status_document(Session(str(campaign)).scan(final=True))
    assert [(Path(a["directory"]).parent.name, a["gate"]) for a in document["abba"]] == \
        [("verification_runtime", "PASS")]
