"""tools/abba.py end to end on a real git repository with a stand-in evaluator (no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.abba import parse_abba_batch, read_abba_request, read_abba_verdict
from console.formats.gpu_side import ABBA_PREFIX

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "abba.py"

# Reads LATENCY (and FAIL) from kernel.py and prints a RESULT_JSON line as tools/evaluate.py would.
EVALUATOR = '''import json, runpy, sys
k = runpy.run_path("kernel.py")
ok = not k.get("FAIL", False)
print("[test_kernel] sid=0: " + ("PASS" if ok else "FAIL"))
r = {"all_pass": ok, "failures": [] if ok else ["sid=0: correctness mismatch"],
     "latency_us_geomean": k["LATENCY"], "latency_us_by_shape": {"s0": k["LATENCY"]}, "argv": sys.argv[1:]}
print("[test_kernel] RESULT_JSON=" + json.dumps(r))
sys.exit(0 if ok else 1)
'''


def git(repo: Path, *argv: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *argv], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def repo(tmp_path):
    repo = tmp_path / "campaign"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "test_kernel.py").write_text(EVALUATOR)
    (repo / "kernel.py").write_text("LATENCY = 100.0\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "kernel.py").write_text("LATENCY = 40.0\n")
    git(repo, "commit", "-q", "-am", "fast")
    fast = git(repo, "rev-parse", "HEAD")
    (repo / "kernel.py").write_text("LATENCY = 10.0\nFAIL = True\n")
    git(repo, "commit", "-q", "-am", "wrong")
    wrong = git(repo, "rev-parse", "HEAD")
    return repo, base, fast, wrong


def abba(repo: Path, out: Path, inc: str, cand: str, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(TOOL), "--repo", str(repo), "--incumbent-commit", inc, "--candidate-commit", cand,
            "--output-dir", str(out), "--artifact-root", str(out.parent), *extra, "--", sys.executable, "test_kernel.py", "--iters", "5"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def verdict_line(proc) -> dict:
    lines = [l for l in proc.stdout.splitlines() if l.startswith(ABBA_PREFIX)]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return json.loads(lines[0][len(ABBA_PREFIX):])


def test_pass_writes_every_artifact_in_schedule_order(repo, tmp_path):
    repo, base, fast, _ = repo
    out = tmp_path / "verification_artifacts"
    proc = abba(repo, out, base, fast, "--repeats", "2")
    assert proc.returncode == 0, proc.stderr
    verdict = verdict_line(proc)
    assert verdict["gate"] == "PASS" and verdict["incumbent_latency_us"] == pytest.approx(100.0) and verdict["candidate_latency_us"] == pytest.approx(40.0)
    assert verdict["improvement_pct"] == pytest.approx(60.0)
    (verify,) = (out / ".atrex_long_horizon_verify").iterdir()
    assert verdict["artifact"] == str(verify.relative_to(tmp_path))
    runs = [json.loads(l) for l in (verify / "runs.jsonl").read_text().splitlines()]
    assert [(r["revision"], r["repeat"]) for r in runs] == [("incumbent", 0), ("candidate", 0), ("candidate", 1), ("incumbent", 1)]
    assert all(r["exit_code"] == 0 and r["result"]["argv"] == ["--iters", "5"] for r in runs)
    request = read_abba_request(verify / "request-0001.json").value
    assert request.repeats == 2 and request.manifests["candidate"]["commit"] == fast
    assert len(parse_abba_batch(json.loads((verify / "result-0001.json").read_text())).runs) == 4
    stored = read_abba_verdict(verify / "result.json", repeats=2).value
    assert stored.gate == "PASS" and stored.candidate_latency_us == pytest.approx(40.0)
    # the run directories are gone; the repository is untouched
    assert git(repo, "status", "--porcelain") == ""


def test_failing_candidate_and_no_improvement_fail(repo, tmp_path):
    repo, base, fast, wrong = repo
    proc = abba(repo, tmp_path / "a", base, wrong, "--repeats", "1")
    assert proc.returncode == 1
    verdict = verdict_line(proc)
    assert verdict["gate"] == "FAIL" and "0 of 1 candidate" in verdict["error"]
    same = abba(repo, tmp_path / "b", fast, fast, "--repeats", "1")
    assert same.returncode == 1 and verdict_line(same)["gate"] == "FAIL"
    threshold = abba(repo, tmp_path / "c", base, fast, "--repeats", "1", "--min-improvement-pct", "75")
    assert threshold.returncode == 1 and "does not exceed 75.000%" in verdict_line(threshold)["error"]


def test_unknown_commit_is_a_usage_error(repo, tmp_path):
    repo, base, _, _ = repo
    proc = abba(repo, tmp_path / "x", base, "deadbeef")
    assert proc.returncode == 2 and proc.stderr.startswith("abba: git rev-parse failed")
    assert not (tmp_path / "x").exists()
