"""Numbers from files, formatted in a bounded width.

A figure read from a workspace or a recording can be anything JSON holds: ``1e308`` under
``.2f`` is 309 digits, a 64-bit count is 19. Shown as is, it pushes every other figure of the
line out of a pane and reads as a real measurement. A number whose formatted form would be
wider than ``MAX_WIDTH`` is written in scientific notation instead (``+1.00e+308``): the same
value, visibly out of the ordinary, in a few characters.
"""

from __future__ import annotations

from decimal import Decimal

MAX_WIDTH = 16  # the widest figure a pane or status line shows as formatted


def bounded(value: int | float, spec: str = "") -> str:
    """``value`` formatted with ``spec``, or in three significant digits of scientific
    notation (keeping ``spec``'s ``+`` sign) where that would be wider than ``MAX_WIDTH``."""
    shown = format(value, spec)
    if len(shown) <= MAX_WIDTH:
        return shown
    sign = "+" if "+" in spec else ""
    # an int beyond a float's range (10**400) is written exactly by Decimal
    return format(Decimal(value) if isinstance(value, int) else value, f"{sign}.2e")
