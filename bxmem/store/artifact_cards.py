"""Experiment cards, their projections and pending markers: checked whole when written and read (never
guessed at: `CardUnusable`), replaced whole, `revision` one more each time, under the store's lock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from bxmem.errors import StorageError
from bxmem.formats.shapes import boolean, integer, list_of, maybe, one_of, problem, record, string
from bxmem.store.artifacts import Store, listing, remove_file
from bxmem.store.files import Unreadable, fsync_dir, read_state, write_all
from bxmem.trust.artifact_rules import (
    CARD_SCHEMA,
    MAX_SUMMARY,
    MAX_TAG,
    MAX_TAGS,
    MAX_TITLE,
    artifact_id,
    experiment_id,
    is_experiment_id,
    revision,
)

_BOUNDED = {"title": MAX_TITLE, "summary": MAX_SUMMARY}
SHAPE = record(
    {
        "schema": string,
        "revision": integer(1),
        "experiment_id": string,
        "identity": record(
            {
                "schema": integer(1),
                "agent": maybe(string),
                "artifact": string,
                "query_fingerprint": maybe(string),
                "source_version": string,
            }
        ),
        "artifact": record(
            {"id": string, "sha256": string, "bytes": integer(0), "media_type": string, "created_at": string}
        ),
        "title": string,
        "summary": string,
        "tags": list_of(string),
        "session": string,
        "exported_as": string,
        "label": record({"untrusted": boolean, "class": one_of("public", "private", "secret")}),
        "created_at": string,
        "updated_at": string,
        "bxmem_version": string,
        "remote": list_of(
            record(
                {
                    "item": string,
                    "rev": string,
                    "role": maybe(one_of("trusted", "untrusted")),
                    "ws": maybe(string),
                    "reason": string,
                    "class": string,
                    "untrusted_by": list_of(string),
                    "state": one_of("pending", "queued", "local-only"),
                    "at": string,
                },
                {"ledger_at": integer(0)},
            )
        ),
    }
)


class CardUnusable(Exception):
    """A card file bxmem will not use; the message says why (never its text)."""


def card_problem(card: object, name: str | None = None) -> str | None:
    if isinstance(card, dict) and card.get("schema") != CARD_SCHEMA:
        return f"schema {str(card.get('schema'))[:40]!r} is not {CARD_SCHEMA} (a card of another version is not guessed at)"
    why = problem(card, SHAPE)
    if why is not None:
        return why
    assert isinstance(card, dict)
    ident, art = card["identity"], card["artifact"]
    if (
        experiment_id(ident["agent"], ident["artifact"], ident["query_fingerprint"], ident["source_version"])
        != card["experiment_id"]
    ):
        return "experiment_id: not the id of its identity"
    if name is not None and name != card["experiment_id"]:
        return "experiment_id: not the card file's name"
    try:
        digest = bytes.fromhex(art["sha256"])
    except ValueError:
        return "artifact.sha256: not hex"
    if len(digest) != 32 or artifact_id(digest) != art["id"] or art["id"] != ident["artifact"]:
        return "artifact.id: not the id of its SHA-256, or not its identity's"
    for field, limit in _BOUNDED.items():
        if len(card[field]) > limit:
            return f"{field}: over {limit} characters"
    if len(card["tags"]) > MAX_TAGS or any(len(t) > MAX_TAG for t in card["tags"]):
        return "tags: more or longer than allowed"
    return None


class Cards:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.folder = store.folder("cards")

    def path(self, experiment: str) -> os.PathLike[str]:
        if not is_experiment_id(experiment):
            raise ValueError(f"not an experiment id: {experiment!r}")
        return self.folder / f"{experiment}.json"

    def read(self, experiment: str) -> dict | None:
        try:
            data = read_state(self.folder / f"{experiment}.json")
        except Unreadable as exc:
            raise CardUnusable(f"card {experiment}: {exc}") from None
        if data is None:
            return None
        try:
            card = json.loads(data)
        except (ValueError, RecursionError):
            raise CardUnusable(f"card {experiment}: not valid JSON") from None
        why = card_problem(card, experiment)
        if why is not None:
            raise CardUnusable(f"card {experiment}: {why}")
        return card

    def write(self, card: dict, previous: int | None) -> None:
        """Replace the card whole, under the store's lock; `previous` is the revision
        it replaces (None: a new card), so a change made meanwhile is never lost."""
        experiment = card["experiment_id"]
        current = self.read(experiment)
        if (current["revision"] if current else None) != previous:
            raise StorageError(f"card {experiment} changed while it was written (another record of it); run again")
        why = card_problem(card, experiment)
        if why is not None:
            raise ValueError(f"a card bxmem would not read back: {why}")
        _replace(
            self.store,
            self.folder / f"{experiment}.json",
            json.dumps(card, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8"),
        )

    def remove(self, experiment: str) -> bool:
        removed = remove_file(self.folder / f"{experiment}.json")
        if removed:
            fsync_dir(self.folder)
        return removed

    def names(self) -> list[str]:
        return sorted(
            e.name[:-5] for e in listing(self.folder) if e.name.endswith(".json") and is_experiment_id(e.name[:-5])
        )

    def count(self) -> int:
        return len(self.names())

    def all(self) -> Iterator[tuple[str, dict | None, str | None]]:
        for name in self.names():
            try:
                card = self.read(name)
            except CardUnusable as exc:
                yield name, None, str(exc)
                continue
            if card is not None:
                yield name, card, None

    # --- projections: what a card's outbox item sends, kept until it has gone ---------------

    def write_projection(self, experiment: str, text: str) -> str:
        rev = revision(text)
        path = self.store.folder("projections") / f"{experiment}.{rev}.txt"
        if not path.exists() or self.read_projection(experiment, rev) != text:
            _replace(self.store, path, text.encode("utf-8"))
        return rev

    def read_projection(self, experiment: str, rev: str) -> str | None:
        """The projection's text, only if it is still the one its revision names; None otherwise."""
        try:
            data = read_state(self.store.folder("projections") / f"{experiment}.{rev}.txt")
        except Unreadable:
            return None
        if data is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return text if revision(text) == rev else None

    def remove_projection(self, experiment: str, rev: str) -> None:
        remove_file(self.store.folder("projections") / f"{experiment}.{rev}.txt")

    def projections(self) -> list[tuple[str, str]]:
        out = []
        for entry in listing(self.store.folder("projections")):
            exp, _, rest = entry.name.partition(".")
            if is_experiment_id(exp) and rest.endswith(".txt"):
                out.append((exp, rest[:-4]))
        return out

    # --- what an experiment decided before an `artifact rm`: a later record never reuses its items ---

    def retire(self, experiment: str, items: list[str]) -> None:
        known = sorted(self.retired(experiment) | set(items))
        _replace(self.store, self.store.folder("removed") / f"{experiment}.json", json.dumps(known).encode("utf-8"))

    def retired(self, experiment: str) -> set[str]:
        try:
            data = read_state(self.store.folder("removed") / f"{experiment}.json")
            items = json.loads(data) if data is not None else []
        except (Unreadable, ValueError, RecursionError):
            items = []  # damaged: the ledger's fold ignores a second decision of an item anyway
        return {i for i in items if isinstance(i, str)} if isinstance(items, list) else set()

    # --- pending markers: a card whose outbox line may not be written yet ---------------------

    def mark_pending(self, experiment: str) -> None:
        folder = self.store.folder("pending")
        fd = os.open(folder / experiment, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)
        fsync_dir(folder)

    def clear_pending(self, experiment: str) -> None:
        if remove_file(self.store.folder("pending") / experiment):
            fsync_dir(self.store.folder("pending"))

    def pending(self) -> list[str]:
        return sorted(e.name for e in listing(self.store.folder("pending")) if is_experiment_id(e.name))


def _replace(store: Store, path: os.PathLike[str], data: bytes) -> None:
    fd, temp = store.new_temp("card")
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        fsync_dir(os.path.dirname(path))
    except OSError as exc:
        remove_file(temp)
        raise StorageError(f"cannot write in the artifact store: {exc.strerror}") from None
