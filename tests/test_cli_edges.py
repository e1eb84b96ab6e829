"""The command line at its edges: what a newcomer's first wrong guesses get back.

Each case runs the real ``episcope`` entry point in a subprocess (no terminal: stdout is a
pipe), with the user directories under the test's own temporary directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundled_example import ARCHIVE
from console.commands.init import WORKSPACE_README
from console.episode.replay import KEEP_RECORDINGS, new_recording_path, prune_recordings, recordings_dir

ROOT = Path(__file__).resolve().parents[1]


def episcope(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("TEXTUAL_DRIVER", None)
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout[:200])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize("verb", ["status", "events", "jobs", "watch"])
def test_a_file_as_path_says_what_it_is_not(tmp_path, verb):
    # A file beside a kernel.py: taking its directory instead would "work" and mislead.
    (tmp_path / "kernel.py").write_text("")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    line = one_line_error(episcope(tmp_path, verb, str(notes)))
    assert line == f"episcope: {notes} is a file, not a workspace or a .tar.gz archive"


def test_replay_of_a_file_that_is_no_recording_says_what_it_is_not(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    line = one_line_error(episcope(tmp_path, "replay", str(notes)))
    assert line == f"episcope: {notes} is a file, not a workspace, a .tar.gz archive or an episcope recording"


@pytest.mark.parametrize("verb", ["status", "events", "jobs", "watch"])
def test_a_fake_archive_is_one_line(tmp_path, verb):
    fake = tmp_path / "episode.tar.gz"
    fake.write_bytes(b"this is not gzip at all\n" * 10)
    line = one_line_error(episcope(tmp_path, verb, str(fake)))
    assert str(fake) in line and "gzip" in line
    assert not any((tmp_path / "cache").rglob("*.jsonl"))  # nothing unpacked from it


def test_since_takes_an_iso_date_as_midnight_utc(tmp_path):
    """The bundled episodes ran on 2026-12-01 between 17:46 and 17:49 UTC."""
    def count(since: str) -> int:
        out = episcope(tmp_path, "events", str(ARCHIVE), "--since", since)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        return len(out.stdout.splitlines())

    everything = count("2026-11-30")
    assert everything > 100
    assert count("2026-12-01") == count("2026-12-01T00:00:00Z") == everything
    assert count("2026-12-01T17:49:00Z") == 0  # nothing stamped with the time the archive was opened
    assert 0 < count("2026-12-01T17:48:00Z") < everything
    line = one_line_error(episcope(tmp_path, "events", str(ARCHIVE), "--since", "yesterday"))
    assert "--since" in line and "ISO-8601" in line


def test_replay_without_a_terminal_refuses_like_watch(tmp_path):
    for verb in ("replay", "watch"):
        line = one_line_error(episcope(tmp_path, verb, str(ARCHIVE), timeout=60))
        assert "needs a terminal" in line and "episcope events" in line
    assert not (tmp_path / "state").exists()  # no recording was begun either


def recording_names(campaign: str, campaign_root: Path, days: range) -> list[str]:
    """File names of recordings of the campaign at ``campaign_root``, one a day at noon."""
    prefix = new_recording_path(campaign, campaign_root).name.rsplit("-", 2)[0]  # drop the time and pid
    return [f"{prefix}-202001{day:02d}T120000-7.jsonl" for day in days]


def test_recordings_are_pruned_to_the_newest_per_campaign(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    directory = recordings_dir()
    directory.mkdir(parents=True)
    root = tmp_path / "demo"
    root.mkdir()
    names = recording_names("demo", root, range(1, 26))
    # a campaign called demo-2 at the same root, one called other, a recording named without
    # a digest (no root in its name), and a file that is no recording
    others = [*recording_names("demo-2", root, range(1, 2)), *recording_names("other", root, range(1, 2)),
              "demo-20200101T000000-1.jsonl", "notes.txt"]
    for name in names + others:
        (directory / name).write_text("{}\n")
    deleted = prune_recordings("demo", root)
    kept = sorted(p.name for p in directory.iterdir())
    assert sorted(p.name for p in deleted) == names[:25 - KEEP_RECORDINGS] and KEEP_RECORDINGS == 20
    assert kept == sorted(names[25 - KEEP_RECORDINGS:] + others)
    # A new session's recording counts as one of the newest.
    newest = new_recording_path("demo", root)
    newest.write_text("{}\n")
    assert prune_recordings("demo", root) == [directory / names[25 - KEEP_RECORDINGS]]
    prefix = names[0].rsplit("-", 2)[0]
    assert newest.exists() and len(list(directory.glob(f"{prefix}-20[0-9][0-9][0-9][0-9]*"))) == KEEP_RECORDINGS


def test_two_campaigns_of_one_name_keep_their_own_recordings(tmp_path, monkeypatch):
    """Every ``episcope init --problem row_softmax`` workspace is called row_softmax: each
    campaign keeps its own 20 newest recordings, whichever of them the console opens last.
    A campaign is its root's real path, so a link to it is the same campaign."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    directory = recordings_dir()
    directory.mkdir(parents=True)
    first, second = tmp_path / "a" / "row_softmax", tmp_path / "b" / "row_softmax"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    (tmp_path / "link").symlink_to(first)
    first_names = recording_names("row_softmax", first, range(1, 26))
    second_names = recording_names("row_softmax", second, range(2, 27))  # interleaved in time
    legacy = "row_softmax-20200101T000000-1.jsonl"  # named before recordings named their root
    for name in [*first_names, *second_names, legacy]:
        (directory / name).write_text("{}\n")
    assert not set(first_names) & set(second_names)
    assert sorted(p.name for p in prune_recordings("row_softmax", first)) == first_names[:5]
    assert all((directory / name).exists() for name in second_names)
    assert sorted(p.name for p in prune_recordings("row_softmax", second)) == second_names[:5]
    assert prune_recordings("row_softmax", tmp_path / "link") == []
    assert sorted(p.name for p in directory.iterdir()) == sorted([*first_names[5:], *second_names[5:], legacy])
    # episcope replay --list shows them all, the one named without a digest too
    listed = episcope(tmp_path, "replay", "--list", timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [str(path) for path in sorted(directory.glob("*.jsonl"))]
    assert len(listed.stdout.splitlines()) == 2 * KEEP_RECORDINGS + 1


def test_watch_records_under_its_campaign_and_prunes_only_that(tmp_path, monkeypatch):
    """The recording ``watch`` begins is named by its campaign's root, and the prune it runs
    leaves another campaign of the same name alone."""
    from console.cli import build_parser
    from console.commands.watch import console_app
    from console.episode.workspace import resolve_workspace
    from console_fixture import build_episode

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    campaign, _ = build_episode(tmp_path / "watched")
    workspace = resolve_workspace(campaign)
    other = tmp_path / "other" / campaign.name
    other.mkdir(parents=True)
    directory = recordings_dir()
    directory.mkdir(parents=True)
    own = recording_names(workspace.name, workspace.campaign_root, range(1, 21))
    theirs = recording_names(workspace.name, other, range(1, 26))
    for name in [*own, *theirs]:
        (directory / name).write_text("{}\n")
    app = console_app(build_parser().parse_args(["watch", str(campaign)]), workspace)
    app.recorder.close()
    assert app.recorder.path.name.startswith(own[0].rsplit("-", 2)[0] + "-")
    assert sorted(p.name for p in directory.iterdir()) == sorted([*own[1:], app.recorder.path.name, *theirs])


def test_iteration_trace_without_its_variable_says_so_and_the_workspace_readme_too(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ATREX_TELEMETRY_TRACE"}
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "iteration_trace.py"), "phase-start", "profile"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert (out.returncode, out.stdout) == (0, "") and list(tmp_path.iterdir()) == []
    assert out.stderr.strip().splitlines() == ["iteration_trace: ATREX_TELEMETRY_TRACE is not set; nothing recorded"]
    assert "ATREX_TELEMETRY_TRACE" in WORKSPACE_README and "nothing is written" in WORKSPACE_README


def _usage_error(out: subprocess.CompletedProcess[str], verb: str) -> str:
    line = one_line_error(out)
    assert line.startswith(f"episcope {verb}: ") and line.endswith(")") and f"(usage: episcope {verb} " in line, line
    return line


def test_a_usage_error_is_one_line_with_the_usage_of_the_verb_at_fault(tmp_path):
    assert "unrecognized arguments: --bogus" in _usage_error(episcope(tmp_path, "status", "--bogus"), "status")
    line = _usage_error(episcope(tmp_path, "events", "--until", "X", str(ARCHIVE)), "events")
    assert "unrecognized arguments: --until" in line and "[--since ISO]" in line
    line = one_line_error(episcope(tmp_path, "--bogus"))
    assert line.startswith("episcope: ") and "(usage: episcope [-h] [--version] VERB ...)" in line


@pytest.mark.parametrize("speed", ["nan", "inf", "NaN", "1e400", "0", "-5", "fast"])
def test_replay_speed_must_be_a_finite_positive_number(tmp_path, speed):
    line = _usage_error(episcope(tmp_path, "replay", "--speed", speed, str(ARCHIVE)), "replay")
    assert "argument --speed" in line and repr(speed) in line
    assert not (tmp_path / "state").exists()


def test_since_takes_reduced_precision_ordinal_dates_and_a_lowercase_z(tmp_path):
    def count(since: str) -> int:
        out = episcope(tmp_path, "events", str(ARCHIVE), "--since", since)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        return len(out.stdout.splitlines())

    everything = count("2026-11-30")
    assert count("2026-12") == count("2026-335") == count("2026-W49-2") == count("2026") == everything
    assert count("2026-12-01T17:48:00z") == count("2026-12-01T17:48:00Z") == count("2026-12-01T18:48:00+01:00")
    assert 0 < count("2026-12-01T17:48:00z") < everything
    assert count("2027-01") == 0
    for empty in ("", "  "):
        line = _usage_error(episcope(tmp_path, "events", str(ARCHIVE), "--since", empty), "events")
        assert "argument --since: empty" in line


def test_an_unknown_event_kind_is_a_usage_error_that_lists_the_kinds(tmp_path):
    line = _usage_error(episcope(tmp_path, "events", str(ARCHIVE), "--kind", "telemetry", "--kind", "nonsense"), "events")
    assert "argument --kind: unknown kind 'nonsense'; valid kinds: telemetry, " in line and "[--kind KIND]" in line
    kinds = episcope(tmp_path, "events", str(ARCHIVE), "--kind", "abba", "--kind", "telemetry")
    assert kinds.returncode == 0 and kinds.stderr == ""
    assert {json.loads(line)["kind"] for line in kinds.stdout.splitlines()} == {"abba", "telemetry"}


def test_cancelling_a_job_of_an_archive_is_refused_as_read_only(tmp_path):
    """An archive's jobs are records of another run: cancel refuses them (exit 1, one line),
    by the .tar.gz or by a path inside its unpacked copy, and writes nothing into the copy."""
    listed = episcope(tmp_path, "jobs", str(ARCHIVE), "--json")
    job = json.loads(listed.stdout)["jobs"][0]["job_id"]
    (copy,) = (tmp_path / "cache").glob("episcope/archives/*/")
    before = sorted(str(p) for p in copy.rglob("*"))
    for where in (str(ARCHIVE), str(copy / "row_softmax")):
        out = episcope(tmp_path, "jobs", "cancel", job, "--workspace", where)
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.strip().splitlines() == [f"episcope: {where}: archive: read-only (its jobs are records of another run)"]
    assert sorted(str(p) for p in copy.rglob("*")) == before


@pytest.mark.parametrize("verb", ["events", "watch", "replay", "serve"])
def test_help_says_path_may_be_an_episode_archive(tmp_path, verb):
    out = episcope(tmp_path, verb, "--help")
    assert out.returncode == 0 and "PATH" in out.stdout
    assert "episode archive (.tar.gz)" in " ".join(out.stdout.split())


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a device whose every write fails with ENOSPC)")
@pytest.mark.parametrize("args", [("status", "--json"), ("status",), ("events",)])
def test_output_that_cannot_be_written_is_one_line_and_exit_1(tmp_path, args):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    with open("/dev/full", "w") as full:
        out = subprocess.run([sys.executable, "-m", "console.cli", *args, str(ARCHIVE)], stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT, env=env)
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines() == ["episcope: [Errno 28] No space left on device"]


def test_a_closed_pipe_is_still_no_error(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "events", str(ARCHIVE)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    assert proc.stderr.read() == b""
    proc.stderr.close()


def test_cancelling_a_job_that_does_not_exist_is_exit_1(tmp_path):
    workspace = tmp_path / "ws"
    (workspace / ".atrex_long_horizon").mkdir(parents=True)
    (workspace / "kernel.py").write_text("x = 1\n")
    git = ["git", "-C", str(workspace), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=60)
    subprocess.run([*git, "add", "kernel.py"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "init"], check=True, timeout=60)
    for action in ("cancel", "log"):
        out = episcope(tmp_path, "jobs", action, "20261201T000000Z-nothere", "--workspace", str(workspace))
        assert out.returncode == 1 and out.stdout == "", (action, out.returncode)
        assert out.stderr.splitlines() == [f"episcope: no job 20261201T000000Z-nothere in {workspace}"]
