"""How recall ranks a Honcho source's candidates and which it keeps: Honcho's order fused with bxmem's ranking
by reciprocal rank (k = 60, as Honcho fuses its arms). Honcho's search makes a question's punctuation a substring
match and has no cut-off; docs/decisions.md has the rule in these constants' figures, and what chose them.
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
