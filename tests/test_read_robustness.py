"""Reading what a workspace holds when its files are not what they should be: a line file
the OS refuses to read, a last line without its newline, a line longer than any record, a
FIFO where a file or an archive is expected, a directory named like an archive, a job log
that is gone.

Bad input is one unreadable entry (or one line on stderr) and every good record is kept;
nothing waits on a FIFO. Each case runs the real ``episcope`` in a subprocess on real files,
or the real session/tailer in process.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.commands.jobs import render_table
from console.episode import events as ev
from console.episode.archive import ArchiveError, open_archive
from console.episode.job_logs import LINE_CHARS, JobLogs
from console.episode.session import Session
from console.episode.tailer import MAX_LINE, Tailer
from console.formats.job_record import JOB_SCHEMA, MAX_SANDBOX_JOBS, job_record_from_obj, list_job_records
from console.jobs import parse_request, run_job
from spine_helpers import follow_until

REPO = Path(__file__).resolve().parent.parent
RUNTIME = ".atrex_long_horizon"
# Root reads a mode-000 file anyway; without its capabilities it is refused like anyone.
NO_CAPABILITIES = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]


def episcope(tmp_path: Path, *args: str, without_capabilities: bool = False,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    prefix = NO_CAPABILITIES if without_capabilities and os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "console.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(out: subprocess.CompletedProcess[str], code: int) -> str:
    assert out.returncode == code and out.stdout == "", (out.returncode, out.stdout[:200], out.stderr[-500:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def source_read(mono: float, reference: str) -> dict:
    return {"schema_version": "atrex_iteration_event_v1", "campaign_id": "demo", "iteration_id": "episode-0001",
            "attempt_id": "invocation-1", "event": "source_read", "timestamp": "2026-11-29T06:00:00+00:00",
            "monotonic_seconds": mono, "source": "agent_marker", "measurement": "explicit",
            "source_kind": "workspace", "reference": reference}


EVALUATION = {"schema_version": 1, "timestamp": "2026-11-29T06:00:00+00:00",
              "result": {"all_pass": True, "failures": [], "latency_us_geomean": 12.5}}


def jsonl(*records: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / RUNTIME).mkdir(parents=True)
    return ws


def finished_job(ws: Path, code: str = "print('to out')") -> str:
    request, _ = parse_request(["--workspace", str(ws), "--timeout", "30", "--", sys.executable, "-c", code])
    return run_job(request).job_id


def log_path(ws: Path, job_id: str, stream: str = "stdout") -> Path:
    return ws / RUNTIME / "sandbox" / job_id / f"{stream}.log"


@pytest.fixture
def refusing_mode_000():
    """Skip where a mode-000 file cannot be made unreadable to a child (root without setpriv)."""
    if os.geteuid() != 0:
        return
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a mode-000 file stays readable")
    probe = subprocess.run([*NO_CAPABILITIES, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"the kernel refuses to drop capabilities: {probe.stderr.decode(errors='replace').strip()}")


# -- a line file the OS refuses to read ---------------------------------------------------


def test_an_unreadable_line_file_is_an_unreadable_entry_and_every_other_record_stays(tmp_path, refusing_mode_000):
    ws = workspace(tmp_path)
    telemetry = ws / RUNTIME / "telemetry.jsonl"
    telemetry.write_bytes(jsonl(source_read(1.0, "a.md")))
    (ws / RUNTIME / "evaluations.jsonl").write_bytes(jsonl(EVALUATION, EVALUATION))
    job_id = finished_job(ws)
    refused = [telemetry, log_path(ws, job_id)]
    for path in refused:
        path.chmod(0)
    status = episcope(tmp_path, "status", "--json", str(ws), without_capabilities=True)
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    entries = {entry["path"]: entry for entry in document["unreadable"]}
    assert sorted(entries) == sorted(str(p) for p in refused)
    for path in refused:
        assert entries[str(path)]["offset"] is None and "Permission denied" in entries[str(path)]["error"]
    assert document["evaluations"]["count"] == 2
    assert [job["job_id"] for job in document["jobs"]] == [job_id]

    human = episcope(tmp_path, "status", str(ws), without_capabilities=True)
    assert human.returncode == 0 and "Traceback" not in human.stderr, human.stderr

    events = episcope(tmp_path, "events", str(ws), without_capabilities=True)
    assert events.returncode == 0, events.stderr
    printed = [json.loads(line) for line in events.stdout.splitlines()]
    assert sorted(e["path"] for e in printed if e["kind"] == ev.UNREADABLE) == sorted(str(p) for p in refused)
    assert sum(e["kind"] == ev.EVALUATION for e in printed) == 2

    log = one_line(episcope(tmp_path, "jobs", "log", job_id, "--workspace", str(ws), without_capabilities=True), 2)
    assert log == f"episcope: {log_path(ws, job_id)}: Permission denied"


def test_a_live_session_shows_an_unreadable_line_file_once_and_drops_it_when_readable_again(tmp_path):
    """A symbolic link to itself cannot be opened (ELOOP), as a mode-000 file cannot be by
    anyone but root: the error is one event however often the file is looked at, and the
    file read again from its start once it can be."""
    ws = workspace(tmp_path)
    path = ws / RUNTIME / "telemetry.jsonl"
    path.write_bytes(jsonl(source_read(1.0, "a.md")))
    session = Session(ws)
    assert session.scan().telemetry_events == 1
    path.unlink()
    path.symlink_to(path.name)
    first = session.refresh([str(path)])
    assert [(e.kind, e.offset) for e in first] == [(ev.UNREADABLE, None)]
    assert "Too many levels of symbolic links" in first[0].data.error
    assert session.refresh([str(path)]) == [] and session.refresh(None) == []
    assert [u.path for u in session.state.unreadable] == [str(path)]
    path.unlink()
    path.write_bytes(jsonl(source_read(1.0, "a.md"), source_read(2.0, "b.md")))
    again = session.refresh([str(path)])
    assert [e.kind for e in again] == [ev.REMOVED, ev.TELEMETRY, ev.TELEMETRY]
    assert session.state.unreadable == () and session.state.telemetry_events == 2


def test_the_tailer_keeps_what_it_read_before_an_error_and_starts_over_after_it(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\n")
    tailer = Tailer(str(path))
    assert [lines for _, lines in tailer.batches()] == [[b"a"]]
    path.unlink()
    path.symlink_to(path.name)
    assert list(tailer.batches()) == [] and tailer.error is not None and tailer.reset is None
    assert tailer.offset == 2  # what was read stays read while the error lasts
    path.unlink()
    path.write_bytes(b"a\nb\n")
    assert list(tailer.batches()) == [(0, [b"a", b"b"])]
    assert tailer.reset == "readable again" and tailer.error is None


# -- a last line without its newline --------------------------------------------------------


def test_a_final_read_takes_the_last_line_without_its_newline_a_live_one_waits(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\nbb")
    live = Tailer(str(path))
    assert list(live.batches()) == [(0, [b"a"])] and live.unterminated is None
    final = Tailer(str(path))
    assert list(final.batches(final=True)) == [(0, [b"a"]), (2, [b"bb"])]
    assert final.unterminated == 2 and final.offset == 4
    assert list(final.batches(final=True)) == []  # read once, not again


def test_one_shot_status_and_events_count_a_complete_last_record_without_its_newline(tmp_path):
    ws = workspace(tmp_path)
    telemetry = ws / RUNTIME / "telemetry.jsonl"
    telemetry.write_bytes(jsonl(source_read(1.0, "a.md"), source_read(2.0, "b.md"))[:-1])
    (ws / RUNTIME / "evaluations.jsonl").write_bytes(jsonl(EVALUATION)[:-1])
    status = episcope(tmp_path, "status", "--json", str(ws))
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert (document["telemetry_events"], document["source_reads"]) == (2, 2)
    assert document["evaluations"]["count"] == 1 and document["unreadable"] == []
    events = episcope(tmp_path, "events", str(ws), "--kind", "telemetry", "--kind", "evaluation")
    assert [json.loads(line)["kind"] for line in events.stdout.splitlines()] == ["evaluation", "telemetry", "telemetry"]


def test_a_cut_short_last_line_is_unreadable_at_its_offset_and_the_rest_is_kept(tmp_path):
    ws = workspace(tmp_path)
    telemetry = ws / RUNTIME / "telemetry.jsonl"
    whole = jsonl(source_read(1.0, "a.md"))
    telemetry.write_bytes(whole + b'{"schema_version": "atrex_iter')
    document = json.loads(episcope(tmp_path, "status", "--json", str(ws)).stdout)
    assert document["telemetry_events"] == 1
    (entry,) = document["unreadable"]
    assert entry["path"] == str(telemetry) and entry["offset"] == len(whole)
    assert entry["error"].startswith("incomplete last line (no newline at its end): ")


def test_a_live_session_reads_the_last_line_once_its_writer_finishes_it(tmp_path):
    """The console and ``events --follow`` keep holding a half-written line back: read at
    once, it would be a fragment now and a second fragment later."""
    ws = workspace(tmp_path)
    path = ws / RUNTIME / "telemetry.jsonl"
    record = jsonl(source_read(2.0, "b.md"))
    path.write_bytes(jsonl(source_read(1.0, "a.md")) + record[:-1])
    session = Session(ws)
    state = session.scan()
    assert state.telemetry_events == 1 and state.unreadable == ()

    def finish() -> None:
        with open(path, "ab") as fh:
            fh.write(b"\n")

    seen = follow_until(session, finish, lambda events: any(e.kind == ev.TELEMETRY for e in events))
    assert [e.kind for e in seen] == [ev.TELEMETRY]
    assert session.state.telemetry_events == 2 and session.state.unreadable == ()


def test_events_follow_holds_the_last_line_back_until_it_is_complete(tmp_path):
    ws = workspace(tmp_path)
    path = ws / RUNTIME / "telemetry.jsonl"
    record = jsonl(source_read(2.0, "b.md"))
    path.write_bytes(jsonl(source_read(1.0, "a.md")) + record[:20])
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "events", str(ws), "--follow", "--kind", "telemetry",
                             "--kind", "unreadable"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["kind"] == ev.TELEMETRY and first["data"]["reference"] == "a.md"
        time.sleep(1.5)  # a quiet tick re-checks every file: the fragment must still wait
        with open(path, "ab") as fh:
            fh.write(record[20:])
        second = json.loads(proc.stdout.readline())
        assert second["kind"] == ev.TELEMETRY and second["data"]["reference"] == "b.md"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()


# -- a line longer than any record -----------------------------------------------------------


def read_lines(tailer: Tailer, *, final: bool = False) -> list[tuple[int, bytes]]:
    """(offset, line) of every non-empty line one read returns."""
    out = []
    for base, lines in tailer.batches(final=final):
        for line in lines:
            if line:
                out.append((base, line))
            base += len(line) + 1
    return out


def with_hole(path: Path, before: bytes, hole: int, after: bytes) -> int:
    """``before``, ``hole`` zero bytes (sparse: no disk), then ``after``; the hole's offset."""
    with open(path, "wb") as fh:
        fh.write(before)
        fh.truncate(len(before) + hole)
        fh.seek(len(before) + hole)
        fh.write(after)
    return len(before)


