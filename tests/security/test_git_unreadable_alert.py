"""A repository git is not let read (an include of a device, a FIFO config, a FIFO
``config.worktree``) is said where the operator and a script look: an alert with git's
one-line reason in the state (so ``status --json``'s ``alerts`` and the human ``status``),
a ``git`` line in the human status, and a worktree opened still shows its campaign, found
from the directory layout, never itself as a campaign."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.episode.workspace import resolve_workspace
from spine_helpers import git, make_campaign

REPO = Path(__file__).resolve().parents[2]


def episcope(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False)


def _include_device(campaign: Path, worktree: Path) -> str:
    with (campaign / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = /dev/zero\n")
    return "/dev/zero"


def _config_fifo(campaign: Path, worktree: Path) -> str:
    (campaign / ".git" / "config").unlink()
    os.mkfifo(campaign / ".git" / "config")
    return "FIFO"


def _worktree_config_fifo(campaign: Path, worktree: Path) -> str:
    git(campaign, "config", "extensions.worktreeConfig", "true")
    os.mkfifo(campaign / ".git" / "worktrees" / worktree.name / "config.worktree")
    return "config.worktree"


@pytest.mark.parametrize("damage", [_include_device, _config_fifo, _worktree_config_fifo],
                         ids=["include /dev/zero", "config FIFO", "config.worktree FIFO"])
def test_an_unsafe_repository_is_an_alert_and_keeps_its_layout(tmp_path, damage):
    campaign, worktree, _ = make_campaign(tmp_path)
    named = damage(campaign, worktree)

    # From the worktree, the campaign is still the campaign (found from the layout), never
    # the worktree itself; whichever git facts were read say why they are missing.
    assert (resolve_workspace(worktree).campaign_root, resolve_workspace(worktree).worktree) == (campaign, worktree)
    for opened, shown in ((campaign, None), (worktree, worktree)):
        assert resolve_workspace(opened).campaign_root == campaign

        status = episcope("status", "--json", str(opened))
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert doc["campaign"]["root"] == str(campaign), opened
        if shown is not None:
            assert doc["episode"]["worktree"] == str(shown)
        error = doc["git"]["error"]
        assert error and named in error and "\n" not in error
        alerts = [a for a in doc["alerts"] if a["code"] == "git_unreadable"]
        assert [a["message"] for a in alerts] == [f"git facts unreadable: {error}"]

        human = episcope("status", str(opened))
        assert human.returncode == 0, human.stderr
        assert f"git       unreadable: {error}" in human.stdout.splitlines()
        assert "ALERT     [warning] git_unreadable: git facts unreadable:" in human.stdout
        assert human.stdout.splitlines()[0] == f"campaign  {campaign.name}  ({campaign})"


def test_a_readable_repository_has_no_git_alert(tmp_path):
    campaign, worktree, _ = make_campaign(tmp_path)
    doc = json.loads(episcope("status", "--json", str(worktree)).stdout)
    assert doc["git"]["error"] is None
    assert not [a for a in doc["alerts"] if a["code"] == "git_unreadable"]
    assert "git       unreadable" not in episcope("status", str(worktree)).stdout
