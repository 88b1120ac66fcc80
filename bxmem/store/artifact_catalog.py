"""The cards' catalog, `memory/bxmem/artifact-cards.marshal`: what recall searches, one file.

A cache of `memory/artifacts/cards/` (deletable like all of `memory/bxmem/`): written
under the store's lock by whatever changed a card, stamped with the cards folder's
inode, mtime and ctime taken before the cards were read. A reader whose stamp differs
(a card written since, the catalog deleted or damaged) reads the cards themselves and
writes the catalog again, as the config cache is written by whoever validated the
file: a card changed meanwhile changes the folder's stamp, so the catalog is stale
again, never wrong. Each entry keeps its words as recall compares them
(policy/relevance.stems), so a search is a set intersection a card. Light: recall's
lean path loads it.
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
VERSION = 2
# One entry a card: what recall shows and matches, never a path.
FIELDS = ("experiment", "artifact", "title", "summary", "tags", "source_version", "untrusted", "class", "session",
          "updated_at", "bytes", "media_type", "stems")
_SHAPE = record({"version": integer(1), "stamp": list_of(integer(None)), "cards": list_of(list_of(anything))})


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
    words = stems(" ".join([card["title"], card["summary"], *card["tags"], card["identity"]["source_version"]]))
    return [card["experiment_id"], art["id"], card["title"], card["summary"], list(card["tags"]),
            card["identity"]["source_version"], card["label"]["untrusted"], card["label"]["class"], card["session"],
            card["updated_at"], art["bytes"], art["media_type"], frozenset(words)]


def write(state: Path, cards_folder: Path, entries: list[list]) -> None:
    """Under the store's lock, once the cards are as they will stay. A catalog that
    cannot be written is only a slower recall (it reads the cards)."""
    now = stamp(cards_folder)
    if now is None or not state.is_dir():
        return
    try:
        write_bytes(state / CATALOG, seal(marshal.dumps({"version": VERSION, "stamp": now,
                                                          "cards": entries})))
    except Exception:
        pass


def current(state: Path, cards_folder: Path) -> list[list] | None:
    """The catalog's entries if it is current, else None."""
    now = stamp(cards_folder)
    found, _why = load_marshal(state / CATALOG, _SHAPE)
    if now is None or found is None or found["version"] != VERSION or found["stamp"] != now:
        return None
    return [e for e in found["cards"] if len(e) == len(FIELDS)]


def updated(before: list[list] | None, changed: dict[str, dict | None], every) -> list[list]:
    """The entries after `changed` (experiment -> its card now, or None: removed), from
    `before` (the catalog as it was current before the change), or from every card
    (`every()`) when there was none to start from."""
    if before is None:
        return [entry(card) for card in every()]
    kept = [e for e in before if e[0] not in changed]
    return kept + [entry(card) for card in changed.values() if card is not None]


def read(state: Path, cards_folder: Path, check) -> list[list]:
    """Every usable card's entry: the catalog when it is current, else the cards read one
    by one (`check(card, name)`: why a card is unusable, or None; those are left out)."""
    fresh = current(state, cards_folder)
    if fresh is not None:
        return fresh
    before = stamp(cards_folder)  # before the cards are read: a card changed meanwhile leaves it stale
    out = []
    try:
        names = [n[:-5] for n in os.listdir(cards_folder) if n.endswith(".json") and is_experiment_id(n[:-5])]
    except OSError:
        return []
    for name in names:
        try:
            data = read_state(cards_folder / f"{name}.json")
            card = json.loads(data) if data is not None else None
        except (Unreadable, ValueError, RecursionError):
            continue
        if card is not None and check(card, name) is None:
            out.append(entry(card))
    if before is not None and state.is_dir():
        try:
            write_bytes(state / CATALOG, seal(marshal.dumps({"version": VERSION, "stamp": before, "cards": out})))
        except Exception:
            pass  # a cache: the next reader reads the cards again
    return out
