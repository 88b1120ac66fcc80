"""The retrieval benchmark's baseline: textbook BM25 (Robertson and Sparck Jones
idf, k1 1.2, b 0.75), no stemming, English stop words removed, over the same
turns recall searches, each turn as its speaker, its text and its reply."""

from __future__ import annotations

import math
import re
from collections import Counter

# A common English stop-word list (the usual 127 of information retrieval toolkits).
_STOP_WORDS = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it
its itself they them their theirs themselves what which who whom this that these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over under again further
then once here there when where why how all any both each few more most other some such no nor not only own same so
than too very s t can will just don should now
"""
STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"\w+")


def terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP]


class BM25:
    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.lengths: list[int] = []
        for n, doc in enumerate(docs):
            counts = Counter(terms(doc))
            self.lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((n, tf))
        self.n = len(docs)
        self.avgdl = sum(self.lengths) / max(1, self.n)

    def idf(self, term: str) -> float:
        df = len(self.postings.get(term, ()))
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def search(self, query: str, k: int) -> list[int]:
        """The best k documents by score; equal scores, the newer (higher number) first."""
        scores: dict[int, float] = {}
        k1, b, avgdl, lengths = self.k1, self.b, self.avgdl, self.lengths
        for term in set(terms(query)):
            idf = self.idf(term)
            for n, tf in self.postings.get(term, ()):
                norm = k1 * (1 - b + b * lengths[n] / avgdl)
                scores[n] = scores.get(n, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
        return sorted(scores, key=lambda n: (-scores[n], -n))[:k]
