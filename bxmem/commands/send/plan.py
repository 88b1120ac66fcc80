"""`send`'s planner: reads the outbox and nothing else (no HTTP, no ledger, no clock), so a run's order and
grouping are tested on an outbox alone (tests/test_send_plan.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bxmem.honcho.api import MAX_BATCH
from bxmem.store.outbox import KIND, PEER, ROLE, SESSION, WS, Outbox, light
from bxmem.store.workspace_roles import set_up_for
from bxmem.trust.send_retry import ALONE
from bxmem.trust.write_policy import Holds, Now, hold_pending, roles_of

if TYPE_CHECKING:
    from bxmem.commands.send.threaded_calls import Call
    from bxmem.config.loader import Config
    from bxmem.trust.send_retry import Hold


class Tally(Protocol):
    sent: int
    messages: int
    requests: int
    failed: int
    outage: str | None
    waiting_until: float | None
    stopped: list[str]
    pending: int | None
    held: int
    held_by_config: list[dict]
    backoff: dict | None
    refused: list[dict]
    in_doubt: list[dict]
    said: set
    refolded: bool


class LocalFailure(Exception):
    """An item that cannot be sent for a reason found here, not by Honcho."""


@dataclass
class Group:
    ws: str
    session: str  # the Boxmaker session
    hsession: str  # the Honcho session
    n: int
    peers: list[str]
    new_session: bool
    items: list[dict]
    messages: dict[str, list[dict]]
    # Its peers and session being created on the workspace's second connection while the group before it is posted:
    # idempotent creates, recorded once done, so one abandoned is created again next run, harmlessly.
    ahead: Call | None = None


@dataclass
class Unit:
    """One piece of a run's work: an edit or an in-doubt item (group None), or a group."""

    ws: str
    item: dict
    group: Group | None


def checked_against(config: Config, box: Outbox) -> Now:
    written = {ws: entry["written"] for ws, entry in box.roles.items()}
    honcho = config.honcho  # None (local-only): no workspace is configured, so every item is held
    return Now(
        roles_of((ws.role, ws.name) for ws in config.workspaces()),
        written,
        honcho.agent if honcho else "",
        honcho.owner if honcho else None,
    )


def sendable(box: Outbox, now: Now, decision_of: Callable[[str], dict]) -> tuple[list[str], Holds]:
    """Pending items in outbox order that may go now, and those the configuration holds (write_policy.hold_pending).
    `decision_of(item)` reads an edit's whole decision, for the workspaces of what it deletes or retracts. Items
    of a workspace whose key was refused wait too, without being held: sync shows the refusal."""

    def decision(key: str) -> dict:  # to the workspace the outbox names: the owner may have re-routed it
        found = decision_of(key)
        return found if found.get("ws") == box.pending[key][WS] else {**found, "ws": box.pending[key][WS]}

    pending = ((key, r[WS], r[ROLE], r[KIND], r[PEER]) for key, r in box.pending.items())
    holds = hold_pending(pending, now, decision, box.conclusions, box.fleet)
    queue = [key for key, r in box.pending.items() if key not in holds.held and r[WS] not in box.stopped]
    return queue, holds


_GONE = " was deleted on the server (bxmem outbox resend sends it to a new one)"


def session_gone_reason(hsession: str) -> str:
    return f"its Honcho session {hsession}{_GONE}"


def is_session_gone(reason: object) -> bool:
    return isinstance(reason, str) and reason.startswith("its Honcho session ") and reason.endswith(_GONE)


_NUMBERED = re.compile(r"-[0-9]+\Z")


def session_name(session: str, n: int) -> str:
    """The name of the n-th Honcho session (n from 1) of Boxmaker session `session`:

    | Boxmaker session | n | Honcho session |
    | town             | 1 | town           |
    | town             | 2 | town-2         |
    | town-2           | 1 | town-2-1       |
    | town-2           | 2 | town-2-2       |

    One to one, though both alphabets are [A-Za-z0-9_-]: a name ending in
    `-<digits>` is never a first session of its own name, so `-1` after one is
    the first session of what precedes it, and any other `-<n>` (n from 2, no
    leading zero) the n-th of what precedes it. Sessions created before this
    naming keep their names (the ledger's `created` lines, `target`)."""
    if n == 1 and not _NUMBERED.search(session):
        return session
    return f"{session}-{n}"


def next_session(session: str, n: int, taken: Mapping[str, str]) -> tuple[str, int]:
    """The name and number of Boxmaker `session`'s n-th Honcho session, or the next
    one whose name no Honcho session in the workspace has yet (`taken`: every name
    the ledger used there). Only a name given before this naming can be taken:
    the first session of a Boxmaker session named `town-2` was `town-2`, the name
    `town`'s second now has."""
    name = session_name(session, n)
    while name in taken:
        n += 1
        name = session_name(session, n)
    return name, n


def target(
    known: dict | None, peer: str, session: str, agent: str, taken: Mapping[str, str]
) -> tuple[str, int, list[str], bool]:
    """The Honcho session for a turn of `peer` in Boxmaker `session`, given the one `known` so far: that one, or the
    next (`session_name`) when the speaker is not yet in it, or when Honcho lost it and the owner resends its
    turns (a new session, its peers from scratch). Returns (name, n, peers, whether it is new)."""
    if known and known.get("gone"):
        name, n = next_session(session, known["n"] + 1, taken)
        return name, n, sorted({agent, peer}), True
    if known and peer in known["peers"]:
        return known["name"], known["n"], known["peers"], False
    if known and known["peers"] == [agent]:
        # Made for a memory write before anyone spoke: no speaker's view is fixed
        # in it yet, so the first speaker joins it rather than starting the next.
        return known["name"], known["n"], sorted({agent, peer}), True
    name, n = next_session(session, known["n"] + 1 if known else 1, taken)
    peers = sorted(set(known["peers"] if known else [agent]) | {peer})
    return name, n, peers, True


