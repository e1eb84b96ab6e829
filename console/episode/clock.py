"""Turning the ISO-8601 times that records carry into seconds since the epoch."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_to_epoch(text: object) -> float | None:
    """Seconds since the epoch of an ISO-8601 time (a naive one is UTC); None when
    ``text`` is not one."""
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
