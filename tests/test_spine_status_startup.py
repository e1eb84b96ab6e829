"""What a repeated ``episcope status`` must not do at start-up (its time is measured in
benchmarks/spine.py): unpack or hash the archive again, run git, or load GitPython."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"

# status on stdout, then (stderr) the modules of interest it loaded
STATUS_AND_MODULES = (
    "import json, sys\n"
    "from console.cli import main\n"
    "code = main(['status', sys.argv[1], '--json'])\n"
    "print(json.dumps(sorted({'git', 'hashlib', 'subprocess', 'tarfile'} & set(sys.modules))), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def status_in_child(path: Path, env: dict) -> tuple[dict, list]:
    proc = subprocess.run([sys.executable, "-c", STATUS_AND_MODULES, str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(proc.stderr.splitlines()[-1])


def test_second_status_of_an_archive_runs_no_git_and_hashes_nothing(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first, loaded = status_in_child(ARCHIVE, env)  # unpacks, repairs the worktree links, asks git
    assert "git" in loaded and first["git"]["head"] is not None
    # Without git on PATH, any git process (or GitPython, which needs one) would fail.
    second, loaded = status_in_child(ARCHIVE, {**env, "PATH": str(tmp_path / "no-such-dir")})
    assert loaded == []
    assert second["git"] == first["git"] and second["git"]["error"] is None
    assert second == first
