"""An `episcope init` workspace runs its tools and skills as documented, with `PYTHONPATH=.`.

Everything runs for real: `episcope init` makes a git workspace, the workspace's own
`tools/sandbox.py` stages and runs jobs, and the interpreter is started without the
installed (editable) episcope in sight, so `console` can only come from the workspace.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from console.commands.init import WORKSPACE_CONSOLE
from console.formats.job_record import list_job_records

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
TIMELINE_SKILL = "skills/autonomous-gpu-kernel-timeline"
# The import the timeline skill's CUDA reference shows, up to the parts that need a GPU.
ADAPTER_IMPORT = f"""
import sys
sys.path.insert(0, "{TIMELINE_SKILL}/backends")
from cuda_backend.cupy_adapter import HEADER_PATH, TimelineBuffer, compile_module, site_constants
from console.timeline.manifest import warp_writers_manifest
import json
import console
manifest = warp_writers_manifest(grid=(264, 1, 1), block=(256, 1, 1), launch_id=1, records_per_owner=512)
constants = site_constants({{"sites": [{{"site_id": 1, "name": "mainloop", "kind": "range"}}]}})
print("ADAPTER=" + json.dumps([console.__file__, len(manifest["owner_layout"]["writers"]), HEADER_PATH.is_file(),
                               "mainloop" in constants]))
"""
# Importing with the editable install's finder taken away: a module missing from the
# workspace's console/ would otherwise be found in the checkout.
WITHOUT_EDITABLE_FINDER = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path"
    " if not getattr(f, '__module__', '').startswith('__editable__')]; "
)


def workspace_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "EPISCOPE_", "PROFILE_"))}
    env["PYTHONPATH"] = "."
    env.update(extra)
    return env


def run(ws: Path, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ws, env=workspace_env(), capture_output=True, text=True, timeout=timeout)


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("kit") / "ws"
    assert main(["init", str(target), "--problem", "row_softmax"]) == 0
    return target


def test_workspace_carries_the_console_domain_and_says_how_to_run(ws):
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ws, capture_output=True, text=True, check=True).stdout.split())
    assert {"console/__init__.py", "console/timeline/manifest.py", "console/jobs/staging.py",
            "console/formats/plainjson.py"} <= tracked
    # The Textual console, the verbs and the kit stay out; no caches are committed.
    assert sorted(p.name for p in (ws / "console").iterdir()) == sorted(WORKSPACE_CONSOLE)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in tracked)
    readme = (ws / "README.md").read_text()
    problem_readme = (REPO / "examples" / "problems" / "row_softmax" / "README.md").read_text()
    assert readme.startswith(problem_readme.rstrip("\n"))
    assert "## This workspace" in readme and "PYTHONPATH=. python3 tools/sandbox.py" in readme


def module_exists(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_console_import_in_the_workspace_resolves_inside_it(ws):
    # Read, not run: supervisor.py and ray_wrapper.py are scripts that run beside other files.
    missing = []
    for source in sorted((ws / "console").rglob("*.py")):
        package = source.relative_to(ws).parent.parts
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - node.level + 1]
                if node.module:
                    targets = [".".join(base + tuple(node.module.split(".")))]
                else:  # from . import abi: each name is a sibling module
                    targets = [".".join(base + (alias.name,)) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = [node.module or ""]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            missing += [f"{source.relative_to(ws)}: {t}" for t in targets
                        if t.split(".")[0] == "console" and not module_exists(ws, t)]
    assert missing == []


def test_the_workspace_console_is_what_pythonpath_dot_finds(ws):
    code = WITHOUT_EDITABLE_FINDER + (
        "import json, console.timeline.tool, console.jobs.staging, console.profiling.funnel; "
        "print(json.dumps(sorted({m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'console'})))"
    )
    proc = run(ws, PY, "-c", code)
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)
    assert len(files) > 10 and all(Path(f).is_relative_to(ws / "console") for f in files), files


@pytest.mark.parametrize(
    ("script", "expect"),
    [
        ("tools/iteration_trace.py", "phase-start"),
        ("tools/sandbox.py", "--kind"),
        (f"{TIMELINE_SKILL}/scripts/timeline.py", "profile-iket"),
    ],
)
def test_tools_run_with_pythonpath_dot_and_no_install(ws, script, expect):
    # -S: no site-packages, so neither an installed episcope nor any third-party package.
    proc = run(ws, PY, "-S", script, "--help")
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout + proc.stderr


def test_a_sandbox_job_imports_the_timeline_adapter_and_runs_the_skill(ws):
    adapter = run(ws, PY, "-S", "tools/sandbox.py", "--kind", "dev", "--no-sync", "--", PY, "-c", ADAPTER_IMPORT)
    assert adapter.returncode == 0, adapter.stderr
    line = next(ln for ln in adapter.stdout.splitlines() if ln.startswith("ADAPTER="))
    console_file, writers, header_found, constants_ok = json.loads(line[len("ADAPTER="):])
    # The job's console is the staged copy of the workspace's, not the checkout's.
    assert console_file.endswith("console/__init__.py") and not Path(console_file).is_relative_to(REPO)
    assert not Path(console_file).is_relative_to(ws)
    assert (writers, header_found, constants_ok) == (8, True, True)
    skill = run(ws, PY, "-S", "tools/sandbox.py", "--kind", "dev", "--no-sync", "--",
                PY, f"{TIMELINE_SKILL}/scripts/timeline.py", "profile-iket", "--help")
    assert skill.returncode == 0, skill.stderr
    assert "--capture-dir" in skill.stdout


def test_a_job_cannot_change_the_workspace_skills(ws):
    before = tree_digest(ws / "skills")
    writer = (
        "import os, stat\n"
        "path = 'skills/gpu-kernel-episode-loop/SKILL.md'\n"
        "print('MODE=' + oct(stat.S_IMODE(os.stat(path).st_mode)))\n"
        "os.chmod(path, 0o644)\n"
        "open(path, 'w').write('rewritten by a job')\n"
        "open('skills/planted.md', 'w').write('planted')\n"
    )
    proc = run(ws, PY, "-S", "tools/sandbox.py", "--kind", "dev", "--sync", "skills",
               "--sync", "skills/gpu-kernel-episode-loop", "--", PY, "-c", writer)
    assert proc.returncode == 0, proc.stderr
    assert "MODE=0o444" in proc.stdout  # staged read-only
    assert tree_digest(ws / "skills") == before
    records, problems = list_job_records(ws)
    assert problems == ()
    (record,) = [r for r in records if r.sync == ("skills", "skills/gpu-kernel-episode-loop")]
    assert record.synced == ()
    assert {r["path"]: r["reason"] for r in record.refused} == {
        "skills": "read-only in a job", "skills/gpu-kernel-episode-loop": "read-only in a job"}
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True, check=True)
    assert status.stdout == ""
