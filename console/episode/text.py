"""Agent-written text made safe to show: every control and invisible format character becomes visible.

Everything in a workspace or archive is untrusted. A phase name or job id that carries ESC,
BEL or another control character could set the window title, write the clipboard (OSC 52)
or clear the screen if it reached a terminal as is. ``visible`` maps C0 controls and DEL to
their Unicode control pictures (ESC shows as ␛, BEL as ␇) and C1 controls to ``\\x9b``-style
escapes, so the text reads the same and does nothing.

Format characters (Unicode category Cf: the bidirectional overrides and isolates U+202A-202E
and U+2066-2069, zero-width spaces and joiners, LRM/RLM, the BOM), the line and paragraph
separators U+2028/2029 and lone surrogates draw nothing themselves but reorder, hide or
break what follows them in a bidi-capable terminal ("Trojan Source"), or cannot be written
out at all. They become escapes the way Python writes them (``\\u202e``, ``\\xad``,
``\\U000e0041``). The category decides, from ``unicodedata``, so a character a later Unicode
adds is covered too.

Markup is the other half: widgets take such text as ``rich.text.Text`` or with
``markup=False``, never as a markup string.
"""

from __future__ import annotations

import re
import unicodedata

_PICTURES = {code: 0x2400 + code for code in range(0x20)} | {0x7F: 0x2421}
_C1 = {code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}
_VISIBLE = str.maketrans(_PICTURES | _C1)
# Format, line separator, paragraph separator, surrogate (Cc, the controls, go by _VISIBLE).
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cs"})
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if unicodedata.category(char) not in _INVISIBLE_CATEGORIES:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with every C0, C1 and DEL control character, and every format character,
    line or paragraph separator and lone surrogate, replaced by a visible stand-in."""
    text = text.translate(_VISIBLE)
    if text.isprintable():  # nearly always: nothing else to replace (checked without a per-character call)
        return text
    # Not printable also means a no-break space, private use or unassigned: kept as they are.
    return _NON_ASCII.sub(_escaped, text)


def visible_lines(text: str) -> str:
    """Like ``visible`` but keeps the line breaks (each line made visible on its own)."""
    return "\n".join(visible(line) for line in text.split("\n"))
