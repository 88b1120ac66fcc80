"""The cards' catalog, `memory/bxmem/artifact-cards.marshal`: what recall searches, one file.

A cache of `memory/artifacts/cards/` (deletable like all of `memory/bxmem/`): written
under the store's lock by whatever changed a card, stamped with the cards folder's
inode, mtime and ctime taken before the cards were read. A reader whose stamp differs
(a card written since, the catalog deleted or damaged) reads the cards themselves and
writes the catalog again, as the config cache is written by whoever validated the
file: a card changed meanwhile changes the folder's stamp, so the catalog is stale
again, never wrong. Beside the entries, indexes by id, by tag and by the words recall
compares (policy/relevance.stems), so a search looks up the query's words, whatever
the number of cards. Light: recall's lean path loads it.
"""

from __future__ import annotations

import json
import marshal
import os
import stat
from pathlib import Path

from bxmem.policy.artifacts import is_experiment_id, object_folder
from bxmem.policy.relevance import stems
from bxmem.policy.shapes import anything, integer, list_of, record
from bxmem.start.sealed import seal
from bxmem.store.files import Unreadable, load_marshal, read_state, write_bytes

CATALOG = "artifact-cards.marshal"
VERSION = 4
# One entry a card: what recall shows and matches, never a path.
FIELDS = ("experiment", "artifact", "title", "summary", "tags", "source_version", "untrusted", "class", "session",
          "updated_at", "bytes", "media_type")
_TYPES = (str, str, str, str, list, str, bool, str, str, str, int, str)
def _dict(value: object) -> str | None:  # its keys and values are checked where they are used
    return None if type(value) is dict else "not an object"


_SHAPE = record({"version": integer(1), "stamp": list_of(integer(None)), "cards": anything, "ids": _dict, "tags": _dict,
                 "stems": _dict})


class Damaged(Exception):
    """The catalog's entries or indexes are not of their types: the cards are read again."""


class Catalog:
    """The entries and their indexes: id -> entries, casefolded tag -> entries, stem -> entries."""

    def __init__(self, entries: list[list], ids: dict, tags: dict, words: dict) -> None:
        self.entries, self.ids, self.tags, self.words = entries, ids, tags, words

    @classmethod
    def of(cls, entries: list[list]) -> Catalog:
        ids: dict[str, list[int]] = {}
        tags: dict[str, list[int]] = {}
        words: dict[str, list[int]] = {}
        for at, e in enumerate(entries):
            for ident in (e[0], e[1]):
                ids.setdefault(ident, []).append(at)
            for tag in {t.casefold() for t in e[4]}:
                tags.setdefault(tag, []).append(at)
            for stem in stems(" ".join([e[2], e[3], *e[4], e[5]])):
                words.setdefault(stem, []).append(at)
        return cls(entries, ids, tags, words)

    def entry(self, at: object) -> list:
        """The entry an index names, checked: Damaged if it is not one."""
        if type(at) is not int or not 0 <= at < len(self.entries):
            raise Damaged
        e = self.entries[at]
        if type(e) is not list or len(e) != len(_TYPES) or not all(type(f) is t for f, t in zip(e, _TYPES, strict=True)):
            raise Damaged
        return e

    def updated(self, at: object) -> str:
        """When the entry an index names was updated (all recall ranks by beside the words shared)."""
        if type(at) is not int or not 0 <= at < len(self.entries):
            raise Damaged
        when = self.entries[at][9] if type(self.entries[at]) is list and len(self.entries[at]) == len(_TYPES) else None
        if type(when) is not str:
            raise Damaged
        return when

    def named(self, index: dict, key: str) -> list[int]:
        found = index.get(key, [])
        if type(found) is not list:
            raise Damaged
        return found

    def dump(self, at_stamp: list[int]) -> bytes:
        return seal(marshal.dumps({"version": VERSION, "stamp": at_stamp, "cards": self.entries, "ids": self.ids,
                                   "tags": self.tags, "stems": self.words}))


def stamp(cards_folder: Path) -> list[int] | None:
    try:
        st = os.lstat(cards_folder)
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def object_present(root: Path, artifact: str, size: int | None) -> bool:
    """A regular file of that size (any, with None) stands where the store keeps the
    artifact's bytes: not hashed (resolve does that), a look for recall to show."""
    try:
        st = os.lstat(root / "objects" / object_folder(artifact) / artifact)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (size is None or st.st_size == size)


def entry(card: dict) -> list:
    art = card["artifact"]
    return [card["experiment_id"], art["id"], card["title"], card["summary"], list(card["tags"]),
            card["identity"]["source_version"], card["label"]["untrusted"], card["label"]["class"], card["session"],
            card["updated_at"], art["bytes"], art["media_type"]]


def _write(state: Path, data: bytes) -> None:
    try:
        if state.is_dir():
            write_bytes(state / CATALOG, data)
    except Exception:
        pass  # a cache: the next reader reads the cards again


def write(state: Path, cards_folder: Path, entries: list[list]) -> None:
    """Under the store's lock, once the cards are as they will stay. A catalog that
    cannot be written is only a slower recall (it reads the cards)."""
    now = stamp(cards_folder)
    if now is not None:
        _write(state, Catalog.of(entries).dump(now))


def forget(state: Path) -> None:
    """A damaged catalog: gone, so the next reader reads the cards."""
    try:
        os.unlink(state / CATALOG)
    except OSError:
        pass


def current(state: Path, cards_folder: Path) -> Catalog | None:
    """The catalog if it is current, else None (its entries' types are checked where used)."""
    now = stamp(cards_folder)
    found, _why = load_marshal(state / CATALOG, _SHAPE)
    if now is None or found is None or found["version"] != VERSION or found["stamp"] != now:
        return None
    if type(found["cards"]) is not list:
        return None
    return Catalog(found["cards"], found["ids"], found["tags"], found["stems"])


def updated(before: Catalog | None, changed: dict[str, dict | None], every) -> list[list]:
    """The entries after `changed` (experiment -> its card now, or None: removed), from
    `before` (the catalog as it was current before the change), or from every card
    (`every()`) when there was none to start from."""
    if before is None:
        return [entry(card) for card in every()]
    kept = [e for e in before.entries if type(e) is list and e and e[0] not in changed]
    return kept + [entry(card) for card in changed.values() if card is not None]


def read(state: Path, cards_folder: Path, check) -> Catalog:
    """The catalog when it is current, else one made from the cards read one by one
    (`check(card, name)`: why a card is unusable, or None; those are left out), and
    written for the next reader."""
    fresh = current(state, cards_folder)
    if fresh is not None:
        return fresh
    before = stamp(cards_folder)  # before the cards are read: a card changed meanwhile leaves it stale
    out = []
    try:
        names = [n[:-5] for n in os.listdir(cards_folder) if n.endswith(".json") and is_experiment_id(n[:-5])]
    except OSError:
        names = []
    for name in names:
        try:
            data = read_state(cards_folder / f"{name}.json")
            card = json.loads(data) if data is not None else None
        except (Unreadable, ValueError, RecursionError):
            continue
        if card is not None and check(card, name) is None:
            out.append(entry(card))
    made = Catalog.of(out)
    if before is not None:
        _write(state, made.dump(before))
    return made
