"""Job records, run_job as the console calls it (a thread, no signals), and `episcope jobs`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.formats import gpu_side
from console.formats.job_record import JOB_SCHEMA, job_record_from_obj, list_job_records, read_job_record
from console.formats.problems import FormatError
from console.jobs import JobRequest, cancel_job, parse_request, run_job
from console.jobs.local import group_members

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable


def write_record(ws: Path, job_id: str, **fields) -> Path:
    record = {"schema": JOB_SCHEMA, "job_id": job_id, "state": "succeeded", **fields}
    path = ws / ".atrex_long_horizon" / "sandbox" / job_id / "job.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return path


def test_reader_keeps_unknown_fields_none_and_round_trips(tmp_path):
    path = write_record(tmp_path, "j1", argv=["python", "x.py"], exit_code=0, timeout=30, extra="kept")
    record = read_job_record(path).value
    assert (record.job_id, record.state, record.argv, record.exit_code, record.timeout) == ("j1", "succeeded", ("python", "x.py"), 0, 30.0)
    assert record.pid is None and record.result_code is None and record.duration_seconds is None
    assert record.raw["extra"] == "kept"
    assert job_record_from_obj(dict(record.to_json())) == job_record_from_obj(record.to_json())
    assert record.to_json()["argv"] == ["python", "x.py"] and record.to_json()["schema"] == JOB_SCHEMA


@pytest.mark.parametrize(
    "obj",
    [[], {"schema": "other/v1", "job_id": "j", "state": "queued"}, {"schema": JOB_SCHEMA, "state": "queued"},
     {"schema": JOB_SCHEMA, "job_id": "j", "state": "paused"}],
)
def test_reader_rejects_records_off_format(obj):
    with pytest.raises(FormatError):
        job_record_from_obj(obj)


def test_missing_and_broken_records(tmp_path):
    assert read_job_record(tmp_path / "nope.json").value is None and read_job_record(tmp_path / "nope.json").problems == ()
    write_record(tmp_path, "20260101T000000Z-aaaaaa", created_at="2026-01-01T00:00:00+00:00")
    write_record(tmp_path, "20260102T000000Z-bbbbbb", created_at="2026-01-02T00:00:00+00:00")
    broken = tmp_path / ".atrex_long_horizon" / "sandbox" / "broken" / "job.json"
    broken.parent.mkdir()
    broken.write_text('{"schema": ')
    records, problems = list_job_records(tmp_path)
    assert [r.job_id for r in records] == ["20260102T000000Z-bbbbbb", "20260101T000000Z-aaaaaa"]
    assert len(problems) == 1 and problems[0].path == str(broken) and "invalid JSON" in problems[0].error


def test_a_wrongly_typed_field_makes_the_record_unreadable_with_its_name(tmp_path):
    write_record(tmp_path, "20260101T000000Z-aaaaaa")
    bad = write_record(tmp_path, "20260102T000000Z-bbbbbb", argv=["python", 3])
    records, problems = list_job_records(tmp_path)
    assert [r.job_id for r in records] == ["20260101T000000Z-aaaaaa"]
    assert len(problems) == 1 and problems[0].path == str(bad) and problems[0].error.startswith("argv[1]: ")
    # The sandbox's own reader refuses it too, naming the same field.
    assert gpu_side.read_job_record(bad).problems[0].error.startswith("argv[1]: ")


def request_for(ws: Path, *argv: str, timeout: float = 30) -> JobRequest:
    request, dry_run = parse_request(["--workspace", str(ws), "--timeout", str(timeout), "--", *argv])
    assert not dry_run
    return request


def test_run_job_in_a_thread_streams_output_and_cancels_by_record(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    chunks: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def on_output(stream, data):
        with lock:
            chunks.append((stream, data))

    request = request_for(ws, PY, "-c", "import sys, time; print('up', flush=True); print('err', file=sys.stderr, flush=True); time.sleep(60)")
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("value", run_job(request, on_output, kill_grace=1.0)))
    worker.start()
    def seen(stream: str) -> bytes:
        with lock:
            return b"".join(d for s, d in chunks if s == stream)

    deadline = time.monotonic() + 20
    while seen("stdout") != b"up\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    (record,) = list_job_records(ws)[0]
    assert record.state == "running" and record.launcher == "console" and record.sandbox_pid == os.getpid()
    final = cancel_job(ws, record.job_id)  # no signal to our own process: the record asks
    worker.join(timeout=20)
    result = outcome["value"]
    assert final["state"] == result.state == "cancelled" and result.code == 1
    assert group_members(record.pgid) == []
    assert seen("stdout") == b"up\n" and seen("stderr").startswith(b"err\n[sandbox] cancelled")
    assert result.record["job_id"] == record.job_id and result.exit_code is not None


def test_run_job_cancel_event_while_queued(tmp_path):
    from console.formats.job_record import MAX_SANDBOX_JOBS
    from console.jobs.slots import try_acquire

    ws = tmp_path / "ws"
    ws.mkdir()
    held = [try_acquire(ws) for _ in range(MAX_SANDBOX_JOBS)]
    assert all(held) and try_acquire(ws) is None
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    outcome = run_job(request_for(ws, PY, "-c", "print('never')"), None, cancel=cancel)
    assert (outcome.state, outcome.code, outcome.exit_code) == ("cancelled", 1, None)
    assert outcome.record.get("started_at") is None and outcome.record.get("pid") is None
    for slot in held:
        slot.release()
    assert run_job(request_for(ws, PY, "-c", "pass")).state == "succeeded"


def episcope(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "console.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_jobs_verb_lists_logs_and_refuses(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outcome = run_job(request_for(ws, PY, "-c", "import sys; print('to out'); print('to err', file=sys.stderr)"))
    table = episcope("jobs", str(ws))
    assert table.returncode == 0
    header, row = table.stdout.splitlines()
    assert header.split()[:3] == ["JOB", "STATE", "KIND"] and row.split()[:3] == [outcome.job_id, "succeeded", "dev"]
    listed = json.loads(episcope("jobs", str(ws), "--json").stdout)
    assert [j["job_id"] for j in listed["jobs"]] == [outcome.job_id] and listed["unreadable"] == []
    assert listed["jobs"][0] == job_record_from_obj(outcome.record).to_json()
    assert episcope("jobs", "log", outcome.job_id, "--workspace", str(ws)).stdout == "to out\n"
    assert episcope("jobs", "log", outcome.job_id, "--stderr", "--workspace", str(ws)).stdout == "to err\n"
    finished = episcope("jobs", "cancel", outcome.job_id, "--workspace", str(ws))
    assert finished.returncode == 1 and "already succeeded" in finished.stderr
    unknown = episcope("jobs", "cancel", "20990101T000000Z-ffffff", "--workspace", str(ws))
    # README's exit codes: a cancel that found no job of that id ran and found nothing to cancel
    assert unknown.returncode == 1 and unknown.stderr.startswith("episcope: ") and "no job" in unknown.stderr
    assert episcope("jobs", str(tmp_path / "missing")).returncode == 2


def test_headless_jobs_and_sandbox_import_no_textual_nor_orjson():
    code = (
        "import sys; sys.modules['orjson'] = None\n"
        "import console.jobs, console.jobs.runner, console.formats.job_record, console.formats.telemetry_builders\n"
        "sys.modules.pop('orjson')\n"
        "import console.commands.jobs\n"
        "assert not any(m == 'textual' or m.startswith('textual.') for m in sys.modules), 'textual imported'\n"
    )
    proc = subprocess.run([PY, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_jobs_on_a_directory_that_is_no_workspace_is_a_usage_error_like_status(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    jobs, status = episcope("jobs", str(plain)), episcope("status", str(plain))
    assert jobs.returncode == status.returncode == 2
    assert jobs.stdout == "" and jobs.stderr.startswith("episcope: ") and "not an episode workspace" in jobs.stderr


def test_events_refuses_an_unknown_kind_and_names_the_valid_ones(tmp_path):
    from console.episode.events import KINDS

    ws = tmp_path / "ws"
    (ws / ".atrex_long_horizon").mkdir(parents=True)
    proc = episcope("events", str(ws), "--kind", "nonsense")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "nonsense" in proc.stderr and all(kind in proc.stderr for kind in KINDS)
    assert len(proc.stderr.strip().splitlines()) == 1
    assert episcope("events", str(ws), "--kind", "job").returncode == 0
