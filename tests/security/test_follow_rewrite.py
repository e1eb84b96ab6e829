"""A telemetry file truncated and rewritten longer in place (same inode) is read again
(issue 17): its size never drops below the follower's offset, so only the bytes the
follower already read show the rewrite. Nothing of the new content may be lost, and nothing
of the old content may be counted twice.

Each case runs the real ``episcope`` (or the real session) on a real workspace.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

from console.episode import events as ev
from console.episode.session import Session
from console.episode.tailer import Tailer
from spine_helpers import follow_until

REPO = Path(__file__).resolve().parents[2]
RUNTIME = ".atrex_long_horizon"
OLD = 20  # events before the rewrite
NEW = 60  # events after it: more bytes than the follower had read


def telemetry(mono: float, reference: str) -> dict:
    return {"schema_version": "atrex_iteration_event_v1", "campaign_id": "demo", "iteration_id": "episode-0001",
            "attempt_id": "invocation-1", "event": "source_read", "timestamp": "2026-11-29T06:00:00+00:00",
            "monotonic_seconds": mono, "source": "agent_marker", "measurement": "explicit",
            "source_kind": "workspace", "reference": reference}


def lines(prefix: str, count: int) -> str:
    return "".join(json.dumps(telemetry(float(i), f"{prefix}/{i}.md")) + "\n" for i in range(count))


def rewrite_in_place(path: Path, text: str) -> None:
    """Truncate the file (same inode) and write ``text`` into it before anyone reads."""
    with open(path, "r+") as fh:
        fh.truncate(0)
        fh.write(text)


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    path = ws / RUNTIME / "telemetry.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(lines("old", OLD))
    return ws, path


def test_events_follow_reports_every_event_of_a_longer_rewrite(tmp_path):
    ws, path = workspace(tmp_path)
    inode = path.stat().st_ino
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "events", str(ws), "--follow"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [printed.put(line) for line in proc.stdout], daemon=True).start()

    def next_event() -> dict:
        line = printed.get(timeout=20)  # a follower that stopped reporting fails here, not hangs
        assert line, proc.stderr.read()
        return json.loads(line)

    try:
        before = [next_event() for _ in range(OLD)]
        assert [e["data"]["reference"] for e in before] == [f"old/{i}.md" for i in range(OLD)]
        rewrite_in_place(path, lines("new", NEW))
        assert path.stat().st_ino == inode and path.stat().st_size > sum(len(e) for e in lines("old", OLD))
        seen = [next_event()]
        while sum(e["kind"] == "telemetry" for e in seen) < NEW:
            seen.append(next_event())
        assert seen[0]["kind"] == "removed" and seen[0]["path"] == str(path)
        references = [e["data"]["reference"] for e in seen if e["kind"] == "telemetry"]
        assert references == [f"new/{i}.md" for i in range(NEW)]
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    status = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", str(ws)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["telemetry_events"] == NEW and document["source_reads"] == NEW


def test_a_live_session_drops_the_old_events_of_a_longer_rewrite(tmp_path):
    ws, path = workspace(tmp_path)
    session = Session(ws)
    assert session.scan().telemetry_events == OLD
    seen = follow_until(session, lambda: rewrite_in_place(path, lines("new", NEW)),
                        lambda events: sum(e.kind == ev.TELEMETRY for e in events) >= NEW, timeout=20)
    assert seen[0].kind == ev.REMOVED
    assert session.state.telemetry_events == NEW  # the old twenty are gone, not added to
    assert len(session.state.source_reads) == NEW


def test_the_tailer_sees_a_rewrite_behind_short_lines_read_one_at_a_time(tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"")
    tailer = Tailer(str(path))
    read: list[bytes] = []
    for i in range(40):  # each read consumes one line, far shorter than the fingerprint
        with open(path, "ab") as fh:
            fh.write(b"%d\n" % i)
        read += [line for _, lines in tailer.batches() for line in lines]
        assert tailer.reset is None
    assert read == [b"%d" % i for i in range(40)]
    with open(path, "r+b") as fh:  # the same bytes but the last line: still a rewrite
        fh.truncate(0)
        fh.write(b"".join(b"%d\n" % i for i in range(39)) + b"x9\n" + b"more\n" * 10)
    again = [line for _, lines in tailer.batches() for line in lines]
    assert tailer.reset == "truncated"
    assert again[38:40] == [b"38", b"x9"] and len(again) == 50
