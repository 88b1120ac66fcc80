"""The cards' catalog recall searches, a cache stamped with the cards folder's inode, mtime and ctime taken
before the cards were read: a card changed meanwhile changes the stamp, so the catalog is stale, never wrong.
A search reads a few entries, whatever the number of cards. Light: recall's lean path loads it.
"""

from __future__ import annotations

import json
import marshal
import os
import stat
from array import array
from pathlib import Path

from bxmem.formats.shapes import integer, list_of, record
from bxmem.retrieval.relevance import stems
from bxmem.start.marshal_seal import seal
from bxmem.store.files import Unreadable, load_marshal, open_regular, read_state, write_bytes
from bxmem.trust.artifact_rules import is_experiment_id, object_folder

CATALOG = "artifact-cards.marshal"
ENTRIES = "artifact-cards.entries"
VERSION = 6
ID_KEY = 20  # characters of an id an index is keyed by: `exp_` or `art_` and 16 of base32
# One entry a card: what recall shows and matches, never a path.
FIELDS = (
    "experiment",
    "artifact",
    "title",
    "summary",
    "tags",
    "source_version",
    "untrusted",
    "class",
    "session",
    "updated_at",
    "bytes",
    "media_type",
)
_TYPES = (str, str, str, str, list, str, bool, str, str, str, int, str)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # one, not one a call: 10,000 entries


def _type(kind: type, what: str):
    def check(value: object) -> str | None:  # the contents are checked where they are used
        return None if type(value) is kind else f"not {what}"

    return check


_SHAPE = record(
    {
        "version": integer(1),
        "stamp": list_of(integer(None)),
        "entries": list_of(integer(None)),
        "offsets": _type(bytes, "bytes"),
        "ids": _type(dict, "an object"),
        "tags": _type(dict, "an object"),
        "stems": _type(dict, "an object"),
    }
)


class Damaged(Exception):
    """The catalog's entries or indexes are not what they should be: the cards are read again."""


def _packed(numbers: list[int]) -> bytes:
    return array("I", numbers).tobytes()


class Catalog:
    """Entries newest first (entry number = recency rank), read from `blob` (bytes, or a
    descriptor of the entries file) by offset; indexes: an id's first ID_KEY characters,
    a casefolded tag, a stem -> packed entry numbers."""

    def __init__(self, blob: bytes | int, offsets: bytes, ids: dict, tags: dict, words: dict) -> None:
        self.blob, self.ids, self.tags, self.words = blob, ids, tags, words
        self.offsets = array("Q")
        if len(offsets) % self.offsets.itemsize:
            raise Damaged
        self.offsets.frombytes(offsets)
        self.count = max(0, len(self.offsets) - 1)

    @classmethod
    def of(cls, entries: list[list]) -> Catalog:
        entries = sorted(entries, key=lambda e: e[9], reverse=True)  # updated_at
        texts = [_ENCODER.encode(e).encode("utf-8") for e in entries]
        offsets = [0]
        for text in texts:
            offsets.append(offsets[-1] + len(text))
        ids: dict[str, list[int]] = {}
        tags: dict[str, list[int]] = {}
        words: dict[str, list[int]] = {}
        for at, e in enumerate(entries):
            for ident in {e[0][:ID_KEY], e[1][:ID_KEY]}:
                ids.setdefault(ident, []).append(at)
            for tag in {t.casefold() for t in e[4]}:
                tags.setdefault(tag, []).append(at)
            for stem in stems(" ".join([e[2], e[3], *e[4], e[5]])):
                words.setdefault(stem, []).append(at)
        return cls(
            b"".join(texts),
            array("Q", offsets).tobytes(),
            *({k: _packed(v) for k, v in index.items()} for index in (ids, tags, words)),
        )

    def named(self, index: dict, key: str) -> array:
        found = index.get(key, b"")
        if type(found) is not bytes or len(found) % 4:
            raise Damaged
        numbers = array("I")
        numbers.frombytes(found)
        if numbers and max(numbers) >= self.count:
            raise Damaged
        return numbers

    def with_id(self, ident: str) -> list[int]:
        return [at for at in self.named(self.ids, ident[:ID_KEY]) if ident in self.entry(at)[:2]]

    def entry(self, at: int) -> list:
        try:
            start, end = self.offsets[at], self.offsets[at + 1]
            text = self.blob[start:end] if isinstance(self.blob, bytes) else os.pread(self.blob, end - start, start)
            e = json.loads(text)
        except (ValueError, RecursionError, IndexError, OSError, OverflowError):
            raise Damaged from None
        if (
            type(e) is not list
            or len(e) != len(_TYPES)
            or not all(type(f) is t for f, t in zip(e, _TYPES, strict=True))
        ):
            raise Damaged
        return e

    def entries(self) -> list[list]:
        return [self.entry(at) for at in range(self.count)]

    def close(self) -> None:
        if isinstance(self.blob, int):
            os.close(self.blob)
            self.blob = b""


