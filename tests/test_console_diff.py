"""What did the agent change? The kernel.py diff screen on the bundled example and on an
``episcope init`` workspace with a real commit, and the domain function under it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rich.syntax import Syntax
from textual.widgets import Select, Static

from console.app import EpiscopeApp
from console.commands.init import create_workspace
from console.episode.kernel_diff import DiffSide, default_pair, diff_sides, evaluated_latencies, kernel_diff
from console.episode.session import Session
from console.episode.workspace import resolve_workspace
from console.screens.diff import DiffScreen
from spine_helpers import git

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"
SIZE = (120, 36)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return resolve_workspace(ARCHIVE)


@pytest.fixture
def init_workspace(tmp_path):
    """An init workspace whose HEAD changes kernel.py: one commit past the first."""
    workspace = create_workspace(tmp_path / "ws", "row_softmax")
    kernel = workspace / "kernel.py"
    kernel.write_text(kernel.read_text().replace("three passes", "two passes") + "\n# fused max and sum\n")
    git(workspace, "commit", "-qam", "fuse the max and sum passes")
    return workspace


async def wait_for_diff(pilot, screen: DiffScreen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while (screen.diff is None or (screen.diff.old, screen.diff.new) != (screen.old, screen.new)) \
            and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert screen.diff is not None


def plain(widget: Static) -> str:
    return "\n".join(strip.text for strip in widget.render_lines(widget.size.region))


def test_bundled_example_sides_and_latency_change(bundled):
    state = Session(ARCHIVE).scan()
    sides = diff_sides(state)
    # v0 and v1 name their commits; the base commit (v1 promoted: memory only changed) is the
    # incumbent; HEAD is the rejected trial, which made no version
    assert [side.label for side in sides] == [
        "v0", f"incumbent {state.git.base_commit[:8]}", "v1", f"HEAD {state.git.head[:8]}", "working tree"]
    old, new = default_pair(state, sides)
    assert old.commit == state.git.base_commit and new.label == "working tree"
    diff = kernel_diff(state.git.worktree, old, new, evaluated_latencies(state), sides)
    assert diff.error is None and diff.text.startswith("diff --git a/kernel.py b/kernel.py")
    # the base commit holds v1's kernel.py, so it takes v1's figure; the working tree its evaluation
    assert diff.old_latency_us == pytest.approx(17.617) and diff.new_latency_us == pytest.approx(27.111)
    assert diff.change_pct == pytest.approx((27.111 / 17.617 - 1) * 100)
    same = kernel_diff(state.git.worktree, sides[3], sides[4], {}, sides)  # HEAD, unchanged on disk
    assert same.text == "" and same.error is None


def test_a_working_tree_edit_diffs_both_ways(init_workspace):
    kernel = init_workspace / "kernel.py"
    kernel.write_text(kernel.read_text() + "# not committed yet\x1b]0;title\x07\n")
    state = Session(init_workspace).scan()
    sides = diff_sides(state)
    head, tree = sides[-2], sides[-1]
    forward = kernel_diff(str(init_workspace), head, tree, {})
    backward = kernel_diff(str(init_workspace), tree, head, {})
    assert "+# not committed yet" in forward.text and "-# not committed yet" in backward.text
    assert "\x1b" not in forward.text and "\x07" not in forward.text and "␛]0;title␇" in forward.text


async def test_diff_screen_on_the_bundled_example_and_its_versions(bundled):
    session = Session(ARCHIVE, workspace=bundled)
    app = EpiscopeApp(session=session, readonly=True, readonly_reason="archive: read-only", sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 15
        while (not app.scanned or app.episode_state.git is None) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        assert app.check_action("diff", ()) is True  # reading only: allowed in a read-only archive
        await pilot.press("D")
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        await wait_for_diff(pilot, screen)
        summary = plain(screen.query_one("#diff-summary", Static))
        assert "incumbent" in summary and "working tree" in summary and "17.617 → 27.111 (+53.89%)" in summary
        body = screen.query_one("#diff-body", Static)
        assert isinstance(body.content, Syntax) and body.content.lexer.name.lower() == "diff"
        assert "+++ b/kernel.py" in plain(body)
        # any two versions: v0 against v1
        screen.query_one("#diff-old", Select).value = 0
        screen.query_one("#diff-new", Select).value = 2
        await pilot.pause(0.1)
        await wait_for_diff(pilot, screen)
        assert (screen.diff.old.label, screen.diff.new.label) == ("v0", "v1")
        assert "v0 → v1" in plain(screen.query_one("#diff-summary", Static)) and "(-97.34%)" in screen.diff.summary
        await pilot.press("escape")
        assert not isinstance(app.screen, DiffScreen)
        # from the versions pane: the selected version against the incumbent
        await pilot.press("6", "down")
        await pilot.pause(0.1)
        await pilot.press("D")
        screen = app.screen
        assert isinstance(screen, DiffScreen) and screen.new.label == "v1" and screen.old.label.startswith("incumbent")
        await wait_for_diff(pilot, screen)
        # v1 is the incumbent: the same kernel.py, the same figure
        assert "17.617 → 17.617 (+0.00%)" in screen.diff.summary and screen.diff.text == ""


async def test_diff_screen_on_an_init_workspace_with_a_commit(init_workspace):
    first = git(init_workspace, "rev-list", "--max-parents=0", "HEAD").strip()
    app = EpiscopeApp(session=Session(init_workspace), sample_gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 15
        while (not app.scanned or app.episode_state.git is None) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        assert "What changed: kernel.py diff" in [title for title, _, _ in app.palette_commands()]
        await pilot.press("D")
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        await wait_for_diff(pilot, screen)
        # no memory version yet: the incumbent is the workspace's first commit
        assert screen.old == DiffSide(f"incumbent {first[:8]}", first) and screen.new.label == "working tree"
        text = plain(screen.query_one("#diff-body", Static))
        assert "-Row softmax, the starting point: one thread per row, three passes" in text.replace('"""', "")
        assert "+# fused max and sum" in text
        assert "latency µs N/A → N/A" in screen.diff.summary  # nothing evaluated: unknown, never 0


