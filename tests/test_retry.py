"""trust/send_retry.py's rules, as pure functions: when an in-doubt item may be looked up, and what waits behind it."""

from __future__ import annotations

from bxmem.formats.timestamps import format_time
from bxmem.honcho.api import settle_wait_s
from bxmem.trust.send_retry import Hold, settle_at

T = 1_000_000.0


def attempt(at: float | None = T) -> dict:
    return {"ev": "attempt", "items": ["x"], **({"ts": format_time(at)} if at is not None else {})}


def turn(item: str, session: str, ws: str = "w") -> dict:
    return {"item": item, "ws": ws, "session": session, "kind": "turn"}


def edit(item: str, session: str = "owner", ws: str = "w") -> dict:
    return {"item": item, "ws": ws, "session": session, "kind": "edit"}


def test_the_wait_is_more_than_twice_the_read_timeout():
    from bxmem.honcho import api

    assert settle_wait_s() >= 2 * api.READ_TIMEOUT
    assert settle_wait_s() == 95.0  # connect 5 + write 30 + read 30, and 30 more for the server


def test_an_attempt_may_be_looked_up_once_the_wait_is_over():
    wait = settle_wait_s()
    assert settle_at(attempt(), T + 1, wait) == T + wait
    assert settle_at(attempt(), T + wait - 0.01, wait) == T + wait
    assert settle_at(attempt(), T + wait, wait) is None
    assert settle_at(attempt(None), T, wait) is None  # no request behind it (a requeued edit)
    # The clock went back a little: still wait, the whole wait from now (no more: a wake-up is never
    # further off than its own wait, whatever the clock did).
    assert settle_at(attempt(), T - 10, wait) == T - 10 + wait
    assert settle_at(attempt(), T - wait - 1, wait) is None  # went back further: its age is unknown


def test_later_turns_of_its_session_wait_behind_an_in_doubt_turn_others_go():
    hold = Hold({"turn:a:1": attempt()}, T + 10, settle_wait_s())
    assert hold.waits(turn("turn:a:1", "a"))
    assert hold.waits(turn("turn:a:2", "a"))  # must not overtake it
    assert not hold.waits(turn("turn:b:3", "b"))
    assert not hold.waits(turn("turn:a:4", "a", ws="other"))  # another workspace's session
    assert not hold.waits(edit("edit:e1", "a"))  # edits go on, even of its session
    assert hold.items == {"turn:a:1", "turn:a:2"} and hold.until == T + settle_wait_s()
    assert hold.waits(turn("turn:a:1", "a"))  # asked again: the same answer


def test_an_in_doubt_edit_holds_every_later_edit_and_no_turn():
    hold = Hold({"edit:e1": attempt()}, T + 10, settle_wait_s())
    assert hold.waits(edit("edit:e1", "s1"))
    assert hold.waits(edit("edit:e2", "s9"))  # a remove or an undo may name e1
    assert not hold.waits(turn("turn:s1:5", "s1"))  # conclusions are not in a session's message order
    assert not hold.waits(turn("turn:s9:6", "s9"))


def test_ripe_attempts_hold_nothing():
    hold = Hold({"turn:a:1": attempt(), "edit:e1": attempt()}, T + settle_wait_s(), settle_wait_s())
    assert not hold.waits(turn("turn:a:1", "a")) and not hold.waits(edit("edit:e1"))
    assert hold.items == set() and hold.until is None


def test_a_stored_next_try_is_believed_only_within_its_own_step():
    """A backoff's next try further off than its step's longest jittered wait was written
    under a clock that ran ahead: it is due now (issue 28: a day ahead stopped send a day)."""
    from bxmem.trust.send_retry import next_try

    first = {"since": "x", "delay": 5.0, "until": T + 7.0}
    assert next_try(first, T) == T + 7.0
    assert next_try({**first, "until": T + 600.0}, T) is None  # 600 s is no wait of a 5 s step
    longest = {"since": "x", "delay": 600.0, "until": T + 590.0}
    assert next_try(longest, T) == T + 590.0
    assert next_try({**longest, "until": T + 86400.0}, T) is None  # a day ahead: due now
    assert next_try({**longest, "until": T - 1.0}, T) is None
