"""A Honcho source of `recall`: its candidates gathered wide (the query's words alone; a read source adds its
agent's and the owner's conclusions, by meaning and by their words), ranked in a scratch index by store/search.py,
then fused and kept by retrieval/fusion.py's rule (docs/decisions.md).
"""

from __future__ import annotations

from bxmem.retrieval import fusion
from bxmem.retrieval.hits import Hit, Why
from bxmem.retrieval.relevance import held, rarity, share, spans
from bxmem.retrieval.snippets import SNIPPET_CHARS, around
from bxmem.retrieval.terms import query_words
from bxmem.trust import printed_fields
from bxmem.trust.sanitize import neutralise

CANDIDATES = 100  # Honcho's most for one search, query or page: the messages recall takes
CONCLUSIONS = 50  # conclusions of one peer, by meaning and by words each: a peer's own facts are fewer
FIND_WORDS = 8  # the query's words a content filter names, at most
FIND_PREFIX = 5  # each by its first letters, so "deploying" finds "deployed" (the filter is a substring match)
# What of a candidate is ranked: a message may hold 25,000 characters and a conclusion 65,535, and
# ranking 100 of them whole took seconds. A text is ranked by its beginning, around the query's
# words when they come later (Honcho's order still carries what matched there by meaning).
RANK_CHARS = 4_000


class Candidate:
    """A text a Honcho source answered with, and where it ranks in each of Honcho's orders it was in."""

    __slots__ = ("text", "peer", "where", "session", "date", "semantic_rank")

    def __init__(
        self, text: str, peer: str | None, where: str, session: str | None, date: str | None, semantic_rank: int | None
    ) -> None:
        self.text, self.peer, self.where, self.session, self.date = text, peer, where, session, date
        self.semantic_rank = semantic_rank


def words_query(query: str) -> str:
    """What Honcho is asked: the query's content words, space-separated, no punctuation."""
    return " ".join(query_words(query))


def messages(found: list[dict], where: str) -> list[Candidate]:
    return [
        Candidate(m["content"], m["peer_id"], where, m["session_id"], m["created_at"], n)
        for n, m in enumerate(found, 1)
        if m["content"]
    ]


def conclusions(by_meaning: list[dict], by_words: list[dict]) -> list[Candidate]:
    """Both answers as one list, each conclusion once (its rank by meaning kept)."""
    out: dict[tuple, Candidate] = {}
    for n, c in enumerate(by_meaning, 1):
        out.setdefault(
            (c["content"], c["created_at"]),
            Candidate(c["content"], c["observer_id"], "conclusion", c["session_id"], c["created_at"], n),
        )
    for c in by_words:
        out.setdefault(
            (c["content"], c["created_at"]),
            Candidate(c["content"], c["observer_id"], "conclusion", c["session_id"], c["created_at"], None),
        )
    return [c for c in out.values() if c.text]


def find_words(query: str) -> list[str]:
    return list(dict.fromkeys(w[:FIND_PREFIX] for w in query_words(query)))[:FIND_WORDS]


def rank(query: str, candidates: list[Candidate], k: int, orders: list[list[int]]) -> list[tuple[Candidate, Why]]:
    """The candidates recall keeps, best first, each with how it was found. `orders`: Honcho's
    orders, as indexes into `candidates` (one per list Honcho ranked)."""
    from bxmem.store.index import Index  # deferred: lean (the scratch index is SQLite's, as the local one)

    if not candidates or not query_words(query):
        return []
    index = Index.in_memory()
    texts = [_ranked_part(c.text, query) for c in candidates]
    try:
        with index.transaction():
            for n, c in enumerate(candidates):
                # the writing peer is a word of the text, as the speaker of a local turn is
                index.add(str(n), "message", "memory", "private", texts[n], who=_author(c.peer) or "")
        lexical = index.search(query, fusion.lexical_reach(k))  # no candidate ranked below is ever kept
    finally:
        index.close()
    by_words = {int(hit.key): (place, hit) for place, hit in enumerate(lexical, 1)}
    semantic = {n: place for order in orders for place, n in enumerate(order, 1)}  # each candidate is in one order
    weights = rarity(query, [(texts[n], _author(c.peer)) for n, c in enumerate(candidates)])
    kept: list[tuple[Candidate, Why]] = []
    for n in fusion.fuse([[int(hit.key) for hit in lexical], *orders]):
        if n not in by_words:
            continue  # none of the query's words near the top: Honcho's order alone is no reason to show it
        place, hit = by_words[n]
        c = candidates[n]
        words = held(query, texts[n], _author(c.peer))
        if fusion.keep(len(words), len(weights), place, semantic.get(n), k, share(words, weights)):
            kept.append((c, Why(hit.matched, place, -hit.score, semantic.get(n), len(kept) + 1)))
    return kept


def _ranked_part(text: str, query: str) -> str:
    if len(text) <= RANK_CHARS:
        return text
    head = text[:RANK_CHARS]
    if spans(query, head):
        return head
    return around(text, None, spans(query, text), RANK_CHARS)


def hit(
    source: str,
    tag: str,
    trust_class: str,
    c: Candidate,
    why: Why,
    query: str,
    workspace: str,
    agent: str | None = None,
) -> Hit:
    # Every field shown goes through trust/printed_fields.py: an id outside Honcho's alphabet is a
    # marked placeholder, a date that is not one is dropped, the text is neutralised.
    return Hit(
        source,
        tag,
        trust_class,
        snippet(c.text, query),
        agent=agent,
        peer=printed_fields.honcho_id(c.peer),
        where=c.where,
        workspace=workspace,
        session=printed_fields.honcho_id(c.session),
        date=printed_fields.date(c.date),
        why=why,
    )


def snippet(text: str, query: str | None = None) -> str:
    """At most SNIPPET_CHARS of a Honcho text, neutralised as printed_fields.text does, around the
    query's words when it is cut (the local index cuts its own, around what FTS5 matched)."""
    text = neutralise(text).strip()
    if len(text) <= SNIPPET_CHARS:
        return text
    return around(text, None, spans(query, text) if query else [], SNIPPET_CHARS)


def _author(peer: str | None) -> str | None:
    """A writing peer's id as a word of its text: only a real Honcho id (never the placeholder's words)."""
    shown_id = printed_fields.honcho_id(peer)
    return None if shown_id == printed_fields.INVALID_ID else shown_id
