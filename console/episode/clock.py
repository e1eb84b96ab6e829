"""Turning the timestamps that records carry into seconds since the epoch, fast.

Telemetry timestamps are ISO-8601 UTC strings; a long campaign has millions of them and
``datetime.fromisoformat`` dominates a cold ingest. Records written within one minute share
their first 16 characters, so the minute is parsed once and cached, and only the seconds
are parsed per record.
"""

from __future__ import annotations

from datetime import datetime, timezone

_minute_cache: dict[str, float] = {}


def iso_to_epoch(text: object) -> float | None:
    if type(text) is not str or len(text) < 19:
        return None
    base = _minute_cache.get(text[:16])
    if base is not None:
        try:
            if text[-6:] == "+00:00":
                return base + float(text[17:-6])
            if text[-1] == "Z":
                return base + float(text[17:-1])
        except ValueError:
            return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    value = parsed.timestamp()
    if text[16] == ":" and (text.endswith("+00:00") or text.endswith("Z")):
        if len(_minute_cache) > 4096:
            _minute_cache.clear()
        _minute_cache[text[:16]] = value - parsed.second - parsed.microsecond / 1e6
    return value