def test_a_line_over_the_limit_is_skipped_reported_once_and_the_lines_after_it_are_read(tmp_path):
    path = tmp_path / "t.jsonl"
    exactly = b"z" * 100  # as long as the limit: still a line
    path.write_bytes(b"a\n" + b"x" * 1000 + b"\nbb\n" + b"y" * 101 + b"\n" + exactly + b"\nc\n")
    tailer = Tailer(str(path), max_line=100)
    assert read_lines(tailer) == [(0, b"a"), (1003, b"bb"), (1108, exactly), (1209, b"c")]
    assert tailer.too_long == [2, 1006]
    assert read_lines(tailer) == [] and tailer.too_long == []  # read once, reported once


def test_a_final_read_skips_an_over_long_last_line_without_its_newline(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\n" + b"x" * 1000)
    tailer = Tailer(str(path), max_line=100)
    assert read_lines(tailer, final=True) == [(0, b"a")]
    assert tailer.too_long == [2] and tailer.unterminated is None and tailer.offset == 1002


def test_a_live_read_goes_on_inside_an_unfinished_long_line_never_from_its_start(tmp_path):
    """A writer that never ends its line must not make every poll read it again from its
    start (or report it again)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\n" + b"x" * 1000)
    tailer = Tailer(str(path), max_line=100)
    assert read_lines(tailer) == [(0, b"a")] and tailer.too_long == [2]
    assert tailer.offset == 1002  # consumed up to the end, not held at the line's start
    with open(path, "ab") as fh:
        fh.write(b"x" * 500)
    assert read_lines(tailer) == [] and tailer.too_long == [] and tailer.offset == 1502
    with open(path, "ab") as fh:
        fh.write(b"x\nb\n")
    assert read_lines(tailer) == [(1504, b"b")] and tailer.too_long == []
    path.write_bytes(b"y" * 1000 + b"\nc\n")  # rewritten: read again from the start, reported again
    assert read_lines(tailer) == [(1001, b"c")] and tailer.too_long == [0] and tailer.reset == "truncated"


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(min_size=1, max_size=60).map(lambda b: b.replace(b"\n", b"_")), min_size=1, max_size=30),
    seed=st.integers(0, 2**32 - 1),
)
def test_written_in_random_pieces_every_line_is_read_or_listed_too_long_exactly_once(tmp_path_factory, records, seed):
    """Whatever pieces the writer's lines arrive in, live reads see each line within the
    limit once, at its offset, and list each longer one once."""
    path = tmp_path_factory.mktemp("long") / "t.jsonl"
    data = b"".join(record + b"\n" for record in records)
    offsets = [sum(len(r) + 1 for r in records[:i]) for i in range(len(records))]
    rng = random.Random(seed)
    tailer = Tailer(str(path), max_line=20)
    seen, too_long = [], []
    position = 0
    with open(path, "wb") as fh:
        while position < len(data):
            step = rng.randint(1, 45)
            fh.write(data[position:position + step])
            fh.flush()
            position += step
            if rng.random() < 0.6:
                seen += read_lines(tailer)
                too_long += tailer.too_long
    seen += read_lines(tailer)
    too_long += tailer.too_long
    assert seen == [(at, record) for at, record in zip(offsets, records) if len(record) <= 20]
    assert too_long == [at for at, record in zip(offsets, records) if len(record) > 20]


def test_status_lists_each_over_long_line_and_keeps_every_record_around_it(tmp_path):
    """Real files at the real limit (sparse holes of zero bytes): telemetry, evaluations and a
    job's log each carry one line longer than ``MAX_LINE``."""
    ws = workspace(tmp_path)
    hole = MAX_LINE + 1
    telemetry = ws / RUNTIME / "telemetry.jsonl"
    evaluations = ws / RUNTIME / "evaluations.jsonl"
    at = {telemetry: with_hole(telemetry, jsonl(source_read(1.0, "a.md")), hole, b"\n" + jsonl(source_read(2.0, "b.md"))),
          evaluations: with_hole(evaluations, jsonl(EVALUATION), hole, b"\n" + jsonl(EVALUATION))}
    job_id = finished_job(ws)
    log = log_path(ws, job_id)
    at[log] = with_hole(log, log.read_bytes(), hole, b"\nafter\n")

    status = episcope(tmp_path, "status", "--json", str(ws))
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["unreadable"] == [{"path": str(path), "offset": offset, "error": f"line longer than {MAX_LINE} bytes"}
                                      for path, offset in sorted(at.items(), key=lambda item: str(item[0]))]
    assert (document["telemetry_events"], document["source_reads"], document["evaluations"]["count"]) == (2, 2, 2)
    (job,) = document["jobs"]
    assert job["log_tail"]["stdout"] == ["to out", "after"]


def test_a_live_session_lists_an_unfinished_long_line_once_and_reads_the_records_after_it(tmp_path):
    ws = workspace(tmp_path)
    path = ws / RUNTIME / "telemetry.jsonl"
    first = jsonl(source_read(1.0, "a.md"))
    path.write_bytes(first + b"x" * (MAX_LINE + 1))
    session = Session(ws)
    state = session.scan()
    assert state.telemetry_events == 1
    assert [(u.offset, u.error) for u in state.unreadable] == [(len(first), f"line longer than {MAX_LINE} bytes")]
    with open(path, "ab") as fh:
        fh.write(b"x" * 1000)
    assert [e for e in session.refresh() if e.kind == ev.UNREADABLE] == []  # not again

    def finish() -> None:
        with open(path, "ab") as fh:
            fh.write(b"\n" + jsonl(source_read(2.0, "b.md")))

    seen = follow_until(session, finish, lambda events: any(e.kind == ev.TELEMETRY for e in events))
    assert [e.kind for e in seen] == [ev.TELEMETRY]
    assert session.state.telemetry_events == 2 and len(session.state.unreadable) == 1


def test_a_gigabyte_line_is_read_in_bounded_memory(tmp_path):
    """Under a 1 GiB address-space limit, a 1 GiB line (a sparse hole) between two records:
    read whole, it is a MemoryError traceback; skipped in chunks, one unreadable entry."""
    ws = workspace(tmp_path)
    telemetry = ws / RUNTIME / "telemetry.jsonl"
    offset = with_hole(telemetry, jsonl(source_read(1.0, "a.md")), 1 << 30, b"\n" + jsonl(source_read(2.0, "b.md")))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    status = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(ws)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120, preexec_fn=limit_memory)
    assert status.returncode == 0, status.stderr[-500:]
    document = json.loads(status.stdout)
    assert document["telemetry_events"] == 2
    assert [(e["offset"], e["error"]) for e in document["unreadable"]] == [(offset, f"line longer than {MAX_LINE} bytes")]


