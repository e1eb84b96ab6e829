"""Box titles are text: a job id, kernel name or filter the operator typed is never markup.

Textual reads a ``str`` border title as markup: a job directory named
``[@click=app.quit]CLICK`` made a clickable action of its detail title, and ``k[/nope]`` (a
kernel name) or a filter ``[/x]`` crashed the console with a MarkupError. The command palette
reads its entries as markup too, and Textual's own ``escape`` leaves ``[ @click=…]``, ``[B]`` and
``[$x]`` to its parser: a receipt directory so named hid text and quit the console when clicked.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.app import App
from textual.containers import Vertical
from textual.content import Content

from console.app import EpiscopeApp, EpiscopeCommands, markup_text
from console.episode.session import Session
from console.screens.detail import DetailScreen
from console_fixture import build_episode, write_receipt

pytestmark = pytest.mark.anyio

HOSTILE = ["job [@click=app.quit]CLICK", "kernel k[/nope]", "[ @click=app.quit]Q[B]x[$y]", "[/]"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.parametrize("title", HOSTILE)
async def test_the_detail_view_title_is_the_text_as_written(title):
    app = App()
    async with app.run_test() as pilot:
        await app.push_screen(DetailScreen(title, "body"))
        await pilot.pause()
        box = app.screen.query_one(Vertical)
        assert box._border_title is not None and box._border_title.plain == title
        assert not box._border_title.spans  # no style, no @click: nothing parsed


@given(st.text(alphabet="[]\\/@$ab =.()'", max_size=40))
@settings(max_examples=500, deadline=None)
def test_palette_markup_reads_back_as_the_text_itself(text):
    content = Content.from_markup(markup_text(text))
    assert content.plain == text and not content.spans


async def test_a_hostile_receipt_directory_is_text_in_the_palette(tmp_path):
    campaign, worktree = build_episode(tmp_path)
    hostile = "t[ @click=app.quit]Q[B]hidden"
    write_receipt(worktree / "profiles" / hostile)
    app = EpiscopeApp(state=Session(campaign).scan(), sample_gpu=False)
    async with app.run_test(size=(150, 46)) as pilot:
        await pilot.pause()
        provider = EpiscopeCommands(app.screen)
        hits = [hit async for hit in provider.search("Open timeline")]
        shown = [hit for hit in hits if hostile in hit.text]
        assert shown, [hit.text for hit in hits]
        for hit in shown:
            assert hostile in hit.match_display.plain
            assert not any("@click" in str(span.style) for span in hit.match_display.spans)
            assert hostile in Content.from_markup(hit.help).plain


async def test_a_filter_typed_as_markup_is_the_pane_title_as_typed(tmp_path):
    campaign, _ = build_episode(tmp_path)
    app = EpiscopeApp(state=Session(campaign).scan(), sample_gpu=False)
    async with app.run_test(size=(150, 46)) as pilot:
        await pilot.press("4", "slash")
        await pilot.press(*"[/x]")
        await pilot.press("enter")
        await pilot.pause()
        pane = app.query_one("#jobs")
        assert pane._border_title is not None and pane._border_title.plain.endswith("/[/x]")
        assert app.is_running
