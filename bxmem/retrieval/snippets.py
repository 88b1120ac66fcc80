"""A hit's text as recall shows it, cut around the densest run of matched words; a turn keeps both halves
visible, what was said and the reply. Pure: the marks come from the index.
"""

from __future__ import annotations

SNIPPET_CHARS = 600
OTHER_HALF = 160  # the half that did not match: its first characters, at most
ELLIPSIS = "…"


def around(text: str, reply_at: int | None, marks: list[tuple[int, int]], limit: int = SNIPPET_CHARS) -> str:
    """`text` cut to `limit` characters around `marks` ((start, end) of each matched word)."""
    if len(text.strip()) <= limit:
        return text.strip()
    focus = _focus(marks, limit // 2)
    if reply_at is None or not 0 < reply_at <= len(text):
        return _excerpt(text, focus, limit)
    said, reply = text[: reply_at - 1], text[reply_at:]
    if focus is not None and focus >= reply_at:
        head = _excerpt(said, None, min(len(said.strip()), OTHER_HALF) or 1)
        return _join(head, _excerpt(reply, focus - reply_at, limit - len(head) - 1), limit)
    tail = _excerpt(reply, None, min(len(reply.strip()), OTHER_HALF) or 1)
    room = limit - len(tail) - 1
    body = _excerpt(said, focus, room)
    if len(body) < room and len(reply.strip()) > len(tail):  # what was said is short: the reply gets the rest
        tail = _excerpt(reply, None, limit - len(body) - 1)
    return _join(body, tail, limit)


def _join(first: str, second: str, limit: int) -> str:
    joined = f"{first}\n{second}".strip()
    return joined if len(joined) <= limit else joined[: limit - 1] + ELLIPSIS


def _focus(marks: list[tuple[int, int]], reach: int) -> int | None:
    """The start of the mark that begins the run holding the most marks within `reach` characters."""
    if not marks:
        return None
    marks = sorted(marks)
    best, best_count, last = marks[0][0], 0, 0
    for first, (start, _end) in enumerate(marks):
        last = max(last, first)
        while last + 1 < len(marks) and marks[last + 1][1] - start <= reach:
            last += 1
        if last - first + 1 > best_count:
            best, best_count = start, last - first + 1
    return best


def _excerpt(text: str, focus: int | None, room: int) -> str:
    """At most `room` characters of `text`: from the beginning, or with `focus` a
    quarter of the way in; "…" where the text is cut."""
    if len(text.strip()) <= room:
        return text.strip()
    if room < 2:
        return ELLIPSIS[:room]
    size = len(text)
    start = 0 if focus is None else max(0, focus - room // 4)
    if start > 0:
        start = min(start, size - room + 1)  # from here, room - 1 characters after the "…" reach the end
    lead = 1 if start > 0 else 0
    end = start + room - lead
    trail = 0
    if end < size:
        end, trail = end - 1, 1
    keep_from, keep_to = (focus, focus + 1) if focus is not None else (end, start + 1)
    if lead:
        start = _after_space(text, start, min(keep_from, end))
    if trail:
        end = _before_space(text, end, max(keep_to, start + 1))
    return ELLIPSIS * lead + text[start:end].strip() + ELLIPSIS * trail


def _after_space(text: str, at: int, limit: int) -> int:
    """The start of the word at or after `at`, if one starts within 20 characters and before `limit`."""
    for n in range(at, min(at + 20, limit, len(text))):
        if text[n - 1].isspace() and not text[n].isspace():
            return n
    return at


def _before_space(text: str, at: int, floor: int) -> int:
    """The end of the word before `at`, if one ends within 20 characters and after `floor`."""
    for n in range(at, max(at - 20, floor), -1):
        if text[n].isspace():
            return n
    return at
