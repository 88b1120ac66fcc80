"""One sanitiser for every printed field that came from outside (docs/interfaces.md, "What bxmem prints that
came from outside"): each kind within its schema's limits. No datetime: the lean recall path imports it.
"""

from __future__ import annotations

import re

from bxmem.trust.sanitize import neutralise

INVALID_ID = "(invalid id)"
_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")
_ITEM = re.compile(
    r"(?:turn:[A-Za-z0-9_-]{1,500}:[0-9]{1,12}|edit:[A-Za-z0-9_.:-]{1,200}|card:[a-z0-9_:-]{1,200})"
    r"(?:#[0-9]{1,6})?"
)
_TOKEN = re.compile(r"[A-Za-z0-9_.:#-]{1,512}")
_DATE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]{1,9}))?)?"
    r"([Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)
_DATE_CHARS = 40  # the longest form above: a 9-digit fraction and an offset with a colon
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def honcho_id(value: object) -> str | None:
    """An id from outside, to print: itself if it is a Honcho id, None if absent, else INVALID_ID."""
    if value is None:
        return None
    return value if isinstance(value, str) and _ID.fullmatch(value) else INVALID_ID


def item(value: object) -> str | None:
    """A bxmem item or conclusion ref from outside (message metadata, the ledger), to print."""
    if value is None:
        return None
    return value if isinstance(value, str) and _ITEM.fullmatch(value) else INVALID_ID


def token(value: object) -> str | None:
    """A name or role bxmem recorded (a workspace, a peer, `read:<agent>`), to print:
    itself if it is one word of `A-Z a-z 0-9 _ . : # -` (at most 512), else INVALID_ID."""
    if value is None:
        return None
    return value if isinstance(value, str) and _TOKEN.fullmatch(value) else INVALID_ID


def date(value: object) -> str | None:
    """An ISO 8601 date or time, written one way; None for anything else (dropped, not shown)."""
    if not isinstance(value, str) or len(value) > _DATE_CHARS:
        return None
    found = _DATE.fullmatch(value.strip())
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = found.groups()
    y, mo, d = int(year), int(month), int(day)
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    if y < 1 or not 1 <= mo <= 12 or not 1 <= d <= (_MONTH_DAYS[mo - 1] - (mo == 2 and not leap)):
        return None
    if hour is None:
        return f"{year}-{month}-{day}"
    if int(hour) > 23 or int(minute) > 59 or int(second or 0) > 59:
        return None
    out = f"{year}-{month}-{day}T{hour}:{minute}:{second or '00'}" + (f".{fraction[:6]}" if fraction else "")
    if offset is None:
        return out  # a local time, as given: ISO 8601 allows it
    if offset in "Zz":
        return out + "Z"
    digits = offset[1:].replace(":", "")
    oh, om = int(digits[:2]), int(digits[2:] or 0)
    if oh > 23 or om > 59:
        return None
    return out + ("Z" if oh == om == 0 else f"{offset[0]}{oh:02d}:{om:02d}")


def text(value: object, cap: int) -> str:
    """Free text from outside, to print: neutralised, stripped of blank space at
    either end, at most `cap` characters (a longer one ends in an ellipsis)."""
    if not isinstance(value, str):
        return ""
    cleaned = neutralise(value).strip()
    return cleaned if len(cleaned) <= cap else cleaned[: max(0, cap - 1)] + "…"


def line(value: object, cap: int) -> str:
    """Free text from outside, to print inside one line (a reason, a problem): as
    `text`, with every run of blank space, line breaks included, one space."""
    return " ".join(text(value, cap).split())
