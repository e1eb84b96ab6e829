#!/usr/bin/env python3
"""Compare the incumbent and a candidate kernel.py in one ABBA schedule (FORMATS §7).

    python tools/abba.py --incumbent-commit C1 --candidate-commit C2 --output-dir D
                         [--repo .] [--repeats 2] [--min-improvement-pct 0]
                         [--run-timeout 600] [--artifact-root DIR] -- EVALUATOR ARGS...

Both revisions get their own run directory: the repository's tree at the incumbent commit
(so evaluator and ground truth are the same for both), with kernel.py taken from each
commit (``git show C:kernel.py``). The evaluator command (e.g. ``python3 test_kernel.py``)
then runs in the order incumbent, candidate, candidate, incumbent, ... from this one process,
one run at a time. Each finished run is appended to ``runs.jsonl``; at the end
``request-0001.json``, ``result-0001.json`` and ``result.json`` are written, all under
``D/.atrex_long_horizon_verify/<uuid>/``, and the verdict is printed as
``__ATREX_LONG_HORIZON_ABBA_RESULT__=<json>``.

Exit status: 0 PASS; 1 FAIL or ERROR; 2 usage error or unusable commits; 130 interrupted.
Standard library only (it runs on the GPU machine).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import signal
import sys
import tarfile
import tempfile
import threading
import uuid
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "console" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    # Run from a checkout: the console package beside tools/ wins over an installed one.
    sys.path.insert(0, str(_ROOT))

from console.episode.git_repo import GitUnavailable, run_git  # noqa: E402
from console.formats import gpu_side  # noqa: E402
from console.formats.gpu_side import RESULT_PREFIX  # noqa: E402
from console.formats.plainjson import append_json_line, atomic_write_json, dumps  # noqa: E402
from console.formats.problems import FormatError  # noqa: E402
from console.jobs.local import run_process  # noqa: E402

VERIFY_DIR = ".atrex_long_horizon_verify"
RUNS_LOG = "runs.jsonl"
TAIL_CHARS = 2000


class UsageError(Exception):
    """Bad arguments or commits; the message is one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="abba.py", description="ABBA comparison of two kernel.py commits.")
    p.add_argument("--incumbent-commit", required=True)
    p.add_argument("--candidate-commit", required=True)
    p.add_argument("--output-dir", required=True, help="verification_artifacts directory")
    p.add_argument("--repo", default=".", help="git repository holding both commits (default .)")
    p.add_argument("--repeats", type=int, default=2, help="R: runs per revision (default 2: I C C I)")
    p.add_argument("--min-improvement-pct", type=float, default=0.0)
    p.add_argument("--run-timeout", type=float, default=600.0, help="seconds one evaluator run may take")
    p.add_argument("--artifact-root", help="the verdict's artifact path is relative to this directory")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the evaluator command (after --)")
    return p


def git(repo: Path, *argv: str, binary: bool = False):
    """git in ``repo`` with episcope's safe settings: the repository's config runs nothing."""
    try:
        out = run_git(repo, *argv, timeout=120)
    except GitUnavailable as exc:
        raise UsageError(f"git {argv[0]} failed: {exc}") from None
    if out.returncode != 0:
        raise UsageError(f"git {argv[0]} failed: {' '.join(out.stderr.decode(errors='replace').split())}")
    return out.stdout if binary else out.stdout.decode().strip()


