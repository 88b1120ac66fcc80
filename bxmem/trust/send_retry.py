"""When `send` tries again: the outage backoff, and when an in-doubt item may be looked up, once the server
can no longer be working on its request (honcho/api.settle_wait_s).
"""

from __future__ import annotations

import random

from bxmem.formats.timestamps import parse_time

FIRST_DELAY_S = 5.0
MAX_DELAY_S = 600.0


def next_backoff(previous: dict | None, now: float, since: str, rng: random.Random) -> dict:
    """The backoff after one more failed try: the nominal delay doubles from 5 s to
    10 minutes, and the wait actually taken is drawn around it, so a fleet that met the
    same outage does not come back at the same instants."""
    delay = FIRST_DELAY_S if previous is None else min(previous["delay"] * 2, MAX_DELAY_S)
    return {"since": previous["since"] if previous else since, "delay": delay, "until": now + jittered(delay, rng)}


def jittered(delay: float, rng: random.Random) -> float:
    low, high = max(FIRST_DELAY_S, delay / 2), min(MAX_DELAY_S, delay * 1.5)
    return rng.uniform(low, high)


def believed(at: float | None, now: float, longest: float) -> float | None:
    """A stored wake-up time `at` as believed now: None when it is due, and due too when it lies further ahead than
    `longest`, the most its own wait can be: such a time was written under a clock since corrected, and held to,
    it would keep a job asleep as long as the clock was wrong."""
    if at is None or at <= now or at - now > longest:
        return None
    return at


def next_try(backoff: dict | None, now: float) -> float | None:
    """When the outage backoff lets send try Honcho again; None: now (no backoff, due, or not
    believable: further off than this step's longest jittered wait, at most MAX_DELAY_S)."""
    if not backoff:
        return None
    delay = backoff.get("delay")
    longest = min(MAX_DELAY_S, delay * 1.5) if isinstance(delay, (int, float)) and delay > 0 else MAX_DELAY_S
    return believed(backoff["until"], now, max(FIRST_DELAY_S, longest))


def attempt_time(attempt: dict) -> float | None:
    """When the attempt line was written (its `ts`), or None when it has no time: a
    requeued edit's synthetic attempt, which no request is behind."""
    return parse_time(attempt.get("ts"))


def settle_at(attempt: dict, now: float, wait: float) -> float | None:
    """When the in-doubt `attempt` may be looked up, `wait` seconds after it was made; None: now. Never more than
    `wait` from now: a clock that went back by more than the wait makes the attempt's age unknowable, and it is
    looked up then."""
    at = attempt_time(attempt)
    if at is None:
        return None
    if now >= at + wait or at - now > wait:
        return None
    return min(at + wait, now + wait)


class Hold:
    """Which outbox items wait in this run. An in-doubt item waits until it may be looked up, and nothing overtakes
    it that must come after it: a turn holds the later turns of its session in its workspace (Honcho keeps a
    session's messages in the order added); an edit holds every later edit (a remove or an undo names an earlier
    edit's conclusion, in any session). Conclusions have no place in a session's order, so turns and edits do not
    hold each other."""

    def __init__(self, attempts: dict[str, dict], now: float, wait: float) -> None:
        self.attempts = attempts
        self.now = now
        self.wait = wait
        self.blocked: set = set()  # (ws, session) pairs, and "edits"
        self.items: set[str] = set()  # the items that wait this run
        self.until: float | None = None  # the first moment one of them may be looked up

    def waits(self, item: dict) -> bool:
        """Whether `item` (a small dict: item, ws, session, kind) waits this run.
        Asking twice about the same item gives the same answer."""
        key = held_by(item.get("kind"), item["ws"], item["session"])
        if key not in self.blocked:
            attempt = self.attempts.get(item["item"])
            when = settle_at(attempt, self.now, self.wait) if attempt is not None else None
            if when is None:
                return False
            self.until = when if self.until is None else min(self.until, when)
        self.blocked.add(key)
        self.items.add(item["item"])
        return True


# The kinds of item sent one at a time, in outbox order among themselves: memory
# edits and artifact cards (a card's retraction must not overtake its card). Turns
# go in groups, a Honcho session's at a time.
ALONE = ("edit", "card")


def held_by(kind: str | None, ws: str | None, session: str | None) -> object:
    """What an item in doubt holds back, and what holds an item back: every later edit
    or card ("edits") for an edit or a card, the later turns of its session in its
    workspace for a turn."""
    return "edits" if kind in ALONE else (ws, session)
