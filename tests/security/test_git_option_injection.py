"""A commit name from a workspace file never reaches a git command line as an option.

``journal.json``, ``active_episode.json`` and ``memory/v<N>.json`` name commits; an agent
wrote them. ``git diff --output=PATH`` writes a file, so a name like ``--output=PATH`` given
to git as it is would let a workspace (or an archive opened read-only) write anywhere the
operator can. GitPython resolves names without running git, and a ref may itself be called
``--output=...``: only the full object id that name resolves to may go to git.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.episode.git_facts import read_git_facts
from console.episode.kernel_diff import DiffSide, kernel_diff
from spine_helpers import git


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "ws"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "kernel.py").write_text("x = 1\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base")
    base = git(work, "rev-parse", "HEAD")
    (work / "kernel.py").write_text("x = 2\n")
    git(work, "commit", "-q", "-am", "candidate")
    return work, base


def _hostile_names(work: Path, base: str, target: Path) -> list[str]:
    """A name git reads as an option: as a bare string, and as a ref that really resolves
    (a ref file may be called anything, nested paths included)."""
    as_ref = f"--output={target.name}.ref"
    ref_file = work / ".git" / "refs" / "heads" / as_ref
    ref_file.write_text(base + "\n")
    return [f"--output={target}", as_ref]


def test_the_diff_screen_never_passes_a_name_to_git_as_an_option(repo, tmp_path):
    work, base = repo
    target = tmp_path / "written-by-git"
    for name in _hostile_names(work, base, target):
        result = kernel_diff(str(work), DiffSide("v0", name), DiffSide("working tree", None), {})
        result_other_way = kernel_diff(str(work), DiffSide("HEAD", git(work, "rev-parse", "HEAD")),
                                       DiffSide("v1", name), {})
        for diff in (result, result_other_way):
            assert diff.error is None or "not in this repository" in diff.error
    assert not target.exists()
    assert not list(work.glob("written-by-git*")) and not list(Path.cwd().glob("written-by-git*"))


def test_a_ref_named_like_an_option_still_diffs_the_commit_it_names(repo, tmp_path):
    work, base = repo
    as_ref = _hostile_names(work, base, tmp_path / "written-by-git")[1]
    diff = kernel_diff(str(work), DiffSide("v0", as_ref), DiffSide("HEAD", git(work, "rev-parse", "HEAD")), {})
    assert diff.error is None
    assert "-x = 1" in diff.text and "+x = 2" in diff.text
    assert not list(work.glob("written-by-git*"))


def test_the_candidate_scope_check_never_passes_the_base_to_git_as_an_option(repo, tmp_path):
    work, base = repo
    target = tmp_path / "written-by-git"
    head = git(work, "rev-parse", "HEAD")
    for name in _hostile_names(work, base, target):
        facts = read_git_facts(work, base_commit=name, candidate_commit=head)
        assert facts.error is None
    assert not target.exists() and not list(work.glob("written-by-git*"))
    # the ref that resolves is compared as the commit it names
    assert facts.candidate_changes == ("kernel.py",)
