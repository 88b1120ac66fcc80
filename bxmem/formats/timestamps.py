"""The ledger's one time format (`2026-12-01T19:17:02.123Z`), so the ledger, send, sync and the retry rules
cannot drift apart on it. Pure: a time is given, never read from a clock here.
"""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(t: float) -> str:
    """`t` (seconds since the epoch) as the ledger writes times."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: object) -> float | None:
    """A time as the ledger writes it (or any ISO 8601 time Python reads) in seconds
    since the epoch; None when `value` is none: not a string, not a time, or one
    with no place on the clock. What the ledger holds came from a file, so a bad
    time is an unknown time, never a crash."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError):
        return None


def age_text(seconds: float | None) -> str:
    """A duration as bxmem reports one beside a time: 40 s, 4.0 min, 2.5 h, 1.2 d."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
