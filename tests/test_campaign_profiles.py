"""The campaign view of profiles: every episode's, live or archived, each tagged with its
episode and held to what AKA's own reader lists; the current episode's stay the funnel's.
The dominant kernel is weighed by stated durations only, and what nothing measured or
diagnosed is null with a reason (phases, patterns, symptoms), never an empty answer.

Real AKA campaigns (tests/fixtures/aka), the bundled H200 example, real files and the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from console.episode.session import Session
from console.episode.summary import status_document
from spine_helpers import init_with_worktrees

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
AKA = FIXTURES / "aka"
ARCHIVE = REPO / "examples" / "episodes" / "row_softmax-h200.tar.gz"
CAMPAIGN = "kernel_opt_softmax"


def unpack(name: str, into: Path) -> Path:
    """AKA's campaign ``name`` unpacked under ``into`` (the directory AKA's paths are relative to)."""
    with tarfile.open(AKA / f"campaign_{name}.tar.gz") as archive:
        archive.extractall(into, filter="data")
    return into


def status_of(path: Path) -> dict:
    return status_document(Session(str(path)).scan(), now=0.0)


def cli_status(path: Path, cache: Path) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "EPISCOPE_")) and k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(path)], cwd=REPO,
                          env={**environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def aka_episode(path: str) -> int:
    """The episode an AKA profile path names: ``episodes/eNNNN/`` or a worktree ``eNNNN-<hex>``."""
    part = next(p for p in path.split("/") if p[:1] == "e" and p[1:5].isdigit())
    return int(part[1:5])


# -- every episode's profiles, as AKA's reader lists them -------------------------------------


@pytest.mark.parametrize("name, current", [("idle", 2), ("inflight", 2)])
def test_profiles_are_every_profile_akas_reader_lists(tmp_path, name, current):
    root = unpack(name, tmp_path)
    status = status_of(root / CAMPAIGN)
    aka = json.loads((AKA / f"campaign_{name}.expected_by_aka.json").read_text())["profiles"]
    ours = {os.path.relpath(p["dir"], root) + "/gateway_profile.json": p for p in status["profiles"]}
    assert set(ours) == {p["path"] for p in aka}
    for theirs in aka:
        profile = ours[theirs["path"]]
        assert profile["episode"] == aka_episode(theirs["path"])
        assert profile["current"] is (profile["episode"] == current)
        assert profile["level"] == theirs["level"]
        assert profile["kernels"] == [k["name"] for k in theirs["kernels"]]
        assert profile["bottleneck"] == theirs["kernels"][0]["bound"]
        assert profile["job"] == {"job_id": theirs["job_id"], "status": theirs["status"]}
    # oldest episode first, and each episode of the history names its own
    assert [p["episode"] for p in status["profiles"]] == sorted(p["episode"] for p in status["profiles"])
    for record in status["episodes"]:
        assert record["profiles"] == [p["dir"] for p in status["profiles"] if p["episode"] == record["episode"]]
        assert len(record["profiles"]) == 1
    # the dominant kernel is the current episode's, as AKA's newer projection picks it
    (now,) = [p for p in aka if aka_episode(p["path"]) == current]
    assert status["dominant_kernel"] == now["projected_by_newer_generation"]["dominant_kernel"]
    assert "dominant_kernel" not in status["unknown"]
    assert status["unreadable"] == [] or name == "inflight"  # inflight names a worktree of another machine


def test_the_current_episodes_profiles_stay_the_funnels(tmp_path):
    """The state's ``profiles`` (what the funnel draws, the stale-profile alert and the dominant
    kernel read) are the current episode's alone; the campaign's are beside them."""
    root = unpack("inflight", tmp_path)
    state = Session(str(root / CAMPAIGN)).scan()
    assert [p.episode for p in state.campaign_profiles] == [1, 2]
    (profile,) = state.profiles
    assert profile.dir.endswith("/e0002-9fd06d4e/profiles/v2")
    assert [p.profile for p in state.campaign_profiles if p.current] == [profile]


def test_the_bundled_example_lists_the_profiles_of_both_worktrees(tmp_path):
    """Both episode worktrees of the H200 example are still on disk: all 16 profiles show,
    episode 1's 14 from its own worktree though episode 2's is the one shown."""
    status = cli_status(ARCHIVE, tmp_path / "cache")
    by_episode: dict[int, list[dict]] = {}
    for profile in status["profiles"]:
        by_episode.setdefault(profile["episode"], []).append(profile)
    assert {n: len(p) for n, p in by_episode.items()} == {1: 14, 2: 2}
    assert all(p["current"] for p in by_episode[2]) and not any(p["current"] for p in by_episode[1])
    assert all("/e0001-" in p["dir"] for p in by_episode[1]) and all("/e0002-" in p["dir"] for p in by_episode[2])
    assert [len(e["profiles"]) for e in status["episodes"]] == [14, 2]
    assert status["dominant_kernel"] == "row_softmax_online"
    # the human view keeps to the current episode, as the funnel does
    text = subprocess.run([sys.executable, "-m", "console.cli", "status", str(ARCHIVE)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert sum(line.startswith("profile ") for line in text.stdout.splitlines()) == 2


def test_an_episode_archived_while_followed_shows_its_profile(tmp_path):
    """A live session learns of a profile AKA archives after its scan, from the changed path
    alone (the walk skips archive/ everywhere else)."""
    root = unpack("idle", tmp_path)
    archived = root / CAMPAIGN / ".atrex_long_horizon" / "episodes" / "e0002" / "archive" / "worktree_files" / "profiles"
    moved = tmp_path / "held"
    shutil.move(archived / "v2", moved)
    session = Session(str(root / CAMPAIGN))
    assert [p.episode for p in session.scan().campaign_profiles] == [1]
    shutil.move(moved, archived / "v2")
    session.refresh([str(archived / "v2" / "gateway_profile.json")])
    assert [(p.episode, p.current) for p in session.state.campaign_profiles] == [(1, False), (2, True)]
    assert session.state.dominant_kernel == "row_softmax_naive"


# -- the dominant kernel: stated durations only --------------------------------------------


def workspace(root: Path) -> Path:
    """A bare episode workspace (its runtime directory, nothing in it)."""
    (root / ".atrex_long_horizon").mkdir(parents=True, exist_ok=True)
    return root


def summary_dir(directory: Path, kernel: str, duration: str | None) -> None:
    """A summary.txt-only profile: a real one (strided/sol) naming ``kernel`` and ``duration``."""
    directory.mkdir(parents=True)
    text = (FIXTURES / "profiling" / "strided" / "sol" / "summary.txt").read_text()
    text = text.replace("Kernel: strided_load", f"Kernel: {kernel}")
    text = text.replace("Duration: 81.38 us\n", f"Duration: {duration}\n" if duration else "")
    (directory / "summary.txt").write_text(text)


def test_summary_durations_weigh_the_picks_not_their_names(tmp_path):
    """Two summary.txt-only profiles: the longer kernel wins although its name sorts last."""
    summary_dir(tmp_path / "profiles" / "a", "zz_column_read", "2123.0 us")
    summary_dir(tmp_path / "profiles" / "b", "aa_gemm", "157.0 us")
    status = status_of(workspace(tmp_path))
    assert status["dominant_kernel"] == "zz_column_read" and "dominant_kernel" not in status["unknown"]


def test_no_stated_duration_is_no_dominant_kernel_and_says_why(tmp_path):
    summary_dir(tmp_path / "profiles" / "a", "zz_column_read", None)
    summary_dir(tmp_path / "profiles" / "b", "aa_gemm", None)
    status = status_of(workspace(tmp_path))
    assert status["dominant_kernel"] is None
    assert status["unknown"]["dominant_kernel"] == "no profile of the current episode states a duration for a kernel it picks"
    (tmp_path / "profiles" / "a").rename(tmp_path / "elsewhere")
    (tmp_path / "profiles" / "b").rename(tmp_path / "elsewhere2")
    status = status_of(tmp_path)
    assert status["dominant_kernel"] is None and status["unknown"]["dominant_kernel"] == "no profile of the current episode"


def test_a_profile_naming_no_pick_picks_its_longest_kernel(tmp_path):
    """A bare PROFILE_JSON without ``dominant_kernel``: the longest kernel is its pick (AKA's
    projection), whatever the order the kernels are listed in."""
    directory = tmp_path / "profiles" / "survey"
    directory.mkdir(parents=True)
    kernels = [{"name": "a_short", "duration": 10.0, "duration_unit": "us", "bound": "compute"},
               {"name": "b_long", "duration": 2.5, "duration_unit": "ms", "bound": "memory"},
               {"name": "c_untimed"}]
    (directory / "gateway_profile.json").write_text(json.dumps({"profiler": "ncu", "level": "sol", "kernels": kernels}))
    status = status_of(workspace(tmp_path))
    assert status["dominant_kernel"] == "b_long"
    (profile,) = status["profiles"]
    assert profile["bottleneck"] == "memory"


# -- null with a reason: nothing measured, nothing diagnosed ---------------------------------


def test_phases_are_null_with_a_reason_without_telemetry(tmp_path):
    root = unpack("idle", tmp_path)
    (root / CAMPAIGN / ".atrex_long_horizon" / "episodes" / "e0002" / "episode_runtime" / "telemetry.jsonl").unlink()
    status = status_of(root / CAMPAIGN)
    assert status["phases"] is None and status["phase_timing"] is None
    assert status["unknown"]["phases"] == status["unknown"]["telemetry_events"] == (
        "no telemetry.jsonl in episodes/e0002/episode_runtime/")
    status = status_of(workspace(tmp_path / "bare"))
    assert status["phases"] is None and status["unknown"]["phases"]


def test_a_telemetry_file_without_phases_measures_none(tmp_path):
    """A telemetry file with no phase marker was measured: ``phases`` is ``{}``, not null."""
    runtime = tmp_path / ".atrex_long_horizon"
    runtime.mkdir()
    clean = (AKA / "phase_cases" / "clean.jsonl").read_text().splitlines()
    others = [line for line in clean if json.loads(line)["event"] not in ("phase_started", "phase_completed")]
    assert others
    (runtime / "telemetry.jsonl").write_text("\n".join(others) + "\n")
    status = status_of(tmp_path)
    assert status["phases"] == {} and "phases" not in status["unknown"]


def test_an_undiagnosed_profile_has_null_patterns_with_the_reason(tmp_path):
    """AKA's gateway job record carries no diagnosis and has no summary.txt beside it: its
    patterns and symptoms are unknown, not an empty finding; a diagnosed one keeps its list."""
    root = unpack("inflight", tmp_path)
    (profile,) = [p for p in status_of(root / CAMPAIGN)["profiles"] if p["current"]]
    assert profile["patterns"] is None and profile["symptoms"] is None
    assert profile["patterns_unknown"] == (
        "nothing diagnosed this profile: no summary.txt and no diagnostics in gateway_profile.json")
    diagnosed = tmp_path / "diagnosed"
    shutil.copytree(FIXTURES / "profiling" / "strided" / "sol", diagnosed / "profiles" / "sol",
                    ignore=shutil.ignore_patterns("analysis"))
    (profile,) = status_of(workspace(diagnosed))["profiles"]
    assert profile["patterns_unknown"] is None
    assert isinstance(profile["patterns"], list) and isinstance(profile["symptoms"], list) and profile["patterns"]


# -- places that name no episode of AKA's ------------------------------------------------------


def test_a_worktree_not_named_after_an_episode_is_no_episodes(tmp_path):
    """A git worktree AKA did not name (``Scratch``) beside an episode's: its profiles are
    listed with no episode and are not the current episode's (funnel, dominant kernel,
    stale-profile alert)."""
    worktrees = init_with_worktrees(tmp_path, "e0002-bbbbbbbb", "Scratch")
    scratch = worktrees / "Scratch" / "profiles" / "x"
    summary_dir(scratch, "scratch_kernel", "9999.0 us")
    status = cli_status(tmp_path / "ws", tmp_path / "cache")
    assert status["episode"]["worktree"].endswith("e0002-bbbbbbbb")
    (odd,) = [p for p in status["profiles"] if p["dir"] == str(scratch)]
    assert (odd["episode"], odd["current"]) == (None, False)
    assert status["dominant_kernel"] != "scratch_kernel"
    assert not any("Scratch" in alert["message"] for alert in status["alerts"])


def test_an_episode_number_past_nine_digits_names_no_episode(tmp_path):
    """``episodes/e99999999999999999999/``: no episode of AKA's (and a number past 64 bits made
    status --json a traceback); its profile is listed without one."""
    root = unpack("idle", tmp_path)
    huge = root / CAMPAIGN / ".atrex_long_horizon" / "episodes" / ("e" + "9" * 20) / "archive" / "worktree_files"
    summary_dir(huge / "profiles" / "p", "huge_kernel", "1.0 us")
    status = cli_status(root / CAMPAIGN, tmp_path / "cache")
    (odd,) = [p for p in status["profiles"] if p["dir"].startswith(str(huge))]
    assert odd["episode"] is None


def test_the_consoles_first_scan_reads_the_shown_episode_and_the_refresh_the_rest(monkeypatch, tmp_path):
    """The console draws the shown workspace's files first (what the dashboard shows is the
    current episode's); the full refresh after that frame brings the other worktrees' and
    ended episodes' files, so the state then equals a whole scan's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    session = Session(str(ARCHIVE))
    first = session.scan(git=False, shown_only=True)
    assert [p.episode for p in first.campaign_profiles] == [2, 2] and len(first.jobs) == 5
    session.refresh(None)
    whole = Session(str(ARCHIVE)).scan()
    after = session.state
    assert [p.profile.dir for p in after.campaign_profiles] == [p.profile.dir for p in whole.campaign_profiles]
    assert [e.runtime for e in after.episodes] == [e.runtime for e in whole.episodes]
    assert after.jobs == whole.jobs and after.profiles == whole.profiles


def test_a_worktree_named_otherwise_is_never_shown_as_the_newest_episodes(tmp_path):
    """Between episodes the newest episode's worktree is shown: ``scratch`` sorts after
    ``e0002-…`` by name but is no episode's, so ``e0002`` is still the one shown."""
    init_with_worktrees(tmp_path, "e0001-aaaaaaaa", "e0002-bbbbbbbb", "scratch")
    status = cli_status(tmp_path / "ws", tmp_path / "cache")
    assert status["episode"]["worktree"].endswith("e0002-bbbbbbbb")
