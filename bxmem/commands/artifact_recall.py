"""recall's artifact sources: this agent's cards (`artifacts`, first in the round robin, with the local
index's deadline, tagged as their session), and another agent's among Honcho's hits (memory-tainted). An exact id
or tag comes first. Light: recall's lean path loads it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from bxmem.config.loader import Config
from bxmem.retrieval.hits import Hit, Why
from bxmem.retrieval.relevance import PREFIX
from bxmem.retrieval.terms import STOP, words
from bxmem.store import artifact_catalog as catalog
from bxmem.trust import printed_fields
from bxmem.trust.artifact_rules import is_artifact_id, is_experiment_id, parse_card_text, retracted_card
from bxmem.trust.labels import MEMORY, TAINTED
from bxmem.trust.sanitize import neutralise

E = {name: at for at, name in enumerate(catalog.FIELDS)}
SHARED = 2  # the query's words a card must hold, as most Honcho hits must (retrieval/fusion.keep)


def searched(config: Config) -> bool:
    return config.artifacts is not None or catalog.stamp(config.paths.artifacts / "cards") is not None


def _catalog(config: Config, fresh: bool = False) -> catalog.Catalog:
    def check(card: dict, name: str) -> str | None:
        from bxmem.store.artifact_cards import card_problem  # deferred: lean (only when the catalog is stale)

        return card_problem(card, name)

    if fresh:  # the catalog was damaged: the cards are read
        catalog.forget(config.paths.state)
    return catalog.read(config.paths.state, config.paths.artifacts / "cards", check)


def _text(e: list) -> str:
    lines = [f"[artifact card] {e[E['title']] or '(untitled)'}", e[E["summary"]]]
    if e[E["tags"]]:
        lines.append("tags: " + ", ".join(e[E["tags"]]))
    lines.append(f"source version: {e[E['source_version']]}")
    lines.append(
        f"experiment {e[E['experiment']]}, artifact {e[E['artifact']]} ({e[E['bytes']]:,} bytes, {e[E['media_type']]})"
    )
    return "\n".join(lines)


def _hit(config: Config, e: list, why: Why) -> Hit:
    here = catalog.object_present(config.paths.artifacts, e[E["artifact"]], e[E["bytes"]])
    return Hit(
        "local",
        TAINTED if e[E["untrusted"]] else MEMORY,
        e[E["class"]],
        printed_fields.text(_text(e), 600),
        where="artifact-bytes-here" if here else "artifact-bytes-missing",
        session=printed_fields.honcho_id(e[E["session"]]),
        date=printed_fields.date(e[E["updated_at"]]),
        why=why,
    )


def cards(config: Config, query: str, k: int) -> list[Hit]:
    """This agent's cards for a query: those an id or a tag in it names first, then those sharing its words as most
    Honcho hits must (retrieval/fusion.keep), most words first, newest first among equals."""
    for fresh in (False, True):
        found = _catalog(config, fresh)
        try:
            return _cards(config, found, query, k)
        except (TypeError, catalog.Damaged):
            if fresh:
                raise
        finally:
            found.close()
    return []


def _cards(config: Config, found: catalog.Catalog, query: str, k: int) -> list[Hit]:
    """Entry numbers are recency ranks (the catalog keeps entries newest first)."""
    exact: dict[int, list[str]] = {}  # an entry: the ids or the tag that named it
    for word in dict.fromkeys(query.replace(",", " ").split()):
        if is_experiment_id(word) or is_artifact_id(word):
            for at in found.with_id(word):
                exact.setdefault(at, []).append(word)
    tag = " ".join(query.split()).casefold()
    for at in found.named(found.tags, tag):
        exact.setdefault(at, []).append(tag)
    asked: dict[
        str, str
    ] = {}  # each of the query's words by its stem, as the catalog indexes a card's (relevance.stems)
    for word in words(neutralise(query)):
        if word not in STOP:
            asked.setdefault(word[:PREFIX], word)
    shared: dict[int, list[str]] = {}
    for stem, word in asked.items():
        for at in found.named(found.words, stem):
            shared.setdefault(at, []).append(word)
    need = min(SHARED, len(asked))
    first = sorted(exact)[:k]
    ranked = heapq.nsmallest(
        k - len(first), ((-len(words), at) for at, words in shared.items() if len(words) >= need and at not in exact)
    )
    order = [*first, *(at for _n, at in ranked)]
    # why: the ids, tag or words it was found by, and its rank among this agent's cards (no bm25 score)
    return [
        _hit(config, found.entry(at), Why(tuple(exact.get(at) or shared[at]), n, None)) for n, at in enumerate(order, 1)
    ]


def refresh(config: Config) -> None:
    """A catalog gone or stale made again from the cards, where no deadline cuts the work short (recall's can, at
    10,000 cards on a loaded host). A cache: what fails here is only a slower recall."""
    try:
        _catalog(config).close()
    except Exception:  # a cache: the next reader tries again
        pass


def mark_remote(config: Config, pairs: list[tuple[Hit, str]], search: Callable[[str, int], list[dict]]) -> None:
    """Another agent's cards among Honcho's hits: tainted whatever the source's label, said whether this host holds
    the same bytes (the only way they resolve here), and marked retracted where their owner removed them."""
    held: catalog.Catalog | None = None
    cards: dict[str, list[Hit]] = {}
    try:
        for hit, text in pairs:
            ids = parse_card_text(text)
            if ids is None or not (is_experiment_id(ids[0]) and is_artifact_id(ids[1])):
                continue
            cards.setdefault(ids[0], []).append(hit)
            hit.tag = TAINTED
            if held is None:
                held = _catalog(config)
            try:
                here = bool(held.with_id(ids[1])) and catalog.object_present(config.paths.artifacts, ids[1], None)
            except catalog.Damaged:
                here = False
            hit.where = "artifact-bytes-here" if here else "artifact-bytes-elsewhere"
    finally:
        if held is not None:
            held.close()
    if cards:
        _mark_retracted(cards, search)


def _mark_retracted(cards: dict[str, list[Hit]], search: Callable[[str, int], list[dict]]) -> None:
    """`artifact rm` leaves a retraction beside a card (ids only, so a query for the card's
    words never meets it): one search for the cards' experiment ids finds it, and a card is
    retracted by its own agent only (the retraction's peer is the card's)."""
    from bxmem.honcho.api import HonchoError  # deferred: lean (only with another agent's card)

    try:
        found = search(" ".join(cards), min(100, 5 * len(cards)))
    except HonchoError:
        return  # not known to be retracted: the card is shown, tainted, as any other agent's
    for message in found:
        for hit in cards.get(retracted_card(message.get("content") or "") or "", []):
            if hit.peer == printed_fields.honcho_id(message.get("peer_id")):
                hit.retracted = True