def materialise(repo: Path, base_commit: str, kernel_commit: str, target: Path) -> str:
    """Write the tree of ``base_commit`` with kernel.py of ``kernel_commit`` into ``target``;
    returns that kernel.py's sha256."""
    archive = git(repo, "archive", "--format=tar", base_commit, binary=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            # git archive holds only the commit's own paths; refuse anything else all the same
            if member.name.startswith("/") or ".." in Path(member.name).parts or not (member.isfile() or member.isdir()):
                raise UsageError(f"commit {base_commit} holds an unsafe path: {member.name}")
        tar.extractall(target, filter="data")
    kernel = git(repo, "show", f"{kernel_commit}:kernel.py", binary=True)
    (target / "kernel.py").write_bytes(kernel)
    return hashlib.sha256(kernel).hexdigest()


def parse_result(stdout: str) -> dict | None:
    """The evaluator's last RESULT_JSON object, or None (then the run cannot count)."""
    import json

    for line in reversed(stdout.splitlines()):
        text = line.strip()
        if text.startswith(RESULT_PREFIX):
            try:
                value = json.loads(text[len(RESULT_PREFIX):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_schedule(args, repo: Path, verify: Path, work: Path, stop: threading.Event) -> tuple[list[dict], dict]:
    commits = {"incumbent": args.incumbent_commit, "candidate": args.candidate_commit}
    manifests = {}
    dirs = {}
    for revision, commit in commits.items():
        dirs[revision] = work / revision
        dirs[revision].mkdir()
        sha = materialise(repo, commits["incumbent"], commit, dirs[revision])
        manifests[revision] = {"commit": commit, "kernel_sha256": sha}
    schedule = [{"revision": rev, "repeat": i // 2} for i, rev in enumerate(gpu_side.abba_schedule(args.repeats))]
    request = {
        "schema_version": gpu_side.PAYLOAD_SCHEMA,
        "schedule": schedule,
        "command": list(args.command),
        "run_timeout_seconds": args.run_timeout,
        "manifests": manifests,
    }
    atomic_write_json(verify / "request-0001.json", request)
    runs: list[dict] = []
    for index, step in enumerate(schedule):
        if stop.is_set():
            break
        logs = work / f"run-{index}"
        logs.mkdir()
        print(f"[abba] run {index + 1}/{len(schedule)}: {step['revision']} (repeat {step['repeat']})", file=sys.stderr, flush=True)
        outcome = run_process(
            list(args.command),
            cwd=dirs[step["revision"]],
            env=dict(os.environ),
            timeout=args.run_timeout,
            stdout_log=logs / "stdout",
            stderr_log=logs / "stderr",
            job_dir=logs,  # holds no job record: a run of this schedule is not a sandbox job
            job_id=f"abba-{verify.name}-{index + 1}",
            should_cancel=stop.is_set,
        )
        stdout = (logs / "stdout").read_text(errors="replace")
        stderr = (logs / "stderr").read_text(errors="replace")
        result = parse_result(stdout)
        exit_code = outcome.returncode if outcome.failure_type is None else None
        if outcome.failure_type is not None and outcome.message:
            stderr += f"\n[abba] {outcome.message}"
        run = {**step, "exit_code": exit_code, "result": result,
               "stdout_tail": stdout[-TAIL_CHARS:], "stderr_tail": stderr[-TAIL_CHARS:]}
        runs.append(run)
        append_json_line(verify / RUNS_LOG, run)
        latency = (result or {}).get("latency_us_geomean")
        print(f"[abba] {step['revision']}: exit={exit_code} all_pass={(result or {}).get('all_pass')} "
              f"latency_us_geomean={latency}", file=sys.stderr, flush=True)
    return runs, request


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no evaluator command given (abba.py ... -- python3 test_kernel.py)")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    repo = Path(args.repo).resolve()
    verify_uuid = uuid.uuid4().hex
    verify = Path(args.output_dir).resolve() / VERIFY_DIR / verify_uuid
    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    work = Path(tempfile.mkdtemp(prefix="abba-"))
    try:
        for name in ("incumbent_commit", "candidate_commit"):
            # --end-of-options: the name came from a workspace file and may look like an option
            setattr(args, name, git(repo, "rev-parse", "--verify", "--end-of-options", f"{getattr(args, name)}^{{commit}}"))
        verify.mkdir(parents=True)
        runs, _ = run_schedule(args, repo, verify, work, stop)
    except UsageError as exc:
        print(f"abba: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    payload = {"schema_version": gpu_side.PAYLOAD_SCHEMA, "runs": runs, "error": None}
    atomic_write_json(verify / "result-0001.json", payload)
    atomic_write_json(verify / "result.json", {**payload, "shape_batch_count": 1})
    artifact = os.path.relpath(verify, args.artifact_root) if args.artifact_root else str(verify)
    try:
        checked = [gpu_side.check_run(run, f"runs[{index}]") for index, run in enumerate(runs)]
        verdict = {**gpu_side.abba_verdict(checked, args.repeats, args.min_improvement_pct), "runs": runs}
    except FormatError as exc:  # the verdict names the malformed run and leaves the runs out
        verdict = {"gate": "ERROR", "candidate_latency_us": None, "incumbent_latency_us": None,
                   "improvement_pct": None, "error": f"malformed run: {exc}", "runs": None}
    verdict.update(artifact=artifact, candidate_performance_score=None, incumbent_performance_score=None)
    print(gpu_side.ABBA_PREFIX + dumps(verdict).decode(), flush=True)
    if stop.is_set():
        return 130
    return 0 if verdict["gate"] == "PASS" and verdict["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