def stamp(cards_folder: Path) -> list[int] | None:
    try:
        st = os.lstat(cards_folder)
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


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
    return [
        card["experiment_id"],
        art["id"],
        card["title"],
        card["summary"],
        list(card["tags"]),
        card["identity"]["source_version"],
        card["label"]["untrusted"],
        card["label"]["class"],
        card["session"],
        card["updated_at"],
        art["bytes"],
        art["media_type"],
    ]


def _write(state: Path, made: Catalog, at_stamp: list[int]) -> None:
    """The entries file, then the index naming it (a crash between leaves an index that
    names another entries file: stale, read again)."""
    assert isinstance(made.blob, bytes)
    try:
        if not state.is_dir():
            return
        write_bytes(state / ENTRIES, made.blob)
        entries = _identity(os.lstat(state / ENTRIES))
        write_bytes(
            state / CATALOG,
            seal(
                marshal.dumps(
                    {
                        "version": VERSION,
                        "stamp": at_stamp,
                        "entries": entries,
                        "offsets": made.offsets.tobytes(),
                        "ids": made.ids,
                        "tags": made.tags,
                        "stems": made.words,
                    }
                )
            ),
        )
    except Exception:
        pass  # a cache: the next reader reads the cards again


def write(state: Path, cards_folder: Path, entries: list[list]) -> None:
    """Under the store's lock, once the cards are as they will stay. A catalog that
    cannot be written is only a slower recall (it reads the cards)."""
    now = stamp(cards_folder)
    if now is not None:
        _write(state, Catalog.of(entries), now)


def forget(state: Path) -> None:
    for name in (CATALOG, ENTRIES):
        try:
            os.unlink(state / name)
        except OSError:
            pass


def current(state: Path, cards_folder: Path) -> Catalog | None:
    """The catalog if it is current, its entries file the one it names, else None (its
    contents are checked where they are used). The caller closes it."""
    now = stamp(cards_folder)
    found, _why = load_marshal(state / CATALOG, _SHAPE)
    if now is None or found is None or found["version"] != VERSION or found["stamp"] != now:
        return None
    try:
        fd = open_regular(state / ENTRIES, os.O_RDONLY)
    except OSError:
        return None
    try:
        if _identity(os.fstat(fd)) != found["entries"]:
            raise Damaged
        return Catalog(fd, found["offsets"], found["ids"], found["tags"], found["stems"])
    except Damaged:
        os.close(fd)
        return None


def updated(before: Catalog | None, changed: dict[str, dict | None], every) -> list[list]:
    """The entries after `changed` (experiment -> its card now, or None: removed), from `before` (the catalog current
    before the change), or from every card (`every()`) when there is no usable `before`."""
    if before is not None:
        try:
            kept = [e for e in before.entries() if e[0] not in changed]
            return kept + [entry(card) for card in changed.values() if card is not None]
        except Damaged:
            pass
        finally:
            before.close()
    return [entry(card) for card in every()]


def read(state: Path, cards_folder: Path, check) -> Catalog:
    """The catalog when current, else one made from the cards (those `check(card, name)` finds unusable left out) and
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
        _write(state, made, before)
    return made
