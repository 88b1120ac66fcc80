"""The ledger's vocabulary: every event kind, its fields and one constructor each (docs/interfaces.md,
"Ledger events"). Keys and their order are the free dicts' these replaced (tests/test_ledger_compat.py). The
TypedDicts cost nothing at run time.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict, cast

from bxmem.store.ledger import edit_item, event, turn_item

DECIDED = "decided"
ATTEMPT = "attempt"
SENT = "sent"
FAILED = "failed"
UNSENT = "unsent"
CANCELLED = "cancelled"
REQUEUED = "requeued"
CREATED = "created"
KEY_REFUSED = "key_refused"
KEY_RESUMED = "key_resumed"
SESSION_GONE = "session_gone"
SESSION_RENEWED = "session_renewed"
DROPPED = "dropped"
REROUTED = "rerouted"
ACCEPTED = "accepted"
KINDS = (
    DECIDED,
    ATTEMPT,
    SENT,
    FAILED,
    UNSENT,
    CANCELLED,
    REQUEUED,
    CREATED,
    KEY_REFUSED,
    KEY_RESUMED,
    SESSION_GONE,
    SESSION_RENEWED,
    DROPPED,
    REROUTED,
    ACCEPTED,
)

TURN, EDIT, CARD = "turn", "edit", "card"  # what a `decided` line decides


class Event(TypedDict):
    v: int
    ev: str
    ts: str


# `class` is a keyword: this one is spelt as a call.
DecidedTurn = TypedDict(
    "DecidedTurn",
    {
        "v": int,
        "ev": Literal["decided"],
        "ts": str,
        "item": str,
        "kind": Literal["turn"],
        "session": str,
        "turn": int,
        "role": "str | None",
        "ws": "str | None",
        "reason": str,
        "peer": "str | None",
        "class": str,
        "untrusted_by": "list[str]",
        "secret_rule": "str | None",
        "log": str,
        "user": "list[list[int]]",
        "reply": "list[int] | None",
        "at": "str | None",
        "macs": NotRequired[dict],
        "unreadable": NotRequired[dict],
    },
)


class _DecidedEdit(Event):
    item: str
    kind: Literal["edit"]
    edit: str
    op: str
    session: str | None
    role: str | None
    ws: str | None
    reason: str
    actions: list[dict]
    journal_line: int
    at: str | None


class DecidedEdit(_DecidedEdit, total=False):
    target: str


class _DecidedCard(Event):
    item: str
    kind: Literal["card"]
    op: str
    experiment: str
    artifact: str
    session: str
    role: str | None
    ws: str | None
    reason: str
    untrusted_by: list[str]
    actions: list[dict]
    at: str | None


class DecidedCard(_DecidedCard, total=False):
    target: str


class Attempt(Event, total=False):
    items: list[str]
    ws: str
    role: str
    session: str | None
    hsession: str
    parts: dict[str, int]


class Sent(Event, total=False):
    item: str
    ws: str
    role: str
    hsession: str
    ids: list[str]
    settled: bool
    results: list[dict]


class Failed(Event, total=False):
    item: str
    ws: str
    status: int | None
    reason: str
    results: list[dict]
    in_doubt: bool


class Unsent(Event):
    items: list[str]
    ws: str
    reason: str


class Cancelled(Event):
    item: str
    ws: str
    by: str


class Requeued(Event):
    item: str


class Created(Event, total=False):
    ws: str
    what: Literal["workspace", "peer", "session"]
    configuration: dict
    role: str
    id: str
    observe_me: bool
    session: str
    n: int
    peers: list[str]


class KeyRefused(Event):
    ws: str
    status: int | None
    secret: str
    key: list[int] | None
    problem: NotRequired[str]


class KeyResumed(Event):
    ws: str
    why: str


class SessionGone(Event):
    ws: str
    session: str
    hsession: str
    status: int


class SessionRenewed(Event):
    ws: str
    session: str
    hsession: str


class Dropped(Event):
    item: str
    ws: str | None
    was: str
    reason: str


class Rerouted(Event):
    item: str
    ws: str
    role: str
    was: str


class Accepted(Event):
    finding: str
    reason: str


# --- decisions ----------------------------------------------------------------------


def decided_turn(
    *,
    session: str,
    turn: int,
    role: str | None,
    ws: str | None,
    reason: str,
    peer: str | None,
    trust_class: str,
    untrusted_by: list[str],
    secret_rule: str | None,
    log: str,
    user: list,
    reply: list | None,
    at: str | None,
    macs: dict | None = None,
    unreadable: dict | None = None,
) -> DecidedTurn:
    """`macs`: the keyed hashes of the lines at `user` and `reply` (send and the index
    check them); `unreadable`: the line of the log that made the turn go nowhere."""
    extra: dict = {}
    if macs is not None:
        extra["macs"] = macs
    if unreadable is not None:
        extra["unreadable"] = unreadable
    return cast(
        DecidedTurn,
        event(
            DECIDED,
            item=turn_item(session, turn),
            kind=TURN,
            session=session,
            turn=turn,
            role=role,
            ws=ws,
            reason=reason,
            peer=peer,
            **{"class": trust_class},
            untrusted_by=untrusted_by,
            secret_rule=secret_rule,
            log=log,
            user=user,
            reply=reply,
            at=at,
            **extra,
        ),
    )


def decided_edit(
    edit_id: str,
    *,
    op: str,
    session: str | None,
    role: str | None,
    ws: str | None,
    reason: str,
    actions: list[dict],
    journal_line: int,
    at: str | None,
    target: object = None,
) -> DecidedEdit:
    """`target` is the journal's `target` of an undo (any value: a missing one is
    recorded as the item `edit:None`, which no edit is)."""
    fields = {"target": edit_item(str(target))} if op == "undo" else {}
    return cast(
        DecidedEdit,
        event(
            DECIDED,
            item=edit_item(edit_id),
            kind=EDIT,
            edit=edit_id,
            op=op,
            session=session,
            role=role,
            ws=ws,
            reason=reason,
            actions=actions,
            journal_line=journal_line,
            at=at,
            **fields,
        ),
    )


def decided_card(
    item: str,
    *,
    op: str,
    experiment: str,
    artifact: str,
    session: str,
    role: str | None,
    ws: str | None,
    reason: str,
    trust_class: str,
    untrusted_by: list[str],
    actions: list[dict],
    at: str | None,
    target: str | None = None,
) -> DecidedCard:
    """A card's remote projection (op `record`), or its retraction (op `undo`, naming
    the card item as `target`, so a card not yet sent is never sent: as an undo of an edit)."""
    fields = {"target": target} if target is not None else {}
    return cast(
        DecidedCard,
        event(
            DECIDED,
            item=item,
            kind=CARD,
            op=op,
            experiment=experiment,
            artifact=artifact,
            session=session,
            role=role,
            ws=ws,
            reason=reason,
            **{"class": trust_class},
            untrusted_by=untrusted_by,
            actions=actions,
            at=at,
            **fields,
        ),
    )


def is_decided(ev: dict, kind: str) -> bool:
    return ev.get("ev") == DECIDED and ev.get("kind") == kind


# --- sending --------------------------------------------------------------------------


def _role(role: str | None) -> dict:
    """The `role` field of the lines that write a workspace; None only to build a line from before it."""
    return {"role": role} if role is not None else {}


def attempt(
    ts: str,
    *,
    items: list[str],
    ws: str,
    role: str | None,
    session: str | None,
    hsession: str | None = None,
    parts: dict[str, int] | None = None,
) -> Attempt:
    """Timed by the sender's clock (`ts`): its in-doubt wait counts from it. `role`:
    what the items were decided as, and so what the workspace is written as."""
    fields: dict = {}
    if hsession is not None:
        fields["hsession"] = hsession
    if parts is not None:
        fields["parts"] = parts
    return cast(Attempt, event(ATTEMPT, ts=ts, items=items, ws=ws, **_role(role), session=session, **fields))


def in_doubt(item: str, ws: str | None, hsessions: list[str] | None = None) -> dict:
    """Not a line: what the outbox keeps for an edit requeued after it did part of
    its work, so that it goes through the in-doubt path, which looks first; with
    `hsessions`, for a turn the outbox had seen settled before the ledger was
    restored (Outbox.inherit): looked for in each of those Honcho sessions."""
    if hsessions:
        return {"ev": ATTEMPT, "items": [item], "ws": ws, "hsession": hsessions[-1], "hsessions": hsessions}
    return {"ev": ATTEMPT, "items": [item], "ws": ws}


def sent_turn(item: str, ws: str, role: str | None, hsession: str, ids: list[str], *, settled: bool = False) -> Sent:
    return cast(
        Sent,
        event(
            SENT, item=item, ws=ws, **_role(role), hsession=hsession, ids=ids, **({"settled": True} if settled else {})
        ),
    )


def sent_edit(item: str, ws: str, role: str | None, results: list[dict]) -> Sent:
    return cast(Sent, event(SENT, item=item, ws=ws, **_role(role), results=results))


def failed(
    item: str, ws: str, status: int | None, reason: str, results: list[dict] | None = None, *, in_doubt: bool = False
) -> Failed:
    return cast(
        Failed,
        event(
            FAILED,
            item=item,
            ws=ws,
            status=status,
            reason=reason,
            **({"results": results} if results else {}),
            **({"in_doubt": True} if in_doubt else {}),
        ),
    )


def unsent(items: list[str], ws: str, reason: str) -> Unsent:
    return cast(Unsent, event(UNSENT, items=items, ws=ws, reason=reason))


def cancelled(item: str, ws: str, by: str) -> Cancelled:
    return cast(Cancelled, event(CANCELLED, item=item, ws=ws, by=by))


def requeued(item: str) -> Requeued:
    return cast(Requeued, event(REQUEUED, item=item))


# --- what bxmem set up in Honcho, and the keys -------------------------------------------


def created_workspace(ws: str, configuration: dict, role: str | None) -> Created:
    """`role`: the role `configuration` was chosen for (honcho.configuration_for)."""
    return cast(Created, event(CREATED, ws=ws, what="workspace", configuration=configuration, **_role(role)))


def created_peer(ws: str, peer: str, observe_me: bool) -> Created:
    return cast(Created, event(CREATED, ws=ws, what="peer", id=peer, observe_me=observe_me))


def created_session(ws: str, hsession: str, session: str, n: int, peers: list[str]) -> Created:
    return cast(Created, event(CREATED, ws=ws, what="session", id=hsession, session=session, n=n, peers=peers))


def key_refused(
    ws: str, status: int | None, secret: str, key: list[int] | None, problem: str | None = None
) -> KeyRefused:
    """Honcho refused the key (status 401/403), or bxmem refused its file (status None, `problem`)."""
    extra = {"problem": problem} if problem is not None else {}
    return cast(KeyRefused, event(KEY_REFUSED, ws=ws, status=status, secret=secret, key=key, **extra))


def key_resumed(ws: str, why: str) -> KeyResumed:
    return cast(KeyResumed, event(KEY_RESUMED, ws=ws, why=why))


# --- what Honcho lost, and the owner's way out (bxmem outbox, bxmem audit --accept) ------


def session_gone(ws: str, session: str, hsession: str, status: int) -> SessionGone:
    return cast(SessionGone, event(SESSION_GONE, ws=ws, session=session, hsession=hsession, status=status))


def session_renewed(ws: str, session: str, hsession: str) -> SessionRenewed:
    return cast(SessionRenewed, event(SESSION_RENEWED, ws=ws, session=session, hsession=hsession))


def dropped(item: str, ws: str | None, was: str, reason: str) -> Dropped:
    return cast(Dropped, event(DROPPED, item=item, ws=ws, was=was, reason=reason))


def rerouted(item: str, ws: str, role: str, was: str) -> Rerouted:
    return cast(Rerouted, event(REROUTED, item=item, ws=ws, role=role, was=was))


def accepted(finding: str, reason: str) -> Accepted:
    return cast(Accepted, event(ACCEPTED, finding=finding, reason=reason))
