"""When `send` tries again: the outage backoff, and when an in-doubt item may be looked up.

Delivery is at-least-once with duplicate defence (seed 002 section 12.2): an
item whose request got no answer is looked up in Honcho by its metadata
before anything is sent again. A lookup can only see what the server has
stored, so it is made once the server can no longer be working on the
request: `settle_wait_s()` after the attempt line was written. Until then the
item waits, and so does everything that must not overtake it (`Hold`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

FIRST_DELAY_S = 5.0
MAX_DELAY_S = 600.0


def next_backoff(previous: dict | None, now: float, since: str, rng: random.Random) -> dict:
    """The backoff after one more failed try: the nominal delay doubles from 5 s to
    10 minutes, and the wait actually taken is drawn around it, so a fleet that met the
    same outage does not come back at the same instants."""
    delay = FIRST_DELAY_S if previous is None else min(previous["delay"] * 2, MAX_DELAY_S)
    return {"since": previous["since"] if previous else since, "delay": delay, "until": now + jittered(delay, rng)}


def jittered(delay: float, rng: random.Random) -> float:
    """A wait between half and one and a half times `delay`, kept within 5 s and 10 min."""
    low, high = max(FIRST_DELAY_S, delay / 2), min(MAX_DELAY_S, delay * 1.5)
    return rng.uniform(low, high)


def settle_wait_s() -> float:
    """How long after its attempt line an in-doubt request may still be acted on by Honcho.

    The client gives up on a request at its deadline at the latest, connect + write +
    read timeouts (honcho.request_deadline_s: a trickling answer too, honcho/http.py);
    one more read timeout is left for the server to finish what it had already
    received. That is 95 s with the defaults, more than twice the read timeout. Read
    from honcho/client.py on each call, so tests can shorten it."""
    from bxmem.honcho import client as honcho

    return honcho.request_deadline_s() + honcho.READ_TIMEOUT


def iso(t: float) -> str:
    """`t` as the ledger writes times (ledger.now_iso)."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def attempt_time(attempt: dict) -> float | None:
    """When the attempt line was written (its `ts`), or None when it has no time: a
    requeued edit's synthetic attempt, which no request is behind."""
    ts = attempt.get("ts")
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def settle_at(attempt: dict, now: float) -> float | None:
    """When the in-doubt `attempt` may be looked up; None if it may be now.

    A clock that went back by more than the wait makes the attempt's age unknowable:
    it is looked up then rather than held for as long as the clock jumped."""
    at = attempt_time(attempt)
    if at is None:
        return None
    wait = settle_wait_s()
    if now >= at + wait or at - now > wait:
        return None
    return at + wait


class Hold:
    """Which outbox items wait in this run, in outbox order.

    An in-doubt item waits until it may be looked up, and nothing overtakes it
    that must come after it: a turn holds the later turns of its Boxmaker session
    in its workspace (Honcho keeps a session's messages in the order they are
    added); an edit holds every later edit (a remove or an undo names an earlier
    edit's conclusion, in any session). Turns and edits do not hold each other:
    conclusions have no place in a session's message order."""

    def __init__(self, attempts: dict[str, dict], now: float) -> None:
        self.attempts = attempts
        self.now = now
        self.blocked: set = set()  # (ws, session) pairs, and "edits"
        self.items: set[str] = set()  # the items that wait this run
        self.until: float | None = None  # the first moment one of them may be looked up

    def waits(self, item: dict) -> bool:
        """Whether `item` (a small dict: item, ws, session, kind) waits this run.
        Asking twice about the same item gives the same answer."""
        key = "edits" if item.get("kind") == "edit" else (item["ws"], item["session"])
        if key not in self.blocked:
            attempt = self.attempts.get(item["item"])
            when = settle_at(attempt, self.now) if attempt is not None else None
            if when is None:
                return False
            self.until = when if self.until is None else min(self.until, when)
        self.blocked.add(key)
        self.items.add(item["item"])
        return True


def in_doubt(pending: Iterable[tuple[str, tuple]], attempts: Mapping[str, dict], now: float) -> list[dict]:
    """What waits on an in-doubt lookup, for `send` and `sync` to say: one entry per
    attempt line whose items are still in doubt, in outbox order, with its items,
    when it was attempted, when it may be looked up (`lookup_at`, ISO; None: by the
    next send), and how many later items wait behind it (as `Hold` holds them:
    later turns of its session in its workspace; for an edit, every later edit).
    `pending` is (item, outbox record) pairs in outbox order (`Outbox.pending.items()`)."""
    if not attempts:
        return []
    from bxmem.store.outbox import KIND, SESSION, WS

    groups: dict[tuple, dict] = {}
    behind: dict[object, dict] = {}  # what an in-doubt item holds -> the entry it waits behind
    for key, record in pending:
        attempt = attempts.get(key)
        if attempt is None:
            if behind:  # nothing is behind anything before the first item in doubt
                entry = behind.get("edits" if record[KIND] == "edit" else (record[WS], record[SESSION]))
                if entry is not None:
                    entry["waiting_behind"] += 1
            continue
        holds = "edits" if record[KIND] == "edit" else (record[WS], record[SESSION])
        group_key = (holds, attempt.get("ts"), attempt.get("hsession"))
        entry = groups.get(group_key)
        if entry is None:
            when = settle_at(attempt, now)
            entry = groups[group_key] = {
                "workspace": record[WS], "session": None if holds == "edits" else record[SESSION],
                "hsession": attempt.get("hsession"), "kind": record[KIND] or "turn", "items": [],
                "attempted_at": attempt.get("ts"), "lookup_at": iso(when) if when is not None else None,
                "waiting_behind": 0}
        entry["items"].append(key)
        behind.setdefault(holds, entry)
    return list(groups.values())
