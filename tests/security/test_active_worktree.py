"""A live campaign's ``active_episode.json`` leads episcope only into the campaign's own
worktrees.

The file is written in the workspace, so its ``worktree`` may name any directory: ``/``
(whose every file episcope would walk), another repository, a link planted among the
worktrees. Each case runs the real ``episcope status --json`` on a real campaign with a
real git worktree: the directory named is ignored, the reason is listed in ``unreadable``
under ``active_episode.json``, and the campaign's newest worktree is shown as between
episodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spine_helpers import git, make_campaign

ROOT = Path(__file__).resolve().parents[2]


def status(target: Path, tmp_path: Path) -> tuple[dict, float]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "console.cli", "status", str(target), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), time.monotonic() - started


def name_worktree(campaign: Path, worktree: str) -> Path:
    active = campaign / ".atrex_long_horizon" / "active_episode.json"
    doc = json.loads(active.read_text())
    active.write_text(json.dumps({**doc, "worktree": worktree}))
    return active


@pytest.fixture()
def campaign(tmp_path) -> tuple[Path, Path]:
    campaign, worktree, _ = make_campaign(tmp_path / "ws")
    return campaign, worktree


def assert_ignored(doc: dict, active: Path, named: str, shown: Path) -> None:
    assert [u for u in doc["unreadable"] if u["path"] == str(active)] == [{
        "path": str(active), "offset": None,
        "error": f"worktree {named} is not one of this campaign's worktrees "
                 f"(under .atrex_long_horizon_worktrees/demo/): ignored"}]
    assert doc["git"]["worktree"] == str(shown)
    assert doc["git"]["head"] == git(shown, "rev-parse", "HEAD")


def test_the_root_directory_is_not_walked(campaign, tmp_path):
    root, worktree = campaign
    active = name_worktree(root, "/")
    doc, took = status(root, tmp_path)
    assert took < 10  # walking / took 14 s, and listed files from all over the host
    assert_ignored(doc, active, "/", worktree)
    assert all(u["path"].startswith(str(tmp_path)) for u in doc["unreadable"])
    assert doc["timeline"] == []


def test_another_repository_is_not_read(campaign, tmp_path):
    root, worktree = campaign
    other, _, _ = make_campaign(tmp_path / "elsewhere", "other")
    git(other, "commit", "-q", "--allow-empty", "-m", "other history")
    active = name_worktree(root, str(other))
    doc, _ = status(root, tmp_path)
    assert_ignored(doc, active, str(other), worktree)
    assert doc["git"]["head"] != git(other, "rev-parse", "HEAD")


def test_a_link_among_the_worktrees_is_not_a_worktree(campaign, tmp_path):
    """A link planted where worktrees live would otherwise be both accepted and, sorting
    last, the newest worktree."""
    root, worktree = campaign
    other, _, _ = make_campaign(tmp_path / "elsewhere", "other")
    link = worktree.parent / "e0009-ffffffff"
    link.symlink_to(other)
    active = name_worktree(root, str(link))
    doc, _ = status(root, tmp_path)
    assert_ignored(doc, active, str(link), worktree)


def test_the_campaigns_own_worktree_and_the_campaign_itself_are_taken(campaign, tmp_path):
    root, worktree = campaign
    for named, shown in ((worktree, worktree), (root, root)):
        active = name_worktree(root, str(named))
        doc, _ = status(root, tmp_path)
        assert doc["git"]["worktree"] == str(shown)
        assert [u for u in doc["unreadable"] if u["path"] == str(active)] == []