def test_a_kept_job_log_line_is_cut_to_line_chars():
    logs = JobLogs()
    path = "/ws/.atrex_long_horizon/sandbox/j1/stdout.log"
    logs.add(path, "short")
    logs.add(path, "x" * (LINE_CHARS + 10))
    logs.add(path, "y" * LINE_CHARS)
    assert logs.snapshot()["j1"].stdout == ("short", "x" * LINE_CHARS + " … (10 more characters)", "y" * LINE_CHARS)


# -- FIFOs and directories where a file or an archive is expected ----------------------------


@pytest.mark.parametrize("name", ["episode.tar.gz", "fifo"])
@pytest.mark.parametrize("verb", ["status", "events", "jobs"])
def test_a_fifo_as_path_is_one_line_not_a_hang(tmp_path, name, verb):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    line = one_line(episcope(tmp_path, verb, str(fifo), timeout=20), 2)
    assert line == f"episcope: {fifo}: not a directory or a .tar.gz archive"


@pytest.mark.timeout(20)
def test_the_archive_opener_refuses_a_fifo_without_waiting_on_it(tmp_path):
    fifo = tmp_path / "episode.tar.gz"
    os.mkfifo(fifo)
    with pytest.raises(ArchiveError, match=r"not a regular file \(a FIFO\)"):
        open_archive(fifo)


