"""The layers hold, the lint rules pass and the typed packages type-check, as configured in
pyproject.toml: import-linter's contracts, ruff, and mypy (strict on console/episode and
console/formats)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def run_tool(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), cwd=REPO, capture_output=True, text=True, timeout=600)


def test_import_contracts_hold():
    proc = run_tool(str(BIN / "lint-imports"), "--no-cache")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_ruff_finds_nothing():
    proc = run_tool(sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_typed_packages_pass_mypy_strict():
    proc = run_tool(sys.executable, "-m", "mypy")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("Success")
