"""The built wheel works on its own: a regular (non-editable) install in a fresh virtual
environment, with the dependencies pyproject.toml declares and nothing else, runs `episcope
init`, `episcope status` and every keyboard action from the kit the wheel carries, never from
this checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# Run inside the installed environment: for every keyboard action, the command line the
# console would start, each kit file it names, and the sandbox's dry run of it.
ACTIONS_PROBE = r"""
import json, subprocess, sys
from pathlib import Path
import console
from console.actions import ACTIONS, JobLauncher

workspace = sys.argv[1]
launcher = JobLauncher(workspace, extra_flags=("--dry-run",))
report = {"console": console.__file__, "actions": {}}
for action in ACTIONS:
    argv = launcher.argv_for(action.name, episode=1, kernel="row_softmax_naive",
                             incumbent="a" * 40, candidate="b" * 40, stamp="20260101T000000Z")
    kit_files = [a for a in argv[1:] if a.endswith((".py", ".sh")) and Path(a).is_absolute()]
    dry = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, timeout=60)
    report["actions"][action.name] = {"kit_files": kit_files, "exists": [Path(a).is_file() for a in kit_files],
                                      "returncode": dry.returncode, "request": dry.stdout, "stderr": dry.stderr[-3000:]}
print(json.dumps(report))
"""

# One real job through the installed sandbox: launched as the console launches it, it must
# leave a job record that `episcope jobs` reads.
LAUNCH_PROBE = r"""
import sys
from console.actions import JobLauncher

job = JobLauncher(sys.argv[1]).launch("correctness_run")
sys.exit(0 if job.process.wait(120) is not None else 1)
"""


# Run inside the installed environment: every runtime dependency the wheel declares (its
# Requires-Dist without an extra), each module it provides imported, and where it came from.
DEPENDENCIES_PROBE = r"""
import importlib, json, re
from importlib.metadata import packages_distributions, requires

def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()

declared = {key(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requires("episcope-console") if "extra ==" not in r}
provided = {}
for module, dists in packages_distributions().items():
    for dist in dists:
        if module.isidentifier() and not module.startswith("_"):
            provided.setdefault(key(dist), []).append(module)
print(json.dumps({dist: {m: importlib.import_module(m).__file__ for m in provided.get(dist, [])} for dist in declared}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv holding the built wheel and its dependencies and nothing of this
    environment (no PYTHONPATH, no checkout or other site-packages on sys.path).

    pip fills a wheelhouse with the wheel's dependencies from the package index, as .ci/run's
    own install does; the install then reads that wheelhouse alone (``--no-index``), so what
    the wheel gets is exactly what its metadata asks for."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    build = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO)],
                           cwd=root, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    wheelhouse = root / "wheelhouse"
    fill = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheelhouse), str(wheel)],
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert fill.returncode == 0, fill.stderr[-3000:]
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                              "--find-links", str(wheelhouse), str(wheel)],
                             cwd=root, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return {"root": root, "wheel": wheel, "build_log": build.stdout + build.stderr, "venv": venv, "python": python,
            "purelib": Path(purelib), "env": env}


