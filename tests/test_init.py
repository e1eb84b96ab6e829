"""`episcope init`: a real git workspace from a bundled problem."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from console.commands.init import EXCLUDES

REPO = Path(__file__).resolve().parents[1]
PROBLEM = REPO / "examples" / "problems" / "row_softmax"


def git(cwd: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_list_names_bundled_problems(capsys):
    assert main(["init", "--list"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert "row_softmax" in names


def test_init_creates_clean_committed_workspace(tmp_path, capsys):
    ws = tmp_path / "ws"
    assert main(["init", str(ws), "--problem", "row_softmax"]) == 0
    out = capsys.readouterr().out.strip()
    head = git(ws, "rev-parse", "HEAD").strip()
    assert out == f"{ws}\t{head}"
    assert git(ws, "status", "--porcelain") == ""
    assert git(ws, "rev-list", "--count", "HEAD").strip() == "1"
    tracked = set(git(ws, "ls-files").split())
    for name in ("kernel.py", "test_kernel.py", "profile_driver.py", "reference.py", "input.py",
                 "definition.json", "workload.jsonl", "tools/evaluate.py", "tools/problem_contract.py",
                 "tools/profile_driver.py", "skills/gpu-kernel-episode-loop/SKILL.md"):
        assert name in tracked, name
    assert not any(name.startswith("kernel_") for name in tracked)  # the fast solution stays out
    assert (ws / "kernel.py").read_bytes() == (PROBLEM / "kernel_naive.py").read_bytes()
    assert (ws / "memory").is_dir()
    exclude = (ws / ".git" / "info" / "exclude").read_text().splitlines()
    assert all(entry in exclude for entry in EXCLUDES)
    # runtime files the episode writes stay out of every commit
    for rel in ("memory/live.json", "plans/p.md", "profiles/episode_1/x.txt", ".atrex_long_horizon/journal.json",
                ".atrex_private_profile_case.json"):
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    assert git(ws, "status", "--porcelain") == ""
    (ws / "memory" / "v0.json").write_text("{}")
    assert git(ws, "status", "--porcelain").strip() == "?? memory/"


def test_workspace_shim_runs_the_evaluator(tmp_path):
    ws = tmp_path / "ws"
    assert main(["init", str(ws), "--problem", "row_softmax"]) == 0
    proc = subprocess.run([sys.executable, "test_kernel.py", "--shape-id", "nope"], cwd=ws,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "[test_kernel] RESULT_JSON=" in proc.stdout and "unknown shape 'nope'" in proc.stdout


@pytest.mark.parametrize("problem", ["row_softmax", "rms_norm"])
def test_workspace_readme_names_only_what_the_workspace_has(tmp_path, problem):
    # Every path the README's tables name is in the workspace, or is a runtime path the
    # episode writes later (one init keeps out of commits); the problem's other kernels are not.
    ws = tmp_path / "ws"
    assert main(["init", str(ws), "--problem", problem]) == 0
    readme = (ws / "README.md").read_text()
    named = [name for row in readme.splitlines() if row.startswith("| `")
             for name in re.findall(r"`([^`]+)`", row.split("|")[1])]
    assert "kernel.py" in named and "test_kernel.py" in named
    missing = [name for name in named if not (ws / name).exists() and name not in EXCLUDES]
    assert missing == []
    assert "kernel_naive" not in readme and "kernel_fast" not in readme


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["init", "{ws}", "--problem", "no_such_problem"], "unknown problem 'no_such_problem'"),
        (["init", "{ws}"], "usage: episcope init DIR --problem NAME"),
        (["init", "{file}", "--problem", "row_softmax"], "already exists"),
    ],
)
def test_init_refuses_bad_input(tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("x")
    argv = [a.format(ws=tmp_path / "ws", file=tmp_path / "file") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_missing_bundled_examples_is_a_clear_error(tmp_path, capsys, monkeypatch):
    import console.commands.init as init

    monkeypatch.setattr(init, "kit_path", lambda area: tmp_path / area)
    assert main(["init", "--list"]) == 2
    assert "bundled problems not found" in capsys.readouterr().err