def test_a_fifo_as_a_job_log_is_one_line_not_a_hang(tmp_path):
    ws = workspace(tmp_path)
    job_id = finished_job(ws)
    log = log_path(ws, job_id)
    log.unlink()
    os.mkfifo(log)
    line = one_line(episcope(tmp_path, "jobs", "log", job_id, "--workspace", str(ws), timeout=20), 2)
    assert line == f"episcope: {log}: not a regular file (a FIFO)"


def test_a_directory_named_like_an_archive_is_a_workspace(tmp_path):
    ws = tmp_path / "ws.tar.gz"
    (ws / RUNTIME).mkdir(parents=True)
    (ws / RUNTIME / "telemetry.jsonl").write_bytes(jsonl(source_read(1.0, "a.md")))
    job_id = finished_job(ws)
    status = episcope(tmp_path, "status", "--json", str(ws))
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["telemetry_events"] == 1 and document["campaign"]["root"] == str(ws)
    jobs = episcope(tmp_path, "jobs", "--json", str(ws))
    assert jobs.returncode == 0 and [j["job_id"] for j in json.loads(jobs.stdout)["jobs"]] == [job_id]


# -- job logs that are gone, jobs that still run ----------------------------------------------


def test_jobs_log_of_a_removed_log_says_so_in_one_line(tmp_path):
    ws = workspace(tmp_path)
    job_id = finished_job(ws)
    log_path(ws, job_id, "stderr").unlink()
    line = one_line(episcope(tmp_path, "jobs", "log", job_id, "--stderr", "--workspace", str(ws)), 1)
    assert line == f"episcope: job {job_id} has no stderr.log: it was removed or never written"
    assert episcope(tmp_path, "jobs", "log", job_id, "--workspace", str(ws)).stdout == "to out\n"


