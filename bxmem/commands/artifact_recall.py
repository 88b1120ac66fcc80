"""What recall finds of artifact memory: this agent's cards among its local hits, and
another agent's cards among Honcho's (docs/design.md, "Artifact memory").

A card of this agent's is tagged by the session it was recorded in (memory, or
memory-tainted, its class); one found in another agent's workspace or the fleet is
memory-tainted whatever the source. Each says in its `where` whether the exact bytes
are on this host (`artifact-bytes-here`, `-elsewhere`, `-missing`). An exact id or tag
comes before everything else. Light: recall's lean path loads it.
"""

from __future__ import annotations

from bxmem.config.loader import Config
from bxmem.policy import shown
from bxmem.policy.artifacts import is_artifact_id, is_experiment_id, parse_card_text
from bxmem.policy.hits import Hit
from bxmem.policy.labels import MEMORY, TAINTED
from bxmem.policy.relevance import relevant, stems
from bxmem.store import artifact_catalog as catalog

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

E = {name: at for at, name in enumerate(catalog.FIELDS)}


def _cards(config: Config) -> list[list]:
    store = config.paths.artifacts / "cards"

    def check(card: dict, name: str) -> str | None:
        from bxmem.store.artifact_cards import card_problem  # deferred: lean (only when the catalog is stale)

        return card_problem(card, name)

    return catalog.read(config.paths.state, store, check)


def _bytes_here(config: Config, artifact: str, size: int | None) -> bool:
    return catalog.object_present(config.paths.artifacts, artifact, size)


def _text(e: list) -> str:
    lines = [f"[artifact card] {e[E['title']] or '(untitled)'}", e[E["summary"]]]
    if e[E["tags"]]:
        lines.append("tags: " + ", ".join(e[E["tags"]]))
    lines.append(f"source version: {e[E['source_version']]}")
    lines.append(f"experiment {e[E['experiment']]}, artifact {e[E['artifact']]} ({e[E['bytes']]:,} bytes, "
                 f"{e[E['media_type']]})")
    return "\n".join(lines)


def _hit(config: Config, e: list) -> Hit:
    here = _bytes_here(config, e[E["artifact"]], e[E["bytes"]])
    return Hit("local", TAINTED if e[E["untrusted"]] else MEMORY, e[E["class"]], shown.text(_text(e), 600),
               where="artifact-bytes-here" if here else "artifact-bytes-missing",
               session=shown.honcho_id(e[E["session"]]), date=shown.date(e[E["updated_at"]]))


def local(config: Config, query: str, k: int) -> tuple[list[Hit], list[Hit]]:
    """(exact, matching): this agent's cards named by an id or a tag in the query, then
    those sharing its words as a Honcho hit must (policy/relevance.py), newest first."""
    entries = _cards(config)
    if not entries:
        return [], []
    words = {w.casefold() for w in query.replace(",", " ").split()}
    whole = " ".join(query.split()).casefold()
    exact, matching = [], []
    for e in sorted(entries, key=lambda e: e[E["updated_at"]], reverse=True):
        tags = {t.casefold() for t in e[E["tags"]]}
        if e[E["experiment"]] in words or e[E["artifact"]] in words or whole in tags or (words and words <= tags):
            exact.append(e)
        elif relevant(query, " ".join([e[E["title"]], e[E["summary"]], *e[E["tags"]], e[E["source_version"]]])):
            matching.append(e)
    asked = stems(query)
    matching.sort(key=lambda e: -len(asked & stems(" ".join([e[E["title"]], e[E["summary"]], *e[E["tags"]]]))))
    return [_hit(config, e) for e in exact[:k]], [_hit(config, e) for e in matching[:k]]


def with_cards(config: Config, query: str, k: int, index_hits: Callable[[], list[Hit]]) -> list[Hit]:
    """The local source's hits: exact cards first, then the index's hits and matching cards
    in turn. The index unavailable (none built yet, another version's) leaves the cards."""
    exact, matching = local(config, query, k)
    try:
        hits = index_hits()
    except Exception:
        if not (exact or matching):
            raise
        hits = []
    merged = list(exact)
    for pair in zip(hits, matching, strict=False):
        merged.extend(pair)
    merged += hits[len(matching):] + matching[len(hits):]
    return merged[:k]


def mark_remote(config: Config, pairs: list[tuple[Hit, str]]) -> None:
    """Another agent's cards among Honcho's hits (each with the text Honcho gave): tainted,
    whatever the source's label, and said whether this host holds the same bytes, which
    is the only way they resolve here."""
    known: dict[str, bool] | None = None
    for hit, text in pairs:
        ids = parse_card_text(text)
        if ids is None or not (is_experiment_id(ids[0]) and is_artifact_id(ids[1])):
            continue
        if known is None:
            known = {e[E["artifact"]]: True for e in _cards(config)}
        here = ids[1] in known and _bytes_here(config, ids[1], None)
        hit.tag = TAINTED
        hit.where = "artifact-bytes-here" if here else "artifact-bytes-elsewhere"
