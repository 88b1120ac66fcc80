"""Which of Honcho's hits recall keeps: those sharing two of the query's words.

Honcho's search is semantic and fused with full text, with no relevance
cut-off and no score in its answer: it always returns its nearest messages,
however far. A Honcho hit is kept only when it shares two of the query's
content words, or every one of them when the query has fewer (casefolded,
clitics cut, the stop words of policy/terms.py ignored, words compared by their
first 5 letters, so "deploy" and "deployment" are one; the peer who wrote a
message is one of its words, as the speaker is of a local turn). Measured
against a real Honcho with semantic embeddings, one shared word kept a near
miss for nearly every question about something never written there; two
keep four answers in five and a fifth of the noise (docs/decisions.md).

Imports only policy/terms.py and policy/sanitize.py (and `re`): recall's lean path loads it.
"""

from __future__ import annotations

import re

from bxmem.policy.sanitize import neutralise
from bxmem.policy.terms import STOP, words

_WORD = re.compile(r"\w+")

PREFIX = 5  # letters a word is compared by: a stemmer's work, without one for Honcho's texts
DOT = "_Dot_"  # as rules.DOT writes a `.` in a peer id (rules imports typing: not on recall's lean path)
SHARED = 2  # words a hit must share with the query (or every one, when the query has fewer)


def stems(text: str) -> set[str]:
    return {w[:PREFIX] for w in words(neutralise(text)) if w not in STOP}


def relevant(query: str, text: str, author: str | None = None) -> bool:
    """`author`, the peer who wrote the text, counts as one of its words."""
    asked = stems(query)
    held = stems(text) | (stems(author.replace(DOT, " ").replace("_", " ")) if author else set())
    return bool(asked) and len(asked & held) >= min(SHARED, len(asked))


def spans(query: str, text: str) -> list[tuple[int, int]]:
    """Where in `text` the query's words are, as `relevant` compares them (for a snippet around them)."""
    asked = stems(query)
    return [(m.start(), m.end()) for m in _WORD.finditer(text) if m.group().casefold()[:PREFIX] in asked]
