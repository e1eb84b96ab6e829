"""Hostile job text in the human `episcope jobs` output: no raw ESC or BEL reaches the terminal.

A job's id, command line, state and log are written by the job (or by whoever can write the
workspace). The records here are real: one written by the sandbox's own record writer with a
hostile command line, one a job could plant as a file beside it with a hostile id, and an unreadable one whose
directory name is hostile.
The table and the stderr lines show the control characters as visible stand-ins; ``--json``
keeps them exact; ``jobs log`` makes them visible on a terminal (a real pty) and passes the
bytes as they are when piped.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from console.episode.text import visible
from console.jobs import JobRequest
from console.jobs.record import JobRecordWriter

REPO = Path(__file__).resolve().parents[2]
TITLE = "\x1b]0;owned title\x07"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # "echo pwned"
CLEAR = "\x1b[2J"
HOSTILE = TITLE + CLIPBOARD + CLEAR
PLANTED_ID = f"job-{HOSTILE}"


def episcope(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], cwd=REPO, timeout=60, **kwargs)


def hostile_workspace(tmp_path: Path) -> tuple[Path, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = JobRequest(argv=("python", f"kernel{HOSTILE}.py", CLIPBOARD), kind="run", workspace=str(workspace))
    writer = JobRecordWriter.create(request, launcher="sandbox")
    writer.update(state="succeeded", exit_code=0, message=HOSTILE)
    writer.stdout_log.write_bytes(f"shape 0 ok{TITLE}\n{CLIPBOARD}{CLEAR}done\n".encode())
    planted = writer.directory.parent / PLANTED_ID
    planted.mkdir()
    (planted / "job.json").write_text(json.dumps({**writer.fields, "job_id": PLANTED_ID, "state": "failed",
                                                  "argv": [TITLE, "-c", CLIPBOARD]}))
    (planted / "stdout.log").write_text("")
    broken = writer.directory.parent / f"broken{TITLE}"
    broken.mkdir()
    (broken / "job.json").write_text("{not json")
    return workspace, writer.job_id


def assert_no_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, text


def test_the_jobs_table_shows_hostile_ids_commands_and_states_as_visible_text(tmp_path):
    workspace, job_id = hostile_workspace(tmp_path)
    shown = episcope("jobs", str(workspace), capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert_no_controls(shown.stdout)
    assert_no_controls(shown.stderr)
    assert visible(PLANTED_ID) in shown.stdout and visible(f"kernel{HOSTILE}.py") in shown.stdout
    assert job_id in shown.stdout
    assert "unreadable job record" in shown.stderr and visible(f"broken{TITLE}") in shown.stderr
    exact = json.loads(episcope("jobs", str(workspace), "--json", capture_output=True, text=True).stdout)
    assert {job["job_id"] for job in exact["jobs"]} == {job_id, PLANTED_ID}
    assert [job["argv"] for job in exact["jobs"] if job["job_id"] == PLANTED_ID] == [[TITLE, "-c", CLIPBOARD]]


def test_messages_that_quote_a_hostile_record_show_it_as_visible_text(tmp_path):
    workspace, _ = hostile_workspace(tmp_path)
    cancel = episcope("jobs", "cancel", PLANTED_ID, "--workspace", str(workspace), capture_output=True, text=True)
    missing = episcope("jobs", "log", f"nothing{HOSTILE}", "--workspace", str(workspace), capture_output=True, text=True)
    for result in (cancel, missing):
        assert result.returncode != 0
        assert_no_controls(result.stdout + result.stderr)
    assert visible(PLANTED_ID) in cancel.stderr and visible(f"nothing{HOSTILE}") in missing.stderr


def run_on_a_terminal(*args: str) -> bytes:
    """What the command writes to a real pty as its stdout."""
    primary, secondary = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "console.cli", *args], cwd=REPO, stdout=secondary,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        os.close(secondary)
        output = bytearray()
        while True:
            try:
                chunk = os.read(primary, 1 << 16)
            except OSError:  # EIO: the last writer closed the pty
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=60) == 0
        return bytes(output)
    finally:
        os.close(primary)


def test_a_hostile_log_is_made_visible_on_a_terminal_and_passed_exactly_through_a_pipe(tmp_path):
    workspace, job_id = hostile_workspace(tmp_path)
    on_terminal = run_on_a_terminal("jobs", "log", job_id, "--workspace", str(workspace))
    assert b"\x1b" not in on_terminal and b"\x07" not in on_terminal
    assert visible(f"shape 0 ok{TITLE}").encode() in on_terminal and b"done" in on_terminal
    piped = episcope("jobs", "log", job_id, "--workspace", str(workspace), capture_output=True)
    assert piped.stdout == f"shape 0 ok{TITLE}\n{CLIPBOARD}{CLEAR}done\n".encode()
    helped = episcope("jobs", "--help", capture_output=True, text=True)
    assert "cat -v" in helped.stdout and "piped" in helped.stdout