@pytest.fixture
def foreign_versions(tmp_path, monkeypatch):
    """An init workspace holding the bundled example's v0 and v1, whose commits are in the
    example's repository, not in this one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archived = resolve_workspace(ARCHIVE).campaign_root / "memory"
    workspace = create_workspace(tmp_path / "ws", "row_softmax")
    for name in ("v0.json", "v1.json"):
        (workspace / "memory" / name).write_bytes((archived / name).read_bytes())
    return workspace


def test_a_version_whose_commit_is_elsewhere_says_so_and_keeps_its_latency(foreign_versions):
    state = Session(foreign_versions).scan()
    sides = diff_sides(state)
    v0, v1 = sides[1], sides[2]
    assert (v0.label, v1.label) == ("v0", "v1")
    diff = kernel_diff(str(foreign_versions), v0, v1, evaluated_latencies(state), sides)
    assert diff.error == (f"v0's commit {v0.commit[:8]} is not in this repository; "
                          f"v1's commit {v1.commit[:8]} is not in this repository")
    assert diff.text == ""
    # the versions' own figures, as the versions pane shows them
    assert (diff.old_latency_us, diff.new_latency_us) == (pytest.approx(662.339), pytest.approx(17.617))
    assert diff.change_pct == pytest.approx((17.617 / 662.339 - 1) * 100)
    # one side here: only the other one is named
    working = kernel_diff(str(foreign_versions), v1, sides[-1], {}, sides)
    assert working.error == f"v1's commit {v1.commit[:8]} is not in this repository"
    assert working.old_latency_us == pytest.approx(17.617) and working.new_latency_us is None


async def test_diff_screen_on_a_missing_commit_is_one_line_and_answers_only_its_keys(foreign_versions):
    app = EpiscopeApp(session=Session(foreign_versions), sample_gpu=False)
    async with app.run_test(size=(80, 24)) as pilot:
        deadline = time.monotonic() + 15
        while (not app.scanned or app.episode_state.git is None) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        await pilot.press("6", "down", "D")
        screen = app.screen
        # v1 against the incumbent, v0 (no episode base: the incumbent memory version)
        assert isinstance(screen, DiffScreen) and (screen.old.label, screen.new.label) == ("v0", "v1")
        await wait_for_diff(pilot, screen)
        assert "v0 → v1   latency µs 662.339 → 17.617 (-97.34%)" in plain(screen.query_one("#diff-summary", Static))
        body = plain(screen.query_one("#diff-body", Static)).strip()
        assert body == (f"no diff: v0's commit {screen.old.commit[:8]} is not in this repository; "
                        f"v1's commit {screen.new.commit[:8]} is not in this repository")
        # no panes here: 1-8 are neither offered in help nor answered; q and esc go back
        await pilot.press("question_mark")
        rows = app.screen.rows
        assert not any("move to that pane" in row.text for row in rows)
        assert any(row.keys == ["esc", "q"] and row.text == "back to the dashboard" for row in rows)
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("1")
        await pilot.pause(0.1)
        assert app.screen is screen
        await pilot.press("q")
        assert not isinstance(app.screen, DiffScreen) and app.is_running


async def test_d_on_a_version_without_its_own_commit_diffs_its_candidate_or_says_why(tmp_path, monkeypatch):
    """AKA writes a rejected version (v2 here) with ``git_commit_hash`` null and its episode's
    candidate commit beside it: ``D`` diffs that commit. v0 names neither: ``D`` says so, and
    never shows the working tree in its place."""
    from textual.widgets import DataTable

    from widgets.versions import VersionsPane

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    session = Session(Path(__file__).parent / "fixtures" / "aka" / "campaign_idle.tar.gz")
    app = EpiscopeApp(session=session, readonly=True, readonly_reason="archive: read-only", sample_gpu=False)
    notes: list[str] = []
    notify = app.notify
    app.notify = lambda message, *args, **kwargs: (notes.append(str(message)), notify(message, *args, **kwargs))
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 15
        while (not app.scanned or app.episode_state.git is None) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        versions = {v.version: v for v in app.episode_state.versions}
        candidate = versions[2].long_horizon.candidate_commit
        assert versions[2].git_commit_hash is None and candidate is not None

        async def select(number: int) -> None:
            await pilot.press("6")
            await pilot.pause(0.1)
            table = app.query_one(VersionsPane).query_one(DataTable)
            table.move_cursor(row=table.get_row_index(f"v{number}:{versions[number].timestamp}"))
            await pilot.pause(0.1)
            assert app.query_one(VersionsPane).selected_version() == versions[number]

        await select(2)
        await pilot.press("D")
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert (screen.new.label, screen.new.commit) == (f"v2 candidate {candidate[:8]}", candidate)
        await wait_for_diff(pilot, screen)
        assert screen.diff.summary.startswith(f"incumbent {screen.old.commit[:8]} → v2 candidate {candidate[:8]}")
        assert screen.diff.error is None and "+++ b/kernel.py" in screen.diff.text  # the candidate is in the copy
        await pilot.press("escape")
        await pilot.pause(0.1)
        await select(0)
        await pilot.press("D")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, DiffScreen)
        assert notes[-1] == ("diff: not now (v0 names no commit: git_commit_hash and "
                             "long_horizon.candidate_commit are null)")
