"""Box titles are text: a job id, kernel name or filter the operator typed is never markup.

Textual reads a ``str`` border title as markup: a job directory named
``[@click=app.quit]CLICK`` made a clickable action of its detail title, and ``k[/nope]`` (a
kernel name) or a filter ``[/x]`` crashed the console with a MarkupError.
"""

from __future__ import annotations

import pytest
from textual.app import App
from textual.containers import Vertical

from console.screens.detail import DetailScreen

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
