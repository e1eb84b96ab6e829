"""``episcope init DIR --problem NAME``: make a ready episode workspace from a bundled problem.

The workspace is a git repository whose first commit holds the problem's contract and ground
truth, ``kernel.py`` (the problem's naive kernel), ``test_kernel.py`` (a shim over the
evaluator), ``profile_driver.py``, the tool kit under ``tools/``, the skills under ``skills/``
and, under ``console/``, the part of episcope the tools and skills import, so that they run
with ``PYTHONPATH=.`` in the workspace (and in a job's staged copy of it) as in a checkout;
``README.md`` is the problem's, followed by how the workspace is laid out. Runtime evidence
(live memory, plans, profiles, supervisor files) is listed in ``.git/info/exclude`` so it
never lands in a commit.

The bundled problems, tools and skills are the package's kit (``console/kit``), so this verb
works from any directory, from a checkout or an installed wheel alike.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from console import __version__
from console.kit import kit_path

HELP = "create an episode workspace (git repo) from a bundled problem"

# Paths the agent's runtime writes that must stay out of every commit (FORMATS §1).
EXCLUDES = (
    "memory/live.json",
    "plans/",
    "profiles/",
    ".atrex_long_horizon/",
    "verification_artifacts/",  # live ABBA verifications (FORMATS §7), archived by the supervisor
    ".atrex_private_profile_case.json",
    "__pycache__/",
    "*.ncu-rep",
)

TEST_KERNEL_SHIM = '''"""Evaluator of this workspace: runs tools/evaluate.py on this directory (see --help)."""

import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.argv = [os.path.join(_HERE, "tools", "evaluate.py"), "--workspace", _HERE, *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
'''

_STARTING_KERNELS = ("kernel_naive.py", "kernel.py")

# The console package's directory, and the parts of it a workspace carries: the domain layers
# (they never import Textual, see pyproject.toml's import-linter contracts) and the top-level
# modules they use. The Textual console, the verbs and the kit stay out.
CONSOLE_DIR = Path(__file__).resolve().parent.parent
WORKSPACE_CONSOLE = ("__init__.py", "paths.py", "formats", "episode", "jobs", "timeline", "profiling", "stats", "gpu")

WORKSPACE_README = """
## This workspace

Made by `episcope init --problem {problem}` (episcope {version}).

