"""The command line at its edges: what a newcomer's first wrong guesses get back.

Each case runs the real ``episcope`` entry point in a subprocess (no terminal: stdout is a
pipe), with the user directories under the test's own temporary directory.
"""

from __future__ import annotations

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


def test_recordings_are_pruned_to_the_newest_per_campaign(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    directory = recordings_dir()
    directory.mkdir(parents=True)
    names = [f"demo-202001{day:02d}T120000-7.jsonl" for day in range(1, 26)]
    others = ["demo-2-20200101T000000-1.jsonl", "other-20200101T000000-1.jsonl", "notes.txt"]
    for name in names + others:
        (directory / name).write_text("{}\n")
    deleted = prune_recordings("demo")
    kept = sorted(p.name for p in directory.iterdir())
    assert sorted(p.name for p in deleted) == names[:25 - KEEP_RECORDINGS] and KEEP_RECORDINGS == 20
    assert kept == sorted(names[25 - KEEP_RECORDINGS:] + others)
    # A new session's recording counts as one of the newest.
    newest = new_recording_path("demo")
    newest.write_text("{}\n")
    assert prune_recordings("demo") == [directory / names[25 - KEEP_RECORDINGS]]
    assert newest.exists() and len(list(directory.glob("demo-20[0-9][0-9][0-9][0-9]*"))) == KEEP_RECORDINGS


def test_iteration_trace_without_its_variable_says_so_and_the_workspace_readme_too(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ATREX_TELEMETRY_TRACE"}
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "iteration_trace.py"), "phase-start", "profile"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert (out.returncode, out.stdout) == (0, "") and list(tmp_path.iterdir()) == []
    assert out.stderr.strip().splitlines() == ["iteration_trace: ATREX_TELEMETRY_TRACE is not set; nothing recorded"]
    assert "ATREX_TELEMETRY_TRACE" in WORKSPACE_README and "nothing is written" in WORKSPACE_README