def run_in(installed, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a command of the installed environment from a directory outside the checkout."""
    return subprocess.run(list(argv), cwd=installed["root"], env=installed["env"], capture_output=True, text=True,
                          timeout=timeout)


def tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", *paths], capture_output=True, check=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def test_the_wheel_holds_every_module_and_the_whole_kit(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    modules = [name for name in tracked("console", "widgets") if name.endswith(".py") and "/kit/" not in name]
    assert modules and [m for m in modules if m not in names] == []
    kit = {"tools/": "console/kit/tools/", "skills/": "console/kit/skills/",
           "examples/problems/": "console/kit/problems/"}
    for source, packaged in kit.items():
        files = tracked(source)
        assert files, source
        assert [f for f in files if packaged + f.removeprefix(source) not in names] == []
    assert not any(name.endswith(".pyc") or name.startswith(("tools/", "skills/", "tests/")) for name in names)
    metadata = zipfile.ZipFile(installed["wheel"]).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Name: episcope-console" in metadata.splitlines()
    version = next(line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Version: "))
    shown = run_in(installed, str(installed["venv"] / "bin" / "episcope"), "--version")
    assert shown.returncode == 0 and shown.stdout.split() == ["episcope", version]
    entry_points = zipfile.ZipFile(installed["wheel"]).read(
        next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "episcope = console.cli:main" in entry_points


def test_the_build_declares_the_kit_as_package_data(installed):
    """setuptools takes the kit's directories for packages missing from `packages` (and says
    it may stop shipping them) unless they are declared as data only."""
    assert "Package would be ignored" not in installed["build_log"]
    assert "is absent from the `packages` configuration" not in installed["build_log"]


def test_the_declared_dependencies_install_whole_and_import(installed):
    checked = run_in(installed, sys.executable, "-m", "pip", "--python", str(installed["python"]), "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    probe = run_in(installed, str(installed["python"]), "-c", DEPENDENCIES_PROBE)
    assert probe.returncode == 0, probe.stderr[-3000:]
    imported = json.loads(probe.stdout)
    assert {"textual", "gitpython", "msgspec", "orjson", "platformdirs", "numpy"} <= set(imported)
    for dist, modules in imported.items():
        assert modules, dist  # installed, and provides something to import
        assert all(Path(f).is_relative_to(installed["purelib"]) for f in modules.values()), (dist, modules)
    paths = run_in(installed, str(installed["python"]), "-c", "import json, sys; print(json.dumps(sys.path))")
    assert [p for p in json.loads(paths.stdout) if "site-packages" in p] == [str(installed["purelib"])]


def test_init_and_status_run_from_the_installed_wheel(installed):
    episcope = str(installed["venv"] / "bin" / "episcope")
    listed = run_in(installed, episcope, "init", "--list")
    assert listed.returncode == 0, listed.stderr
    assert "row_softmax" in [line.split("\t")[0] for line in listed.stdout.splitlines()]

    workspace = installed["root"] / "ws"
    created = run_in(installed, episcope, "init", str(workspace), "--problem", "row_softmax")
    assert created.returncode == 0, created.stderr
    for rel in ("kernel.py", "test_kernel.py", "profile_driver.py", "tools/sandbox.py", "tools/evaluate.py",
                "tools/problem_contract.py", "tools/profile_nvidia.sh", "tools/abba.py",
                "skills/gpu-kernel-episode-loop/SKILL.md",
                "skills/autonomous-gpu-kernel-timeline/scripts/timeline.py"):
        assert (workspace / rel).is_file(), rel

    status = run_in(installed, episcope, "status", str(workspace), "--json")
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["schema_version"].startswith("episcope-status/") and "episode" in document


def test_every_keyboard_action_runs_the_installed_kit(installed):
    workspace = installed["root"] / "actions-ws"
    created = run_in(installed, str(installed["venv"] / "bin" / "episcope"), "init", str(workspace),
                     "--problem", "row_softmax")
    assert created.returncode == 0, created.stderr
    probe = run_in(installed, str(installed["python"]), "-c", ACTIONS_PROBE, str(workspace), timeout=600)
    assert probe.returncode == 0, probe.stderr[-3000:]
    report = json.loads(probe.stdout)
    package = installed["purelib"] / "console"
    assert Path(report["console"]).parent == package  # not the checkout
    assert set(report["actions"]) >= {"profile_survey", "profile_sol", "profile_deep", "profile_source",
                                      "correctness_run", "benchmark_run", "timeline_measure", "abba_compare"}
    for name, action in report["actions"].items():
        assert action["kit_files"], name  # the sandbox at least
        assert all(action["exists"]), (name, action["kit_files"])
        assert all(Path(f).is_relative_to(package / "kit") for f in action["kit_files"]), (name, action["kit_files"])
        assert action["returncode"] == 0, (name, action["stderr"])
        assert json.loads(action["request"])["argv"], name

    launched = run_in(installed, str(installed["python"]), "-c", LAUNCH_PROBE, str(workspace), timeout=300)
    assert launched.returncode == 0, launched.stderr[-3000:]
    jobs = run_in(installed, str(installed["venv"] / "bin" / "episcope"), "jobs", str(workspace), "--json")
    assert jobs.returncode in (0, 1), jobs.stderr
    records = json.loads(jobs.stdout)
    records = records if isinstance(records, list) else records["jobs"]
    assert len(records) == 1 and records[0]["argv"][:2] == ["python", "test_kernel.py"]
