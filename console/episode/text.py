"""Agent-written text made safe to show: every control character becomes visible.

Everything in a workspace or archive is untrusted. A phase name or job id that carries ESC,
BEL or another control character could set the window title, write the clipboard (OSC 52)
or clear the screen if it reached a terminal as is. ``visible`` maps C0 controls and DEL to
their Unicode control pictures (ESC shows as ␛, BEL as ␇) and C1 controls to ``\\x9b``-style
escapes, so the text reads the same and does nothing. Markup is the other half: widgets take
such text as ``rich.text.Text`` or with ``markup=False``, never as a markup string.
"""

from __future__ import annotations

_PICTURES = {code: 0x2400 + code for code in range(0x20)} | {0x7F: 0x2421}
_C1 = {code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}
_VISIBLE = str.maketrans(_PICTURES | _C1)


def visible(text: str) -> str:
    """``text`` with every C0, C1 and DEL control character replaced by a visible stand-in."""
    return text.translate(_VISIBLE)


def visible_lines(text: str) -> str:
    """Like ``visible`` but keeps the line breaks (each line made visible on its own)."""
    return "\n".join(visible(line) for line in text.split("\n"))
