"""How much of a query a Honcho text holds, as policy/fusion.py's rule weighs it.

Words are cut as the local search cuts them (casefolded, clitics cut, the stop
words of policy/terms.py ignored) and compared by their first 5 letters, so
"deploy" and "deployment" are one (a stemmer's work, without one for Honcho's
texts); the peer who wrote a text is one of its words, as the speaker is of a
local turn. A text counts by its best passage (terms.passages), as a local
document does: words scattered over a pasted page are not a match.

Imports only policy/terms.py and policy/sanitize.py (and `re`): recall's lean path loads it.
"""

from __future__ import annotations

import re

from bxmem.policy.sanitize import neutralise
from bxmem.policy.terms import STOP, passages, words

_WORD = re.compile(r"\w+")

PREFIX = 5  # letters a word is compared by
DOT = "_Dot_"  # as rules.DOT writes a `.` in a peer id (rules imports typing: not on recall's lean path)


def stems(text: str) -> set[str]:
    return {w[:PREFIX] for w in words(neutralise(text)) if w not in STOP}


def cover(query: str, text: str, author: str | None = None) -> tuple[int, int]:
    """(the most of the query's words one passage of `text` holds, how many words the query
    has); `author`, the peer who wrote the text, counts as a word of every passage."""
    asked = stems(query)
    by = stems(author.replace(DOT, " ").replace("_", " ")) if author else set()
    text = neutralise(text)
    held = max((len(asked & (stems(text[start:start + length]) | by)) for start, length in passages(text)), default=0)
    return held, len(asked)


def spans(query: str, text: str) -> list[tuple[int, int]]:
    """Where in `text` the query's words are, as `cover` compares them (for a snippet around them)."""
    asked = stems(query)
    return [(m.start(), m.end()) for m in _WORD.finditer(text) if m.group().casefold()[:PREFIX] in asked]
