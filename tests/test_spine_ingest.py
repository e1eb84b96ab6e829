from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.episode import events as ev
from console.episode.registry import artifact_at
from console.episode.session import Session
from console.episode.workspace import WorkspaceError, resolve_workspace
from spine_helpers import git, line, make_campaign, tele, write_lines

EPISCOPE = [sys.executable, "-m", "console.cli"]


@pytest.fixture()
def campaign(tmp_path):
    return make_campaign(tmp_path)


def test_resolve_from_worktree_and_from_campaign(campaign):
    root, worktree, _ = campaign
    from_worktree = resolve_workspace(worktree)
    from_root = resolve_workspace(root)
    assert from_worktree.campaign_root == root.resolve()
    assert from_worktree.worktree == worktree.resolve()
    assert from_root.worktree == worktree.resolve()  # found through active_episode.json
    assert from_root.worktrees == (worktree.resolve(),)


def test_not_a_workspace_is_a_clear_error(tmp_path):
    with pytest.raises(WorkspaceError, match="not an episode workspace"):
        resolve_workspace(tmp_path)


@pytest.mark.parametrize(
    "rel, kind",
    [
        (".atrex_long_horizon/telemetry.jsonl", ev.TELEMETRY),
        (".atrex_long_horizon/evaluations.jsonl", ev.EVALUATION),
        (".atrex_long_horizon/episodes/e0003/attempt.json", ev.ATTEMPT),
        (".atrex_long_horizon/sandbox/job-1/job.json", ev.JOB),
        ("memory/v12.json", ev.MEMORY_VERSION),
        ("memory/live.json", ev.LIVE_MEMORY),
        ("memory/long_horizon_e0001.json", None),
        ("profiles/episode_1/shape-0/summary.txt", ev.PROFILE),
        ("timeline/run1/receipt.json", ev.TIMELINE_RECEIPT),
        ("timeline/overhead.runs.jsonl", ev.MEASURE_RUN),
        ("kernel.py", None),
    ],
)
def test_classify(rel, kind):
    artifact = artifact_at(rel)
    assert (artifact.kind if artifact else None) == kind


def test_scan_reads_campaign_and_worktree(campaign):
    root, worktree, base = campaign
    write_lines(worktree / ".atrex_long_horizon" / "telemetry.jsonl", [
        tele("phase_started", 1.0, phase="profile"),
        tele("phase_completed", 3.0, phase="profile"),
    ])
    state = Session(root).scan()
    assert state.phase_totals["profile"].wall_seconds == pytest.approx(2.0)
    assert state.active_episode.episode == 1
    assert [v.version for v in state.versions] == [0]
    assert state.git.branch == "atrex/long-e0001-abcdef12"
    assert state.git.base_commit == base


def test_broken_lines_are_reported_with_offsets_and_good_ones_kept(campaign):
    _, worktree, _ = campaign
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    good = line(tele("phase_started", 1.0, phase="profile"))
    write_lines(path, [good, b"{not json\n", line(tele("phase_completed", 2.0, phase="profile")), b'{"event":"bogus"}\n'])
    state = Session(worktree).scan()
    assert state.phase_totals["profile"].intervals == 1
    problems = {(Path(u.path).name, u.offset) for u in state.unreadable}
    assert ("telemetry.jsonl", len(good)) in problems
    assert len(state.unreadable) == 2


def test_refresh_reads_only_new_lines_and_new_documents(campaign):
    root, worktree, _ = campaign
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    write_lines(path, [tele("phase_started", 1.0, phase="profile")])
    session = Session(worktree)
    session.scan()
    write_lines(path, [tele("phase_completed", 4.0, phase="profile")])
    new = session.refresh([str(path)])
    assert [e.kind for e in new] == [ev.TELEMETRY]
    assert session.state.phase_totals["profile"].wall_seconds == pytest.approx(3.0)
    (root / "memory" / "v1.json").write_text(json.dumps({"version": 1, "performance": {"latency_us_geomean": 80.0}}))
    new = session.refresh([str(root / "memory" / "v1.json")])
    assert [e.kind for e in new] == [ev.MEMORY_VERSION]
    assert [v.version for v in session.state.versions] == [0, 1]


