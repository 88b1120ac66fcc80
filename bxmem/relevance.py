"""Which of Honcho's hits recall keeps: those that share a word with the query.

Honcho's search is semantic with no relevance cut-off: it always returns its
nearest messages, however far. A Honcho hit is kept only when it shares a
word with the query (casefolded, words cut to their first 5 letters, the
commonest English words ignored), as every local hit does (docs/decisions.md).
"""

from __future__ import annotations

from .sanitize import neutralise

_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "did", "do", "does", "for", "from", "had",
    "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or",
    "our", "so", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "we", "were",
    "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
})


def _stems(text: str) -> set[str]:
    import re

    return {w[:5] for w in re.findall(r"\w+", neutralise(text).casefold()) if w not in _STOP}


def shares_a_word(query: str, text: str) -> bool:
    return not _stems(query).isdisjoint(_stems(text))
