"""When a session's turns may be decided, and what a late tool result does (docs/interfaces.md, "Turn order")."""

from __future__ import annotations

from collections.abc import Mapping

from bxmem.formats import turn_ranges

# Ended turns that may wait behind one still open; past it the open turn is given up on.
MAX_WAITING_TURNS = 64


def turns_to_decide(
    open_turns: Mapping[int, bool], *, tainted: bool = False, max_waiting: int = MAX_WAITING_TURNS
) -> tuple[list[int], list[int]]:
    """(the turns of a session that may be decided now, in number order; those of them given up
    on), given its turns read but not yet decided (number -> its turn_end has been read). A turn
    that has ended waits while a lower-numbered turn is open, whose results still to come count
    for it (docs/interfaces.md, "Turn order"):

    | the session                                                      | an ended turn              |
    | `tainted`: a line bxmem cannot read or trust came before         | decided at once: nowhere,  |
    |                                                                  | whatever is still to come  |
    | an open turn has more than `max_waiting` ended turns above it    | waits no more: the open    |
    | (loopd stopped part-way through it and went on)                  | turn is given up on, and   |
    |                                                                  | decided as not completed   |

    so one turn that never ends cannot keep the session's later turns from ever being decided."""
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
