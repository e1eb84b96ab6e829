"""The base of every dashboard pane: a titled box that shows an ``EpisodeState``.

A pane remembers the last state it drew and its table filter, so the app can hand it a new
state (or a new filter) and the pane redraws only what changed.

A pane with nothing to show folds: it draws one dim line saying what it waits for (or
"scanning…" before the first scan lands) and takes the narrow width of an empty pane; a
row whose panes are all folded (``PaneRow``) takes three lines, leaving the height to the
rows with data. Folding sets inline styles (display, width, height) rather than a class: a
class change re-applies the stylesheet to every widget in the pane, which cost more than
the rest of the first paint together; an inline style only re-lays out.

A pane's body (the tables and text that show its data, ``compose_body``) is mounted the
first time the pane has something to show. The first frame, drawn while the workspace is
still being scanned, is then the panes' titles and notes only, and a pane that stays empty
(no GPU, every record readable) never builds, styles or lays out its table at all.

Enter opens the full text of the selected row, or of the pane, in a detail view: tables and
the dashboard cut long text to fit, and this is where it can be read whole.

The pane that holds the focus gets an accent border. That is an inline style set when a
descendant gains or loses focus, not a ``:focus-within`` rule: Textual answers such a rule
by re-applying the whole stylesheet to every widget inside both panes on each focus
change, which was the larger part of what a Tab or number key cost.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import DataTable, Static

from console.episode.state import EpisodeState

SCANNING = "scanning…"


FOLDED_WIDTH = "1fr"  # an empty pane's share of its row (app.tcss gives panes with data more)
FOLDED_ROW_HEIGHT = 3  # border, the notes line, border


DETAIL_TOOLTIP = "the full text of the selected row or pane, uncut"


class PaneTable(DataTable):
    """A pane's table. Enter opens the pane's detail view from the table itself, in turn with
    the keys typed before it: a binding of the pane, run as the key arrives, would open the
    row the cursor was on before a move still queued for the table. A click on a row only
    selects it (the table's own Enter, which this replaces, would also run on a click)."""

    BINDINGS = [
        Binding("enter", "pane_detail", "detail", show=False, tooltip=DETAIL_TOOLTIP, id="pane.detail"),
    ]

    def action_pane_detail(self) -> None:
        pane = next((node for node in self.ancestors if isinstance(node, Pane)), None)
        if pane is not None:
            pane.action_detail()


class PaneRow(Horizontal):
    """A row of panes. It folds to one line of notes when every pane in it is empty; a row
    of fixed height (the bottom one: the screen sets ``open_height``) shrinks further, to
    what its panes with data show, so empty lines in it never take height from the tables
    above."""

    folded = False
    open_height: int | None = None  # the row's most height while it has data (None: the stylesheet's, unfitted)
    _height: int | None = None  # the inline height set last (None: the stylesheet's)

    def fold(self) -> None:
        """Fit the row to its panes (after they drew a new state, or one became empty)."""
        panes = [child for child in self.children if isinstance(child, Pane)]
        with_data = [pane for pane in panes if not pane.empty]
        self.folded = bool(panes) and not with_data
        if self.folded:
            height: int | None = FOLDED_ROW_HEIGHT
        elif self.open_height is None:
            height = None
        else:
            wanted = [pane.wanted_height() for pane in with_data]
            known = [h for h in wanted if h is not None]
            height = min(self.open_height, max(known)) if len(known) == len(wanted) else self.open_height
        if height != self._height:
            self._height = height
            self.styles.height = height

    def set_open_height(self, height: int | None) -> None:
        """The most height while the row has data (the screen sets it by terminal size)."""
        self.open_height = height
        self.fold()


class Pane(Vertical):
    DEFAULT_CSS = """
    Pane {
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        height: 1fr;
    }
    Pane > .pane-note { display: none; height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    BINDINGS = [
        # For a pane with the focus itself, or on a widget of it other than its table (the
        # table has its own: PaneTable). Not in the key bar, which would then change with
        # focus; help and the palette list it.
        Binding("enter", "detail", "detail", show=False, tooltip=DETAIL_TOOLTIP, id="pane.detail"),
    ]

    title = "pane"

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.number = number
        self.state: EpisodeState | None = None
        self.now: float | None = None
        self.filter_text = ""
        self.empty = False
        self._note = Static(classes="pane-note")
        self._note_text: str | None = None
        self._highlighted = False
        self._held = False  # an empty pane given the focus by its number key (hold_focus)
        self.has_body = False  # compose_body's widgets are mounted (the pane had data once)
        self.short = False  # the terminal is short (DashboardScreen): the body gives up height

    def compose(self) -> ComposeResult:
        yield self._note

    def compose_body(self) -> ComposeResult:
        """The widgets that show the pane's data (class ``pane-body``), mounted the first
        time the pane has something to show."""
        return iter(())

    def on_mount(self) -> None:
        self._set_title()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._highlight(True)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._highlight(False)

    def on_focus(self, event: events.Focus) -> None:
        self._highlight(True)

    def on_blur(self, event: events.Blur) -> None:
        self._held = False
        self._highlight(False)

    def allow_focus(self) -> bool:
        return self.can_focus or self._held

    def _highlight(self, on: bool) -> None:
        if on == self._highlighted:
            return
        self._highlighted = on
        if on:
            accent = Color.parse(self.app.theme_variables["accent"])
            self.styles.border = ("round", accent)
            self.styles.auto_border_title_color = False  # the stylesheet's muted title color is "auto"
            self.styles.border_title_color = accent
        else:  # back to the stylesheet's border and title color
            self.styles.border = None
            self.styles.inline.clear_rule("auto_border_title_color")
            self.styles.border_title_color = None

    def _set_title(self) -> None:
        prefix = f"{self.number} " if self.number is not None else ""
        suffix = f"  /{self.filter_text}" if self.filter_text else ""
        # Content, not a str (read as markup): the filter is what the operator typed
        self.border_title = Content(f"{prefix}{self.title}{suffix}")

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        """Draw ``state`` as of ``now`` (unix seconds, the app's clock); subclasses redraw
        only the parts whose inputs changed, and fold the pane when it has nothing."""
        self.state = state
        self.now = now
        note = SCANNING if state.scanning else self.empty_note(state)
        self._fold(note)

    def tick(self, now: float | None) -> None:
        """The clock moved without a new state (panes that show running times redraw them)."""
        self.now = now

    def empty_note(self, state: EpisodeState) -> str | None:
        """What the pane waits for when ``state`` gives it nothing to show, else None."""
        return None

    def _fold(self, note: str | None) -> None:
        empty = note is not None
        if empty and note != self._note_text:
            self._note_text = note
            self._note.update(Text(note))
        if not empty and not self.has_body and self.is_attached:
            self.has_body = True
            self.mount_all(self.compose_body())  # in the DOM at once: the caller draws into it next
            self.fit_short(self.short)
            for table in self.query(DataTable):
                # A table measures its rows when idle, after the layout that placed it: with
                # an auto height it would keep the height of no rows until laid out again.
                table.call_after_refresh(table.refresh, layout=True)
        if empty != self.empty:
            self.empty = empty
            self._note.display = empty
            for child in self.query_children(".pane-body"):
                child.display = not empty
            self.styles.width = FOLDED_WIDTH if empty else None  # None: the stylesheet's width
            if isinstance(self.parent, PaneRow):
                self.parent.fold()

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._set_title()
        if self.state is not None:
            # Forget the drawn state so the pane redraws in full under the new filter.
            state, self.state = self.state, None
            self.show_state(state, self.now)
            if isinstance(self.parent, PaneRow):  # the filtered table may want less height
                self.parent.fold()

    def fit_short(self, short: bool) -> None:
        """On a short terminal tables drop their horizontal scrollbar (it would take a data
        row; Enter shows every column). Inline styles, not a class (see DashboardScreen)."""
        self.short = short
        for table in self.query(DataTable):
            table.styles.scrollbar_size_horizontal = 0 if short else None

    def wanted_height(self) -> int | None:
        """The lines the pane needs to show all it has, borders included, or None when it
        can use any height. A pane whose body is one table needs its header and rows (and a
        line for the horizontal scrollbar, which a short terminal drops)."""
        tables = list(self.query(DataTable))
        if len(tables) != 1 or len(self.query_children(".pane-body")) != 1:
            return None
        return 2 + 1 + tables[0].row_count + (0 if self.short else 1)

    @property
    def note(self) -> str | None:
        """What an empty pane says it waits for (None while it shows data)."""
        return self._note_text if self.empty else None

    def focus_target(self) -> Widget | None:
        """The widget the pane's number key focuses: its table, else the pane itself when it
        can hold the focus; None when there is nothing to focus yet."""
        if self.empty:  # a table mounted earlier is hidden now
            return None
        tables = self.query(DataTable)
        if tables:
            return tables.first()
        return self if self.can_focus else None

    def focus_pane(self) -> bool:
        """Focus the pane's table (or the pane); False when there is nothing to focus yet."""
        target = self.focus_target()
        if target is None:
            return False
        self._take_focus(target)
        return self.screen.focused is target

    def hold_focus(self) -> None:
        """Give an empty pane the focus (its number key does): Enter and / then answer for
        it, not for the pane that had the focus. Tab passes empty panes by."""
        self._held = True
        self._take_focus(self)

    def _take_focus(self, widget: Widget) -> None:
        # The screen's set_focus moves the focus now; Widget.focus() moves it from a callback
        # queued behind the keys already typed. The app looks a key's binding up from the
        # focused widget as the key reaches it, so a number key followed at once by Down and
        # Enter (typed ahead) has them act on the pane the number chose.
        self.screen.set_focus(widget)

    # -- the detail view --------------------------------------------------------------------

    def full_text(self) -> tuple[str, str] | None:
        """(title, full text) of the selected row or of the pane, or None when there is none."""
        return None

    def action_detail(self) -> None:
        shown = self.full_text()
        if shown is None and self.empty:
            self.app.notify(f"{self.title}: nothing to show ({self.note})", severity="warning", markup=False)
            return
        if shown is None:
            self.app.notify("nothing selected to show in full", severity="warning")
            return
        from console.screens.detail import DetailScreen

        self.app.push_screen(DetailScreen(*shown))
