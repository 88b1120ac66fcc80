"""Each ledger line's shape: every field a fold reads, else a malformed line every fold skips alike. Kinds
are spelt out, not imported from ledger_events.py, which imports ledger.py, which reads by these shapes
(tests/test_ledger_shapes.py holds the two lists equal).
"""

from __future__ import annotations

from bxmem.formats.shapes import (
    SPAN,
    Shape,
    anything,
    boolean,
    both,
    dict_of,
    integer,
    list_of,
    maybe,
    one_of,
    problem,
    record,
    string,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

_NAME = maybe(string)
_STRINGS = list_of(string)

TEXT_SPEC = record({"span": SPAN, "field": string}, {"index": integer(0), "mac": string, "key": _NAME})
_DOES = ("conclude", "unconclude", "reconclude", "fleet-message", "retract", "card", "retract-card")
_NAMES_ANOTHER = ("unconclude", "reconclude", "retract", "retract-card")  # `of`: the ref of the action they act on


def action(value: Any) -> str | None:
    """One action of a decided edit (rules.plan_edit and plan_undo, with its text named by span)."""
    why = record(
        {"do": one_of(*_DOES)},
        {"of": string, "about": _NAME, "text": maybe(TEXT_SPEC), "undoes": string, "rev": string},
    )(value)
    if why is None and value["do"] in _NAMES_ANOTHER and "of" not in value:
        return "of: missing"
    return why


ACTIONS = list_of(action)
# Ids Honcho gave are not checked here: an older bxmem recorded them unchecked, and each is checked where used, so a
# forged one fails its own item visibly where skipping the line would hide it.
_HONCHO_IDS = anything
_RESULT = record(
    {"i": integer(0), "do": string},
    {
        "id": _HONCHO_IDS,
        "of": string,
        "deleted": _HONCHO_IDS,
        "was_there": boolean,
        "hsession": _NAME,
        "ids": _HONCHO_IDS,
        "skipped": string,
        "settled": boolean,
    },
)


def RESULT(value: Any) -> str | None:  # a shape, named as the others are
    """What send recorded of one action: a deletion names the action it undid (`of`), as send writes it."""
    why = _RESULT(value)
    if why is None and value["do"] == "unconclude" and "of" not in value:
        return "of: missing"
    return why


_MACS = maybe(record({"key": _NAME, "user": _STRINGS, "reply": _NAME}))

# A decision's `ws` and `role` are not checked here: a damaged one is held, named, by trust/write_policy.py.
_WHERE = {"ws": anything, "role": anything}
DECIDED_TURN = record(
    {
        "ts": string,
        "item": string,
        "session": string,
        "turn": integer(1),
        "reason": string,
        "peer": _NAME,
        "class": string,
        "untrusted_by": _STRINGS,
        "secret_rule": _NAME,
        "log": string,
        "user": list_of(SPAN),
        "reply": maybe(SPAN),
        "at": _NAME,
    },
    {**_WHERE, "macs": _MACS, "unreadable": maybe(record({"line": integer(1), "why": string}))},
)
DECIDED_EDIT = record(
    {
        "ts": string,
        "item": string,
        "edit": string,
        "op": string,
        "session": _NAME,
        "reason": string,
        "actions": ACTIONS,
        "journal_line": integer(0),
        "at": _NAME,
    },
    {**_WHERE, "target": string},
)
DECIDED_CARD = record(
    {
        "ts": string,
        "item": string,
        "op": one_of("record", "undo"),
        "experiment": string,
        "artifact": string,
        "session": string,
        "reason": string,
        "class": string,
        "untrusted_by": _STRINGS,
        "actions": ACTIONS,
        "at": _NAME,
    },
    {**_WHERE, "target": string},
)
SHAPES: dict[str, Shape] = {
    "attempt": record(
        {"ts": string, "items": _STRINGS, "ws": string, "session": _NAME},
        {"hsession": string, "parts": dict_of(integer(1)), "role": _NAME},
    ),
    "sent": record(
        {"ts": string, "item": string, "ws": string},
        {"hsession": string, "ids": _HONCHO_IDS, "settled": boolean, "results": list_of(RESULT), "role": _NAME},
    ),
    "failed": record(
        {"ts": string, "item": string, "ws": _NAME, "status": maybe(integer(None)), "reason": _NAME},
        {"results": list_of(RESULT), "in_doubt": boolean},
    ),
    "unsent": record({"ts": string, "items": _STRINGS, "ws": string, "reason": string}),
    "cancelled": record({"ts": string, "item": string, "ws": string, "by": string}),
    "requeued": record({"ts": string, "item": string}),
    "created": record(
        {"ts": string, "ws": string, "what": one_of("workspace", "peer", "session")},
        {"id": string, "session": string, "n": integer(1), "peers": _STRINGS, "observe_me": boolean, "role": _NAME},
    ),
    "key_refused": record(
        {
            "ts": string,
            "ws": string,
            "status": maybe(integer(None)),
            "secret": string,
            "key": maybe(list_of(integer(None))),
        },
        {"problem": string},
    ),
    "key_resumed": record({"ts": string, "ws": string}, {"why": string}),
    "session_gone": record(
        {"ts": string, "ws": string, "session": string, "hsession": string, "status": maybe(integer(None))}
    ),
    "session_renewed": record({"ts": string, "ws": string, "session": string, "hsession": string}),
    "dropped": record({"ts": string, "item": string, "ws": _NAME, "was": string, "reason": string}),
    "rerouted": record({"ts": string, "item": string, "ws": string, "role": string, "was": _NAME}),
    "accepted": record({"ts": string, "finding": string, "reason": string}),
}
KINDS = ("decided", *SHAPES)


def _turns_have_a_session(ev: Any) -> str | None:
    """An attempt at turns names the Honcho session their lookup lists."""
    if "hsession" not in ev and any(item.startswith("turn:") for item in ev["items"]):
        return "hsession: missing"
    return None


# An attempt as the outbox keeps it: a line's, or what a requeued edit is given (ledger_events.in_doubt).
# What a reader keeps of the ledger as it read it up to its offset (store/ledger.py's Ledger.mark).
MARK = record({"head": string, "tail": string})

# `hsessions`: where a lookup looks for an item the outbox had seen sent before the ledger was
# restored (Outbox.inherit): every Honcho session its Boxmaker session had.
ATTEMPT_KEPT = both(
    record({"items": _STRINGS}, {"ts": string, "hsession": string, "ws": _NAME, "hsessions": list_of(string)}),
    _turns_have_a_session,
)


def event_problem(ev: dict) -> str | None:
    kind = ev.get("ev")
    if kind == "decided":
        what = ev.get("kind", "turn")  # lines from before `kind` are turns
        if what == "turn":
            why = problem(ev, DECIDED_TURN)
            if why is None and ev["item"] != f"turn:{ev['session']}:{ev['turn']}":
                return "item: not the turn's"
            return why
        if what == "edit":
            why = problem(ev, DECIDED_EDIT)
            if why is None and ev["item"] != f"edit:{ev['edit']}":
                return "item: not the edit's"
            return why
        if what == "card":
            why = problem(ev, DECIDED_CARD)
            if why is None and not ev["item"].startswith(f"card:{ev['experiment']}:"):
                return "item: not the card's"
            return why
        return "kind: not turn, edit or card"
    shape = SHAPES.get(kind) if isinstance(kind, str) else None
    if shape is None:
        return "ev: not a kind of event bxmem writes"
    why = problem(ev, shape)
    if why is None and kind == "attempt":
        return _turns_have_a_session(ev)
    if why is None and kind == "created" and ev["what"] != "workspace" and "id" not in ev:
        return "id: missing"
    if why is None and kind == "created" and ev["what"] == "session" and "session" not in ev:
        return "session: missing"
    return why