def test_jobs_log_of_a_queued_job_says_it_has_not_started(tmp_path):
    from console.jobs.slots import try_acquire

    ws = workspace(tmp_path)
    held = [try_acquire(ws) for _ in range(MAX_SANDBOX_JOBS)]  # a fifth job waits for a slot
    request, _ = parse_request(["--workspace", str(ws), "--timeout", "30", "--", sys.executable, "-c", "pass"])
    cancel = threading.Event()
    worker = threading.Thread(target=run_job, args=(request, None), kwargs={"cancel": cancel})
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not list_job_records(ws)[0]:
            time.sleep(0.05)
        (record,) = list_job_records(ws)[0]
        assert record.state == "queued"
        line = one_line(episcope(tmp_path, "jobs", "log", record.job_id, "--workspace", str(ws)), 1)
        assert line == f"episcope: job {record.job_id} has no stdout.log: it has not started yet"
    finally:
        cancel.set()
        worker.join(timeout=30)
        for slot in held:
            slot.release()
    assert not worker.is_alive()


def test_the_jobs_table_counts_a_running_job_to_now():
    running = job_record_from_obj({"schema": JOB_SCHEMA, "job_id": "j1", "state": "running", "kind": "dev",
                                   "argv": ["sleep", "9"], "created_at": "2026-11-29T06:00:00+00:00",
                                   "started_at": "2026-11-29T06:00:01+00:00"})
    started = datetime.fromisoformat("2026-11-29T06:00:01+00:00").timestamp()
    header, row = render_table([running], started + 12.34).splitlines()
    assert header.split()[6] == "SECONDS" and row.split()[7] == "12.3"  # CREATED is two words


def test_episcope_jobs_shows_a_running_jobs_seconds_so_far(tmp_path):
    ws = workspace(tmp_path)
    request, _ = parse_request(["--workspace", str(ws), "--timeout", "60", "--", sys.executable, "-c",
                                "import time; print('up', flush=True); time.sleep(60)"])
    cancel = threading.Event()
    worker = threading.Thread(target=run_job, args=(request, None), kwargs={"cancel": cancel, "kill_grace": 1.0})
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(r.state == "running" for r in list_job_records(ws)[0]):
            time.sleep(0.05)
        time.sleep(1.0)
        table = episcope(tmp_path, "jobs", str(ws))
        assert table.returncode == 0, table.stderr
        row = table.stdout.splitlines()[1].split()
        assert row[1] == "running" and float(row[7]) >= 1.0  # CREATED is two words
    finally:
        cancel.set()
        worker.join(timeout=30)
    assert not worker.is_alive()
