"""How much of a query a Honcho text holds, by its best passage (words scattered over a page are no match).
Words are cut as the local search cuts them and compared by their first 5 letters (a stemmer's work, without one
for Honcho's texts); the writing peer is one of a text's words. Light: recall's lean path loads it.
"""

from __future__ import annotations

import math
import re

from bxmem.retrieval.terms import STOP, passages, words
from bxmem.trust.sanitize import neutralise

_WORD = re.compile(r"\w+")

PREFIX = 5  # letters a word is compared by
DOT = "_Dot_"  # as rules.DOT writes a `.` in a peer id (rules imports typing: not on recall's lean path)


def stems(text: str) -> set[str]:
    return {w[:PREFIX] for w in words(neutralise(text)) if w not in STOP}


def _by(author: str | None) -> set[str]:
    return stems(author.replace(DOT, " ").replace("_", " ")) if author else set()


def held(query: str, text: str, author: str | None = None) -> set[str]:
    """The query's words the best passage of `text` holds (the most of them); `author`, the
    peer who wrote the text, counts as a word of every passage."""
    asked, by = stems(query), _by(author)
    text = neutralise(text)
    best: set[str] = set()
    for start, length in passages(text):
        found = asked & (stems(text[start : start + length]) | by)
        if len(found) > len(best):
            best = found
    return best


def cover(query: str, text: str, author: str | None = None) -> tuple[int, int]:
    """(the most of the query's words one passage of `text` holds, how many words the query has)."""
    return len(held(query, text, author)), len(stems(query))


def rarity(query: str, texts: list[tuple[str, str | None]]) -> dict[str, float]:
    """Each of the query's words weighed by how few of `texts` (text, author) hold it, as
    BM25's idf weighs a word over a collection: log(1 + (N - n + 0.5) / (n + 0.5))."""
    asked = stems(query)
    count = dict.fromkeys(asked, 0)
    for text, author in texts:
        for word in asked & (stems(text) | _by(author)):
            count[word] += 1
    return {word: math.log(1 + (len(texts) - n + 0.5) / (n + 0.5)) for word, n in count.items()}


def share(words: set[str], weights: dict[str, float]) -> float:
    """The part of the query's weight (`rarity`) that `words` hold: 0.0 to 1.0."""
    total = sum(weights.values())
    return sum(weights.get(word, 0.0) for word in words) / total if total else 0.0


def spans(query: str, text: str) -> list[tuple[int, int]]:
    """Where in `text` the query's words are, as `cover` compares them (for a snippet around them)."""
    asked = stems(query)
    return [(m.start(), m.end()) for m in _WORD.finditer(text) if m.group().casefold()[:PREFIX] in asked]