def test_removed_document_disappears(campaign):
    root, worktree, _ = campaign
    session = Session(root)
    assert session.scan().active_episode is not None
    os.unlink(root / ".atrex_long_horizon" / "active_episode.json")
    session.refresh([str(root / ".atrex_long_horizon" / "active_episode.json")])
    assert session.state.active_episode is None


def test_guards_see_protected_edits_and_bad_candidates(campaign):
    root, worktree, base = campaign
    (worktree / "profile_driver.py").write_text("print('tampered')\n")
    (worktree / "kernel.py").write_text("// ATREX_TIMELINE_ENABLED\ndef kernel(x):\n    return x * 1\n")
    git(worktree, "add", "-A")
    git(worktree, "commit", "-q", "-m", "candidate")
    head = git(worktree, "rev-parse", "HEAD")
    (worktree / ".atrex_long_horizon").mkdir(exist_ok=True)
    (worktree / ".atrex_long_horizon" / "handoff.json").write_text(json.dumps({"status": "candidate_ready", "candidate_commit": head}))
    (worktree / "memory" / "v0.json").write_text("{}")  # protected, uncommitted
    state = Session(worktree).scan()
    codes = {a.code for a in state.alerts}
    assert {"candidate_scope", "instrumented_candidate", "protected_path_modified", "instrumented_kernel"} <= codes
    assert state.git.candidate_changes == ("kernel.py", "profile_driver.py")


