"""What a repeated ``episcope status`` of an archive must not do at start-up (its time is
measured in benchmarks/spine.py): unpack the archive again, or start more git processes than
its git facts need. Git facts are read afresh each time (there is no git-facts cache), so both
runs agree."""

from __future__ import annotations

import json
import os
import shutil
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


def test_second_status_of_an_archive_unpacks_nothing_and_agrees(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first, loaded = status_in_child(ARCHIVE, env)  # unpacks, links the worktree, asks git
    assert "git" in loaded and first["git"]["head"] is not None
    (marker,) = (tmp_path / "cache").rglob(".episcope-unpacked")
    made = marker.stat().st_mtime_ns
    second, _ = status_in_child(ARCHIVE, env)
    assert marker.stat().st_mtime_ns == made
    assert second["git"] == first["git"] and second["git"]["error"] is None
    for doc in (first, second):
        (doc.get("gpu") or {}).pop("sampled_at", None)  # when this run sampled the GPU
    assert second == first


def test_status_of_an_archive_starts_only_the_git_processes_its_facts_need(tmp_path):
    """Every git process of a second status run, seen through a ``git`` on PATH that logs its
    arguments and runs the real one. The copy's campaign is known from the unpacker's layout,
    so only the episode worktree's repository is opened: one ``git config --list`` (the
    safe environment), one process per question after it. GitPython's own ``git version``
    at import is left out of the count: it is the library's, not episcope's."""
    log = tmp_path / "git.log"
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\nexec '{shutil.which('git')}' \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    status_in_child(ARCHIVE, env)  # unpacks: its config rewriting runs git too
    log.unlink()
    doc, _ = status_in_child(ARCHIVE, env)
    assert doc["git"]["error"] is None and doc["git"]["candidate_changes"] == ["kernel.py"]
    ran = [line.split()[:2] for line in log.read_text().splitlines() if line != "version"]
    assert sorted(ran) == [
        ["cat-file", "--batch"],
        ["cat-file", "--batch-check"],
        ["config", "--list"],
        ["diff", "--no-ext-diff"],
        ["merge-base", "--is-ancestor"],
        ["rev-list", "--max-parents=0"],
        ["status", "--porcelain=v1"],
    ]
