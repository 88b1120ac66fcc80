"""What a fold from the ledger's start keeps of what the outbox knew (Honcho did not go back with the ledger),
and the order it puts each session's turns and the edits back in.
"""

from __future__ import annotations

from typing import Protocol

from bxmem.formats import turn_ranges
from bxmem.store.ledger import turn_item
from bxmem.store.ledger_events import EDIT, TURN, in_doubt
from bxmem.store.outbox_shape import KIND, SESSION, WS
from bxmem.store.workspace_roles import merge as merge_roles


class Box(Protocol):
    """The outbox's fields these read and write (store/outbox.py's Outbox)."""

    pending: dict[str, tuple]
    attempts: dict[str, dict]
    failed: dict[str, dict]
    setup: dict[str, dict]
    stopped: dict[str, dict]
    backoff: dict | None
    conclusions: dict[str, dict]
    fleet: dict[str, dict]
    undone: dict[str, str]
    known_turns: dict[str, list[list[int]]]
    known_other: set[str]
    withdrawn: set[str]
    roles: dict[str, dict]
    hsessions: dict[str, dict[str, str]]
    announced: dict

    def workspace(self, ws: str) -> dict: ...


def knows(known_turns: dict[str, list[list[int]]], known_other: set[str], item: str) -> bool:
    kind, _, rest = item.partition(":")
    session, _, number = rest.rpartition(":")
    if kind == TURN and session and number.isascii() and number.isdigit():
        return turn_ranges.has(known_turns.get(session, []), int(number))
    return item in known_other


def inherit(new: Box, old: Box) -> int:
    """Keep in `new` (the ledger folded again) what `old` knew that the ledger may have lost (docs/design.md's threat
    model, "The owner's own hands"). Returns how many items were put in doubt."""
    for ws, was in old.setup.items():
        now = new.workspace(ws)
        now["configured"] = now["configured"] or was["configured"]
        now["peers"] += [peer for peer in was["peers"] if peer not in now["peers"]]
        for session, known in was["sessions"].items():
            mine = now["sessions"].get(session)
            if mine is None or known["n"] > mine["n"]:
                now["sessions"][session] = known
    for ws, names in old.hsessions.items():
        for name, session in names.items():
            new.hsessions.setdefault(ws, {}).setdefault(name, session)
    merge_roles(new.roles, old.roles)
    for mine, theirs in (
        (new.stopped, old.stopped),
        (new.conclusions, old.conclusions),
        (new.fleet, old.fleet),
        (new.undone, old.undone),
    ):
        _keep(mine, theirs)
    new.backoff = new.backoff or old.backoff
    new.announced = old.announced
    new.withdrawn |= old.withdrawn
    doubted = 0
    for item in list(new.pending):
        if item in new.withdrawn:
            del new.pending[item]
            new.attempts.pop(item, None)
        elif item in old.pending:
            if item in old.attempts and item not in new.attempts:
                new.attempts[item] = old.attempts[item]
        elif item in old.failed:
            new.failed[item] = {**old.failed[item], "decided": new.pending.pop(item)}
        elif knows(old.known_turns, old.known_other, item):
            lookup = _lookup(old, item, new.pending[item])
            if lookup is not None:
                new.attempts[item] = lookup
                doubted += 1
    for session, numbers in old.known_turns.items():
        if new.known_turns.get(session) == numbers:
            continue
        for low, high in numbers:
            for n in range(low, high + 1):
                key = turn_item(session, n)
                if key not in old.pending and key not in old.failed:
                    turn_ranges.add(new.known_turns.setdefault(session, []), n)
    for key in old.known_other:
        if key not in old.pending and key not in old.failed:
            new.known_other.add(key)
    return doubted


def _keep(mine: dict, theirs: dict) -> None:
    for key, value in theirs.items():
        mine.setdefault(key, value)


def _lookup(old: Box, item: str, record: tuple) -> dict | None:
    """What puts `item`, which `old` had seen settled, in doubt: an edit looks before it
    writes (ledger_events.in_doubt); a turn is looked for in every Honcho session its
    Boxmaker session had. None when it had none: never sent as a turn."""
    ws = record[WS]
    if record[KIND] == EDIT:
        return in_doubt(item, ws)
    names = [name for name, session in old.hsessions.get(ws, {}).items() if session == record[SESSION]]
    return in_doubt(item, ws, names) if names else None


def in_order(pending: dict[str, tuple], order: dict[str, object]) -> dict[str, tuple]:
    """`pending` with each session's turns (a workspace's, by turn number) and the edits
    (by journal line, `order`) back in their order, in the places they hold: a ledger
    sorted or with lines moved would otherwise have send write a session's turns out of
    order, or a remove before the add it removes."""
    places: dict[object, list[int]] = {}
    keys = list(pending)
    for n, item in enumerate(keys):
        record = pending[item]
        # repr: a damaged decision's workspace or session may be any value (it is held, not sent)
        places.setdefault("edits" if record[KIND] == EDIT else repr((record[WS], record[SESSION])), []).append(n)
    moved = list(keys)
    for slots in places.values():
        ranked = sorted((keys[n] for n in slots), key=lambda item: _rank(order.get(item)))
        for n, item in zip(slots, ranked, strict=True):
            moved[n] = item
    return pending if moved == keys else {item: pending[item] for item in moved}


def _rank(n: object) -> int:
    return n if type(n) is int else -1  # a line without one (an older version's) keeps its place first
