"""``episcope init DIR --problem NAME``: make a ready episode workspace from a bundled problem.

The workspace is a git repository whose first commit holds the problem's contract and ground
truth, ``kernel.py`` (the problem's naive kernel), ``test_kernel.py`` (a shim over the
evaluator), ``profile_driver.py``, the tool kit under ``tools/`` and the skills under
``skills/``. Runtime evidence (live memory, plans, profiles, supervisor files) is listed in
``.git/info/exclude`` so it never lands in a commit.

The bundled problems, tools and skills are the package's kit (``console/kit``), so this verb
works from any directory, from a checkout or an installed wheel alike.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from console.kit import kit_path

HELP = "create an episode workspace (git repo) from a bundled problem"

# Paths the agent's runtime writes that must stay out of every commit (FORMATS §1).
EXCLUDES = (
    "memory/live.json",
    "plans/",
    "profiles/",
    ".atrex_long_horizon/",
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
        shutil.copytree(skills, target / "skills", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
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