def missing_peers(box: Outbox, group: Group) -> list[str]:
    known = box.workspace(group.ws)["peers"]
    return [peer for peer in group.peers if peer not in known]


def opening(group: Group, missing: list[str], agent: str) -> list[tuple]:
    calls: list[tuple] = [("create_peer", peer, peer != agent) for peer in missing]
    calls.append(
        (
            "create_session",
            group.hsession,
            {peer: peer != agent for peer in group.peers},
            {"bx_session": group.session, "source": "bxmem"},
        )
    )
    return calls


class Planner:
    """A run's work in outbox order, one unit at a time, within `batch` items.

    A group pulls the later turns of its own Honcho session from the whole
    outbox: decide interleaves sessions, so a window of `batch` items would
    hold one turn of each and cost a request per turn. Items are kept as their
    keys and made into dicts only when planned: a large outbox would otherwise
    cost a dict per pending item."""

    def __init__(
        self,
        box: Outbox,
        queue: list[str],
        batch: int,
        hold: Hold,
        agent: str,
        messages_for: Callable[[dict], list[dict]],
        fail: Callable[..., None],
    ) -> None:
        self.box, self.batch, self.hold, self.agent = box, batch, hold, agent
        self.messages_for, self.fail = messages_for, fail
        self.queue, self.next = queue, 0
        self.by_session: dict[tuple[str, str], list[str]] = {}
        for key in queue:
            record = box.pending[key]
            if record[KIND] not in ALONE:
                self.by_session.setdefault((record[WS], record[SESSION]), []).append(key)
        self.done: set[str] = set()
        self.handled = 0

    def next_unit(self) -> Unit | None:
        """The next piece of work in outbox order: an edit, an in-doubt turn to settle,
        or a group of turns for one Honcho session; None when the batch is full or done."""
        while self.next < len(self.queue):
            room = self.batch - self.handled
            if room <= 0:
                return None
            key = self.queue[self.next]
            self.next += 1
            item = None if key in self.done else self._pending(key)
            if item is None or item["ws"] in self.box.stopped or self.hold.waits(item):
                continue
            if item.get("kind") in ALONE or item["item"] in self.box.attempts:
                self.done.add(item["item"])
                self.handled += 1
                return Unit(item["ws"], item, None)
            group = self._group(item, self.by_session[(item["ws"], item["session"])], room)
            if group is None:
                self.handled += 1
                continue
            self.done.update(i["item"] for i in group.items)
            self.handled += len(group.items)
            return Unit(item["ws"], item, group)
        return None

    def peek(self) -> dict | None:
        for at in range(self.next, len(self.queue)):
            key = self.queue[at]
            item = None if key in self.done else self._pending(key)
            if item is not None and item["ws"] not in self.box.stopped and not self.hold.waits(item):
                return item
        return None

    def plan_ahead(self, current: Group) -> tuple[Unit | None, bool]:
        """The next unit, planned while `current` is being posted (its attempt and
        created lines are written by then), and whether its new session may be
        opened now, on the workspace's second connection. Only a group of another
        Boxmaker session, in a workspace already set up, is planned early: an edit
        may create sessions, and the next group of the same session depends on
        what `current` leaves behind."""
        following = self.peek()
        if (
            following is None
            or following.get("kind") in ALONE
            or following["item"] in self.box.attempts
            or (following["ws"], following["session"]) == (current.ws, current.session)
            or not set_up_for(self.box.roles, following["ws"], following["role"])
        ):
            return None, False
        unit = self.next_unit()  # `following` itself, unless it fails locally: then whatever comes next
        group = unit.group if unit is not None else None
        opens = (
            group is not None
            and group.new_session
            and set_up_for(
                self.box.roles, group.ws, group.items[0]["role"]
            )  # nothing is created before its configuration
            and (group.ws, group.session) != (current.ws, current.session)
        )
        return unit, opens

    def _pending(self, key: str) -> dict | None:
        record = self.box.pending.get(key)
        return None if record is None else light(key, record)

    def _group(self, first: dict, session_keys: list[str], room: int) -> Group | None:
        known = self.box.workspace(first["ws"])["sessions"].get(first["session"])
        if known and known.get("gone") and not known.get("renew"):  # until the owner resends it: no request
            self.fail(first, session_gone_reason(known["name"]), quiet=True)  # the gone session was said once
            return None
        try:
            messages = {first["item"]: self.messages_for(first)}
        except LocalFailure as exc:
            self.fail(first, str(exc))
            return None
        name, n, peers, new = target(
            known, first["peer"], first["session"], self.agent, self.box.hsessions.get(first["ws"], {})
        )
        group = Group(first["ws"], first["session"], name, n, peers, new, [first], messages)
        count = len(messages[first["item"]])
        for key in session_keys:
            if len(group.items) >= room:
                break
            other = None if key == first["item"] or key in self.done else self._pending(key)
            if other is None:
                continue
            # Keep the session's order: stop at the first item that cannot join.
            if other["item"] in self.box.attempts or other["peer"] not in peers:
                break
            try:
                more = self.messages_for(other)
            except LocalFailure as exc:
                self.fail(other, str(exc))
                self.done.add(other["item"])
                continue
            if count + len(more) > MAX_BATCH:
                break
            group.items.append(other)
            group.messages[other["item"]] = more
            count += len(more)
        return group