| path | what it is |
|---|---|
| `kernel.py` | the kernel under work (starts as the problem's naive kernel) |
| `test_kernel.py` | the evaluator: `python3 test_kernel.py --help` |
| `profile_driver.py` | the profiling driver the sandbox's profile jobs run |
| `tools/` | the episode tool kit (`sandbox.py`, `evaluate.py`, `abba.py`, `iteration_trace.py`, `profile_nvidia.sh`) |
| `skills/` | the skills; a sandbox job sees them read-only and never syncs them back |
| `console/` | the part of episcope {version} the tools and skills import (formats, episode, jobs, timeline, profiling, stats, gpu); not the console itself |
| `memory/`, `plans/`, `profiles/`, `.atrex_long_horizon/` | the episode's runtime files, kept out of every commit |

Run the tools from this directory with `PYTHONPATH=.`, as from an episcope checkout:

```sh
PYTHONPATH=. python3 tools/iteration_trace.py phase-start profile
PYTHONPATH=. python3 tools/sandbox.py --kind run -- python3 test_kernel.py
PYTHONPATH=. python3 tools/sandbox.py --kind dev -- python3 skills/autonomous-gpu-kernel-timeline/scripts/timeline.py --help
```

`tools/iteration_trace.py` records only when `ATREX_TELEMETRY_TRACE` names the trace file
(`export ATREX_TELEMETRY_TRACE=$PWD/.atrex_long_horizon/telemetry.jsonl`); without it the
marker is checked, nothing is written, and one notice line goes to stderr.

`console/` is what `PYTHONPATH=.` finds, so the workspace needs no episcope install: the
GPU-side code (evaluator, profiling, timeline capture) wants only the standard library, numpy,
cupy and pynvml (`tools/abba.py` also runs `git`). A sandbox job stages `console/` with the
rest of the workspace, and finds it there on a Ray worker too. It is the episcope that made the
workspace: after upgrading episcope, make a new workspace rather than mixing the two.
"""


def add_arguments(parser) -> None:
    parser.add_argument("directory", nargs="?", help="workspace directory to create (must not exist or be empty)")
    parser.add_argument("--problem", help="bundled problem name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the bundled problems and exit")


def problems_dir() -> Path:
    from console.cli import CommandError

    path = kit_path("problems")
    if not path.is_dir():
        raise CommandError(f"bundled problems not found at {path} (a broken install: reinstall episcope-console)")
    return path


def list_problems() -> list[tuple[str, str]]:
    """(name, one-line description) of every bundled problem."""
    rows = []
    for entry in sorted(problems_dir().iterdir()):
        if not entry.is_dir() or not any((entry / k).is_file() for k in _STARTING_KERNELS):
            continue
        rows.append((entry.name, _describe(entry)))
    return rows


def _describe(problem: Path) -> str:
    readme = problem / "README.md"
    if readme.is_file():
        lines = [ln.strip() for ln in readme.read_text(encoding="utf-8").splitlines()]
        body = [ln for ln in lines if ln and not ln.startswith(("#", "|", "`"))]
        if body:
            return body[0]
    return ""


def _commit_all(target: Path, message: str) -> str:
    """git init, exclude the runtime paths, add everything and commit; returns the commit."""
    from console.cli import CommandError
    from console.episode.git_repo import new_repo, read_errors

    try:
        with new_repo(target) as repo:
            exclude = Path(repo.git_dir) / "info" / "exclude"
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a", encoding="utf-8") as fh:
                fh.write("\n# episode runtime files (episcope init)\n" + "\n".join(EXCLUDES) + "\n")
            repo.git.add("-A")
            reader = repo.config_reader()
            if not (reader.has_option("user", "email") and reader.get_value("user", "email")):
                # Respect the user's git identity; fall back to a neutral one so a bare machine works.
                repo.git.update_environment(GIT_AUTHOR_NAME="episcope", GIT_AUTHOR_EMAIL="episcope@localhost",
                                            GIT_COMMITTER_NAME="episcope", GIT_COMMITTER_EMAIL="episcope@localhost")
            repo.git.commit("-q", "-m", message)
            return repo.head.commit.hexsha
    except read_errors() as exc:
        raise CommandError(f"git failed: {' '.join(str(exc).split())[:300]}", 1) from None


_NO_CACHES = shutil.ignore_patterns("__pycache__", "*.pyc")


def _copy_console(target: Path) -> None:
    """The console package's parts the tools import, as ``target`` (``console/``)."""
    target.mkdir()
    for name in WORKSPACE_CONSOLE:
        part = CONSOLE_DIR / name
        if part.is_dir():
            shutil.copytree(part, target / name, ignore=_NO_CACHES)
        else:
            shutil.copy2(part, target / name)


def _write_readme(target: Path, source: Path, problem_name: str) -> None:
    """The problem's README, followed by the workspace's own section."""
    readme = source / "README.md"
    problem_text = readme.read_text(encoding="utf-8").rstrip("\n") + "\n" if readme.is_file() else f"# {problem_name}\n"
    section = WORKSPACE_README.format(problem=problem_name, version=__version__)
    (target / "README.md").write_text(problem_text + section, encoding="utf-8")


def create_workspace(target: Path, problem_name: str) -> Path:
    """Create the workspace; returns its path. Raises CommandError on any problem."""
    from console.cli import CommandError

    source = problems_dir() / problem_name
    if not problem_name or "/" in problem_name or not source.is_dir():
        known = ", ".join(name for name, _ in list_problems()) or "none"
        raise CommandError(f"unknown problem {problem_name!r} (bundled: {known})")
    starting = next((source / k for k in _STARTING_KERNELS if (source / k).is_file()), None)
    if starting is None:
        raise CommandError(f"problem {problem_name!r} has no kernel_naive.py or kernel.py")
    tools = kit_path("tools")
    required = [tools / "evaluate.py", tools / "profile_driver.py", tools / "problem_contract.py"]
    missing = [str(p) for p in required if not p.is_file()]
    if missing:
        raise CommandError(f"tool kit incomplete: missing {', '.join(missing)}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CommandError(f"{target} already exists and is not an empty directory")

    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        # Other kernel variants (the fast solution) stay out of the workspace.
        if entry.is_file() and not entry.name.startswith("kernel"):
            shutil.copy2(entry, target / entry.name)
    shutil.copy2(starting, target / "kernel.py")
    (target / "test_kernel.py").write_text(TEST_KERNEL_SHIM, encoding="utf-8")
    shutil.copy2(tools / "profile_driver.py", target / "profile_driver.py")
    (target / "tools").mkdir()
    for tool in sorted(tools.iterdir()):
        if tool.is_file() and tool.suffix in (".py", ".sh"):
            shutil.copy2(tool, target / "tools" / tool.name)
    skills = kit_path("skills")
    if skills.is_dir():
        shutil.copytree(skills, target / "skills", ignore=_NO_CACHES)
    _copy_console(target / "console")
    _write_readme(target, source, problem_name)
    (target / "memory").mkdir()

    _commit_all(target, f"Episode workspace for {problem_name}")
    return target


def run(args) -> int:
    from console.cli import CommandError

    if args.list:
        for name, description in list_problems():
            print(f"{name}\t{description}" if description else name)
        return 0
    if not args.directory or not args.problem:
        raise CommandError("usage: episcope init DIR --problem NAME (or episcope init --list)")
    from console.episode.git_repo import head_commit

    target = create_workspace(Path(args.directory).expanduser().absolute(), args.problem)
    head = head_commit(target)
    print(f"{target}\t{head}")
    return 0

