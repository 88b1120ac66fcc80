"""The outbox checkpoint's shape, checked whole on load: any other shape is a rebuild, never a crash part-way."""

from __future__ import annotations

from bxmem.formats.shapes import (
    RANGES,
    anything,
    boolean,
    dict_of,
    integer,
    list_of,
    maybe,
    number,
    record,
    set_of,
    string,
)
from bxmem.store.ledger_shapes import ATTEMPT_KEPT, RESULT
from bxmem.store.ledger_shapes import MARK as LEDGER_MARK
from bxmem.store.local_key import TAG_BITS
from bxmem.store.workspace_roles import SHAPE as ROLES

# A pending item is kept as (where its decision is, workspace, session, kind, peer, role): enough to choose and group
# a batch and check its role (trust/write_policy.py). Whole decisions for every pending item would not fit the memory
# target (docs/performance.md, "Memory"): the decision is read back by offset for the items a run sends. `AT` is the
# offset and the keyed hash (local_key.ledger_tag) in one number: 4 bytes an item rather than 40.
AT, WS, SESSION, KIND, PEER, ROLE = range(6)
_TAG_MASK = (1 << TAG_BITS) - 1


def at(offset: int, tag: int) -> int:
    return offset << TAG_BITS | tag


def offset_of(record: tuple) -> int:
    return record[AT] >> TAG_BITS


def tag_of(record: tuple) -> int:
    return record[AT] & _TAG_MASK


def _record_problem(r: object) -> str | None:
    """A pending record's shape; `ws` and `role` as the decision had them (a damaged
    one is held by trust/write_policy.py)."""
    if type(r) is not tuple or len(r) != 6:
        return "not a tuple of 6"
    if type(r[AT]) is not int or r[AT] < 0:
        return "[0]: not a ledger offset and hash"
    for i in (SESSION, KIND, PEER):
        if r[i] is not None and type(r[i]) is not str:
            return f"[{i}]: not a string"
    return None


def _pending(value: object) -> str | None:
    # Written out rather than with formats/shapes.py's combinators: 100,000 pending items are checked on every load.
    if type(value) is not dict:
        return "not an object"
    for item, r in value.items():
        if type(item) is not str:
            return "a key is not a string"
        why = _record_problem(r)
        if why is not None:
            return f"{item}{why}" if why.startswith("[") else f"{item}: {why}"
    return None


_NAME = maybe(string)


def _plain(value: object) -> str | None:
    return None if value is None or type(value) in (str, int, float, bool) else "not a plain value"


# The checkpoint as save() writes it: checked whole on load; any other shape is a rebuild from the ledger.
SHAPE = record(
    {
        "version": integer(0),  # outbox.read_checkpoint checks which first
        "offset": integer(0),
        "ino": maybe(integer(0)),
        "mark": maybe(LEDGER_MARK),
        "key": _NAME,
        "pending": _pending,
        "attempts": dict_of(ATTEMPT_KEPT),
        "failed": dict_of(
            record(
                {"decided": maybe(_record_problem)},
                {"ws": _NAME, "results": list_of(RESULT), "in_doubt": boolean, "attempt": ATTEMPT_KEPT},
            )
        ),
        "setup": dict_of(
            record(
                {
                    "configured": boolean,
                    "peers": list_of(string),
                    "sessions": dict_of(
                        record(
                            {"name": string, "n": integer(1), "peers": list_of(string)},
                            {"gone": boolean, "renew": boolean},
                        )
                    ),
                }
            )
        ),
        "stopped": dict_of(record({"ws": string}, {"key": maybe(list_of(integer(None)))})),
        "backoff": maybe(record({"since": string, "delay": number, "until": number})),
        "last_sent": _NAME,
        "sent_count": integer(0),
        "malformed": integer(0),
        "undone": dict_of(string),
        # Honcho's ids as the ledger recorded them (ledger_shapes.RESULT): checked where they are used.
        "conclusions": dict_of(record({"id": anything, "ws": _NAME, "hsession": _NAME}, {"deleted_by": string})),
        "fleet": dict_of(record({"ws": _NAME, "hsession": _NAME, "ids": anything})),
        "cancelled": integer(0),
        "decided": dict_of(integer(0)),
        "known_turns": dict_of(RANGES),
        "known_other": set_of(string),
        "withdrawn": set_of(string),
        "repeated": integer(0),
        "first_repeated": _NAME,
        "dropped": integer(0),
        "roles": ROLES,
        "hsessions": dict_of(dict_of(string)),
        "named_wrong": dict_of(string),
        # What send last said of each lasting state (send_report.announce): keys of a few plain values.
        "announced": record(
            {}, {"held": list_of(list_of(_plain, length=4)), "in_doubt": list_of(list_of(_plain, length=3))}
        ),
    }
)
