"""When a session's turns may be decided, and what a late tool result does (docs/interfaces.md, "Turn order")."""

from __future__ import annotations

from collections.abc import Mapping

from bxmem.formats import turn_ranges

# Ended turns that may wait behind one still open; past it the open turn is given up on.
MAX_WAITING_TURNS = 64


def turns_to_decide(
    open_turns: Mapping[int, bool], *, tainted: bool = False, max_waiting: int = MAX_WAITING_TURNS
) -> tuple[list[int], list[int]]:
    """(the turns of a session that may be decided now, in number order; those
    of them given up on), given its turns read but not yet decided (number ->
    its turn_end has been read).

    The contract says a turn is untrusted by the log when any tool result of
    the session *up to and including that turn* is: by turn number, not by
    where the line falls in the file. So a turn that has ended waits while any
    lower-numbered turn is still open, whose tool results still to come count
    for it; it is decided once every lower-numbered turn read so far has ended,
    with the log's labels as of then (every result of those turns included).

    | the session                                                      | an ended turn              |
    | `tainted`: a line bxmem cannot read or trust came before         | decided at once: nowhere,  |
    |                                                                  | whatever is still to come  |
    | an open turn has more than `max_waiting` ended turns above it    | waits no more: the open    |
    | (loopd stopped part-way through it and went on)                  | turn is given up on, and   |
    |                                                                  | decided as not completed   |

    so one turn that never ends (its turn_end unreadable, or never written)
    cannot keep the session's later turns from ever being decided; a line of
    it that comes later belongs to a turn that has ended (skipped; a tool
    result of it counts by result_too_late)."""
    ended = sorted(n for n, done in open_turns.items() if done)
    if tainted:
        return ended, []
    still_open = sorted(n for n, done in open_turns.items() if not done)
    given_up: list[int] = []
    while still_open and sum(1 for n in ended if n > still_open[0]) > max_waiting:
        given_up.append(still_open.pop(0))
    first_open = still_open[0] if still_open else None
    return sorted([n for n in ended if first_open is None or n < first_open] + given_up), given_up


def result_too_late(turn: int, ended: list[list[int]], decided: list[list[int]]) -> int | None:
    """A tool result of `turn`, read after turns numbered at or above it ended:
    the lowest of them whose decision is already made (a turn still to be
    decided takes the result's label: see loopd), or None.

    | a tool result of turn t, logged                      | counts for                         |
    | while t is open, or before any turn >= t has ended   | the session from here (after_line) |
    | after turns >= t ended, none decided yet              | those turns too, and the session   |
    | after a turn >= t was decided (an earlier run)        | nothing can move that decision: the |
    |                                                       | line is one bxmem cannot trust, and |
    |                                                       | taints the session from here as an  |
    |                                                       | unreadable line does                |
    """
    return turn_ranges.first_common(ended, decided, turn)