def test_status_json_and_exit_codes(campaign, tmp_path):
    root, worktree, _ = campaign
    write_lines(worktree / ".atrex_long_horizon" / "telemetry.jsonl", [tele("phase_started", 1.0, phase="research")])
    out = subprocess.run([*EPISCOPE, "status", str(root), "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    for key in ("schema_version", "campaign", "episode", "phases", "orchestration_seconds", "source_reads", "sandbox",
                "evaluations", "incumbent", "versions", "profiles", "alerts", "unreadable"):
        assert key in doc
    assert doc["episode"]["number"] == 1
    assert doc["episode"]["mode"] == "full"
    assert doc["phases"]["research"]["active"] is True
    bad = subprocess.run([*EPISCOPE, "status", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1


def test_events_prints_json_lines_with_provenance(campaign):
    _, worktree, _ = campaign
    write_lines(worktree / ".atrex_long_horizon" / "telemetry.jsonl", [tele("phase_started", 1.0, phase="profile")])
    out = subprocess.run([*EPISCOPE, "events", str(worktree), "--kind", "telemetry"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in out.stdout.splitlines()]
    assert len(rows) == 1
    assert rows[0]["offset"] == 0
    assert rows[0]["data"]["phase"] == "profile"


def test_headless_verbs_never_import_textual(campaign):
    root, _, _ = campaign
    code = (
        "import sys, io, contextlib\n"
        "from console.cli import main\n"
        "with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())):\n"
        f"    main(['status', {str(root)!r}, '--json'])\n"
        f"    main(['events', {str(root)!r}])\n"
        "    main(['jobs', " + repr(str(root)) + ", '--json'])\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_git_facts_follow_edits_and_commits(campaign):
    _, worktree, _ = campaign
    first = Session(worktree).scan()
    assert first.git.dirty_paths == ()
    again = Session(worktree).scan()
    assert again.git == first.git
    (worktree / "profile_driver.py").write_text("print('edited')\n")
    edited = Session(worktree).scan()
    assert edited.git.dirty_paths == ("profile_driver.py",)
    assert "protected_path_modified" in {a.code for a in edited.alerts}
    git(worktree, "commit", "-qam", "edit")
    committed = Session(worktree).scan()
    assert committed.git.dirty_paths == ()
    assert committed.git.head != first.git.head


def _line_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    for raw in data.split(b"\n")[:-1]:
        if raw:
            starts.append(pos)
        pos += len(raw) + 1
    return starts


@pytest.mark.parametrize("bad_line", [b"  \t\n", b"glued", b'{"event":"phase_started"\n', b"no phase"])
def test_every_line_is_one_record_in_both_scans(campaign, bad_line):
    """A blank-looking line, two records on one line (a writer that lost a newline), a
    broken line and a phase marker without its phase are each reported with their offset,
    by the status scan and the event scan alike; every other line is kept, and blank lines
    are skipped."""
    _, worktree, _ = campaign
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    one, two = line(tele("phase_started", 1.0, phase="profile")), line(tele("phase_completed", 2.0, phase="profile"))
    if bad_line == b"glued":
        bad_line = one.rstrip(b"\n") + two
    elif bad_line == b"no phase":
        bad_line = line(tele("phase_completed", 1.5))
    write_lines(path, [one, b"\n", bad_line, two])
    status = Session(worktree).scan()
    assert [u.offset for u in status.unreadable] == [len(one) + 1]
    session = Session(worktree)
    events = list(session.scan_events())
    assert [e.offset for e in events if e.kind == ev.TELEMETRY] == [0, len(one) + 1 + len(bad_line)]
    assert [u.offset for u in session.state.unreadable] == [len(one) + 1]
    assert status.phase_totals == session.state.phase_totals
    assert status.phase_totals["profile"].intervals == 1


def test_offsets_stay_exact_across_read_chunks(campaign, monkeypatch):
    import console.episode.tailer as tailer_module

    monkeypatch.setattr(tailer_module, "CHUNK", 700)  # a few lines per read
    _, worktree, _ = campaign
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    records = []
    for i in range(40):
        records += [tele("phase_started", 10.0 * i, phase="research"), tele("source_read", 10.0 * i + 1, source_kind="workspace",
                    reference="x" * (i * 37 % 500)), tele("phase_completed", 10.0 * i + 2, phase="research")]
    write_lines(path, records[:70])
    write_lines(path, [b"{broken\n"])
    write_lines(path, records[70:])
    session = Session(worktree)
    events = list(session.scan_events())
    offsets = [e.offset for e in events if e.kind in (ev.TELEMETRY, ev.UNREADABLE) and e.path == str(path)]
    assert offsets == _line_starts(path.read_bytes())
    status = Session(worktree).scan()
    assert status.phase_totals == session.state.phase_totals
    assert status.phase_totals["research"].intervals == 40
    assert status.telemetry_events == session.state.telemetry_events == 120
    assert list(status.source_reads) == list(session.state.source_reads)


def test_cold_scan_restores_the_garbage_collector(campaign):
    import gc

    _, worktree, _ = campaign
    write_lines(worktree / ".atrex_long_horizon" / "telemetry.jsonl", [tele("phase_started", 1.0, phase="profile")])
    assert gc.isenabled()
    Session(worktree).scan()
    assert gc.isenabled()
    gc.disable()
    try:
        Session(worktree).scan()
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()


def test_naive_offset_and_missing_timestamps_keep_their_times(campaign):
    """Naive times are UTC, offsets are honoured and a missing time stays unknown, on the
    status scan and the event scan alike."""
    _, worktree, _ = campaign
    path = worktree / ".atrex_long_horizon" / "telemetry.jsonl"
    stamps = ["2026-11-29T06:00:00+00:00", "2026-11-29T08:00:01.5+02:00", "2026-11-29T06:00:02Z",
              "2026-11-29T06:00:03.25", None]
    records = []
    for i, stamp in enumerate(stamps):
        record = tele("source_read", float(i), source_kind="workspace", reference=f"r{i}")
        if stamp is None:
            del record["timestamp"]
        else:
            record["timestamp"] = stamp
        records.append(record)
    write_lines(path, records)
    t0 = 1_795_932_000.0  # 2026-11-29T06:00:00Z
    expected = [t0, t0 + 1.5, t0 + 2.0, t0 + 3.25, None]
    session = Session(worktree)
    assert [e.at for e in session.scan_events() if e.kind == ev.TELEMETRY] == expected
    status = Session(worktree).scan()
    assert [r.at for r in status.source_reads] == expected
