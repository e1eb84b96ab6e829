"""The footer: the keys the current screen offers, dimmed where the action is refused now.

Textual's own footer rebuilds itself (one widget per key, mounted anew) whenever the
screen's bindings may have changed, which includes every focus change; on a dashboard that
is a full re-layout per pane switch. This bar is one widget that draws one line: when the
bindings are announced it compares what it would show with what it shows, and repaints
that line only if a key appeared, vanished or changed between enabled and dimmed.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget

# (key, key as displayed, description, enabled)
Shown = tuple[str, str, str, bool]


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyBar > .key-bar--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyBar > .key-bar--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    """
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description"}

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.shown: tuple[Shown, ...] = ()
        self.spans: list[tuple[int, int, Shown]] = []  # (first column, end column, key) for clicks

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        # Bindings ask the app what can run, which reads other widgets: wait until all are mounted.
        self.call_after_refresh(self._bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        shown = self.shown_keys(screen)
        if shown != self.shown:
            self.shown = shown
            self.refresh()

    def shown_keys(self, screen: Screen) -> tuple[Shown, ...]:
        """One entry per action with a visible binding (the first key bound to it), in
        binding order, with the command palette key last."""
        app = self.app
        seen: set[str] = set()
        keys: list[Shown] = []
        palette = None
        for _, binding, enabled, _ in screen.active_bindings.values():
            if binding.key == app.COMMAND_PALETTE_BINDING and app.ENABLE_COMMAND_PALETTE:
                palette = (binding.key, app.get_key_display(binding), binding.description, enabled)
                continue
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            keys.append((binding.key, app.get_key_display(binding), binding.description, enabled))
        if palette is not None:
            keys.append(palette)
        return tuple(keys)

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        width = self.size.width
        shown = list(self.shown)
        # The palette key stays at the right edge; the other keys give way when space runs out.
        palette = shown.pop() if shown and shown[-1][0] == self.app.COMMAND_PALETTE_BINDING else None
        room = width - (self._cell_width(palette) if palette else 0)
        text = Text(no_wrap=True, overflow="crop", end="")
        self.spans = []
        for entry in shown:
            if len(text) + self._cell_width(entry) > room:
                text.append("…", style=description_style)
                break
            self._append(text, entry, key_style, description_style)
        if palette is not None:
            text.append(" " * max(0, room - len(text)))
            self._append(text, palette, key_style, description_style)
        return text

    @staticmethod
    def _cell_width(entry: Shown) -> int:
        return len(entry[1]) + len(entry[2]) + 3

    def _append(self, text: Text, entry: Shown, key_style, description_style) -> None:
        _, display, description, enabled = entry
        start = len(text)
        text.append(f" {display} ", style=key_style)
        text.append(f"{description} ", style=description_style)
        if not enabled:
            text.stylize("dim", start)
        self.spans.append((start, len(text), entry))

    def on_click(self, event: events.Click) -> None:
        for start, end, (key, _, _, enabled) in self.spans:
            if start <= event.x < end:
                if enabled:
                    self.app.simulate_key(key)
                else:
                    self.app.bell()
                return
