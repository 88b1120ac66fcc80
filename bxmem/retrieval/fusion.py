"""How recall ranks a Honcho source's candidates, and which it keeps.

Honcho's search fuses a vector arm with a full-text arm, but a question's
punctuation makes that arm a substring match of the whole question, so a
natural question was searched by meaning alone; and it has no cut-off. recall
sends Honcho the query's words alone, takes a wide set of candidates, ranks
them by their words with the local index's own ranker (store/search.py, in a
scratch index) and fuses that order with Honcho's by reciprocal rank (as
Honcho fuses its arms, k = 60). A candidate is kept when one of its passages
holds two of the query's words (every one, when it asks fewer) and both arms
put it near the top: among the best LEXICAL_TOP by its words and SEMANTIC_TOP
by Honcho's order, or among the best WORDS_TOP by its words holding three
quarters of the query's words. A paraphrase shares fewer words, so two more
ways in, weighing a word by how few of the candidates hold it
(relevance.rarity, BM25's idf): among the best RARE_TOP by its words holding
RARE_SHARE of the query's weight; the first (FIRST) in both arms holding
FIRST_SHARE of it. Chosen on two workspaces (bench/remote.py: bench/corpus.py
at seed 40 and bench/dialogue.py's tune split), checked on a third (seed 26):
docs/decisions.md has the figures that chose these.
"""

from __future__ import annotations

RRF_K = 60
# For k = 8; a larger k scales them.
LEXICAL_TOP = 5
SEMANTIC_TOP = 10
WORDS_TOP = 8
MOST_WORDS = 0.75
FIRST = 1
RARE_TOP = 2
RARE_SHARE = 0.6
FIRST_SHARE = 0.4


def fuse(orders: list[list[int]]) -> list[int]:
    """Items (ids) by the sum over `orders` of 1 / (RRF_K + their rank there), best first; ties by id."""
    score: dict[int, float] = {}
    for order in orders:
        for rank, item in enumerate(order, 1):
            score[item] = score.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(score, key=lambda item: (-score[item], item))


def lexical_reach(k: int) -> int:
    """How far down the ranking by words a kept candidate can be."""
    return int(max(LEXICAL_TOP, WORDS_TOP) * max(1.0, k / 8))


def keep(
    held: int, asked: int, lexical_rank: int | None, semantic_rank: int | None, k: int, weight: float = 0.0
) -> bool:
    """Whether a candidate is shown: `held` the most of the query's `asked` words one passage
    holds, its rank by its words and by Honcho's order (None: not ranked there), and `weight`
    the share of the query's weight those words hold (relevance.share: 0.0 to 1.0)."""
    if asked == 0 or lexical_rank is None or held == 0:
        return False
    scale = max(1.0, k / 8)
    if lexical_rank <= RARE_TOP * scale and weight >= RARE_SHARE:
        return True
    if (
        lexical_rank <= FIRST * scale
        and semantic_rank is not None
        and semantic_rank <= FIRST * scale
        and weight >= FIRST_SHARE
    ):
        return True
    if held < min(2, asked):
        return False
    if lexical_rank <= LEXICAL_TOP * scale and semantic_rank is not None and semantic_rank <= SEMANTIC_TOP * scale:
        return True
    return lexical_rank <= WORDS_TOP * scale and held >= MOST_WORDS * asked
