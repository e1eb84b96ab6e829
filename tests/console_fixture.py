"""A small but complete episode on disk for the console tests: a real git campaign with an
episode worktree, telemetry (closed, partial and running phases, reads, sandbox jobs),
canonical memory versions, job records with logs, an ABBA verdict, a timeline measure in
progress, an unreadable line, and a valid intra-kernel timeline receipt."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np

from spine_helpers import T0, git, make_campaign, tele, write_lines

RUNTIME = ".atrex_long_horizon"


def _iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _job(worktree: Path, job_id: str, state: str, category: str, created: float, *, log: str = "", **extra) -> None:
    directory = worktree / RUNTIME / "sandbox" / job_id
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "schema": "episcope-sandbox-job/v1", "job_id": job_id, "state": state, "argv": ["python", "test_kernel.py"],
        "kind": "run", "backend": "local", "workspace": str(worktree), "created_at": _iso(created),
        "started_at": _iso(created + 1), "finished_at": _iso(created + 31) if state not in ("queued", "running") else None,
        "category": category, "slot": 0, "launcher": "sandbox",
        "exit_code": 0 if state == "succeeded" else 2 if state == "failed" else None,  # the command's
        "result_code": 0 if state == "succeeded" else 1 if state == "failed" else None,  # the sandbox's
    }
    record.update(extra)
    (directory / "job.json").write_text(json.dumps(record))
    (directory / "stdout.log").write_text(log)


def write_receipt(directory: Path) -> Path:
    """A decodable ATREXLT1 capture: 2 CTAs x 2 warps, a 'load' and a 'store' range each."""
    from console.timeline import abi
    from console.timeline.manifest import warp_writers_manifest

    directory.mkdir(parents=True, exist_ok=True)
    manifest = warp_writers_manifest((2, 1, 1), (64, 1, 1), 7, 8)
    owners = 2 * len(manifest["owner_layout"]["writers"])
    header = abi.new_header((2, 1, 1), (64, 1, 1), owners, 8, 7)
    raw = abi.empty_buffer(header)
    records = np.frombuffer(raw, dtype=np.uint64, count=owners * 8 * 2, offset=abi.HEADER_BYTES).reshape(-1, 2)
    writers = len(manifest["owner_layout"]["writers"])
    claims = np.frombuffer(raw, dtype=np.uint64, count=owners, offset=abi.HEADER_BYTES + owners * 8 * 16)
    for owner in range(owners):
        cta, ordinal = divmod(owner, writers)
        thread = manifest["owner_layout"]["writers"][ordinal].get("thread")
        if thread is None:
            thread = manifest["owner_layout"]["writers"][ordinal]["warp"] * 32 + manifest["owner_layout"]["writers"][ordinal].get("lane", 0)
        claims[owner] = abi.claim_word(cta, thread)
        sm = cta
        base = 1000 + owner * 50
        for seq, (site, kind, ts) in enumerate(((1, 0, base), (1, 1, base + 400), (2, 0, base + 500), (2, 1, base + 900))):
            slot = owner * 8 + seq
            records[slot, 0] = ts
            tag = (site & abi.SITE_MASK) | (kind << abi.KIND_SHIFT) | ((sm & abi.SM_MASK) << abi.SM_SHIFT) | abi.COMMITTED
            records[slot, 1] = tag << 32  # payload 0 in the low word, tag above
    (directory / "raw.bin").write_bytes(bytes(raw))
    (directory / "manifest.json").write_text(json.dumps(manifest))
    dictionary = {"schema": "atrex-autonomous-timeline-events/v1", "sites": [
        {"site_id": 1, "name": "load", "kind": "range"}, {"site_id": 2, "name": "store", "kind": "range"}]}
    (directory / "events.json").write_text(json.dumps(dictionary))
    receipt = {"schema": "atrex-autonomous-timeline-receipt/v1", "backend": "cuda", "stage": "exploration",
               "raw": "raw.bin", "manifest": "manifest.json", "event_dictionary": "events.json",
               "evidence_class": "exploration"}
    path = directory / "receipt.json"
    path.write_text(json.dumps(receipt))
    return path


def build_episode(tmp: Path) -> tuple[Path, Path]:
    campaign, worktree, base = make_campaign(tmp)
    runtime = worktree / RUNTIME
    write_lines(runtime / "telemetry.jsonl", [
        tele("phase_started", 0.0, phase="research"),
        tele("source_read", 5.0, source_kind="gpu_wiki", reference="wiki/hopper.md"),
        tele("phase_completed", 20.0, phase="research"),
        tele("phase_started", 20.0, phase="implementation"),
        tele("sandbox_operation_started", 25.0, operation_id="sandbox-1-1", category="benchmark"),
        tele("sandbox_operation_completed", 40.0, operation_id="sandbox-1-1", category="benchmark",
             duration_seconds=15.0, status="succeeded", exit_status=0),
        tele("phase_completed", 60.0, phase="benchmark"),  # mismatched end: a partial span
        tele("phase_started", 60.0, phase="profile"),
        tele("phase_completed", 80.0, phase="profile"),
        tele("phase_started", 0.0, phase="planning", attempt="invocation-2"),
        tele("phase_completed", 30.0, phase="planning", attempt="invocation-2"),
        tele("phase_started", 30.0, phase="correctness", attempt="invocation-2"),
    ])
    with open(runtime / "telemetry.jsonl", "ab") as fh:
        fh.write(b'{"event": "phase_started", broken\n')
    for version, latency, gate in ((1, 90.0, "PASS"), (2, 80.5, "PASS"), (3, 85.0, "FAIL")):
        (campaign / "memory" / f"v{version}.json").write_text(json.dumps({
            "version": f"v{version}", "timestamp": _iso(version * 100),
            "performance": {"latency_us_geomean": latency, "measurement_status": "complete",
                            "measurement_subject": "candidate"},
            "correctness": {"status": gate}, "quality_gate": {"result": gate},
            "git_commit_hash": f"{version:040x}",
        }))
        git(campaign, "add", "memory")
        git(campaign, "commit", "-q", "-m", f"memory v{version}")
    _job(worktree, "job-0001", "succeeded", "benchmark", 10, log="shape 0 ok\nshape 1 ok\n")
    _job(worktree, "job-0002", "failed", "correctness", 20, log="sid=3: correctness mismatch\n")
    _job(worktree, "job-0003", "running", "profile", 30, log="[profile_driver] main: warmup=3 iters=10\n")
    verify = worktree / "verification_artifacts" / ".atrex_long_horizon_verify" / "0f0f"
    verify.mkdir(parents=True)
    runs = []
    for repeat, order in enumerate((("incumbent", "candidate"), ("candidate", "incumbent"))):
        for revision in order:
            latency = 100.0 + repeat if revision == "incumbent" else 90.0 + repeat
            runs.append({"revision": revision, "repeat": repeat, "exit_code": 0,
                         "result": {"all_pass": True, "failures": [], "latency_us_geomean": latency},
                         "stdout_tail": "", "stderr_tail": ""})
    (verify / "result.json").write_text(json.dumps({
        "gate": "PASS", "candidate_latency_us": 90.5, "incumbent_latency_us": 100.5, "improvement_pct": 9.95,
        "runs": runs, "error": None, "artifact": str(verify)}))
    write_receipt(worktree / "timeline" / "capture-1")
    return campaign, worktree
