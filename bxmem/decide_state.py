"""decide's state, `memory/bxmem/decide.json`, and its recovery from the ledger.

Per session log: a cursor (sources/loopd.py) and the exact set of its turns
already decided, as sorted disjoint ranges ([[1, 30]] for a session whose 30
turns are decided; one range per run of turns, so a long history costs a
few numbers). Also the turns waiting for brokerd, where the last run stopped
when its budget ran out, and what it saw of brokerd.

A turn is decided once: before a turn is decided its number is looked up in
the set, and the set is learnt back from the ledger on every run (from the
offset the state last recorded, or from the start when the state is lost or
from an older version). So a crash or a full disk between an append and the
state write, or mid-append at any byte, decides nothing twice and loses
nothing: the turns whose lines did not reach the ledger are decided again
from the log.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from .ledger import Ledger, ReadResult
from .ledger_events import TURN, is_decided
from .sources.loopd import new_cursor
from .store import read_json

STATE_FILE = "decide.json"
# 2: exact decided sets (`decided`), unreadable-line taint, line hashes of open turns.
# A state of another version is read again from the logs and the ledger.
STATE_VERSION = 2


def fresh_state() -> dict:
    return {"v": STATE_VERSION, "ledger_size": 0, "logs": {}, "undecided": {}, "broker_down_since": None,
            "logs_missing": False, "resume_at": None, "last_run": None}


def load(state_dir: Path) -> dict:
    state = read_json(state_dir / STATE_FILE)
    if state is None or state.get("v") != STATE_VERSION:
        # Lost, or written by a version that kept only the highest decided turn:
        # every log is read again and the ledger says which turns are decided.
        return fresh_state()
    return state


def has_turn(ranges: list[list[int]], n: int) -> bool:
    i = bisect_right(ranges, n, key=lambda r: r[0])
    return i > 0 and ranges[i - 1][1] >= n


def add_turn(ranges: list[list[int]], n: int) -> bool:
    """Put turn `n` in the set; False if it was there."""
    i = bisect_right(ranges, n, key=lambda r: r[0])  # ranges[:i] start at or before n
    if i > 0 and ranges[i - 1][1] >= n:
        return False
    joins_left = i > 0 and ranges[i - 1][1] == n - 1
    joins_right = i < len(ranges) and ranges[i][0] == n + 1
    if joins_left and joins_right:
        ranges[i - 1][1] = ranges[i][1]
        del ranges[i]
    elif joins_left:
        ranges[i - 1][1] = n
    elif joins_right:
        ranges[i][0] = n
    else:
        ranges.insert(i, [n, n])
    return True


def recover(state: dict, ledger: Ledger) -> None:
    """Learn the turns decided in the ledger since the state's last write (a crash,
    a full disk, a lost or old state file), the torn last line too when it is a
    whole decision (the next append completes it)."""
    if ledger.size() <= state["ledger_size"]:
        return
    result = ReadResult()
    for ev in ledger.iter_from(state["ledger_size"], result, tail=True):
        if not is_decided(ev, TURN):
            continue
        session, turn = ev.get("session"), ev.get("turn")
        if not isinstance(session, str) or type(turn) is not int:
            continue
        add_turn(state["logs"].setdefault(session, new_cursor())["decided"], turn)
        waiting = state["undecided"].get(session)
        if waiting:
            state["undecided"][session] = [t for t in waiting if t["turn"] != turn]
            if not state["undecided"][session]:
                del state["undecided"][session]
    if result.torn_event:
        ledger.close_torn_tail()
    state["ledger_size"] = result.end  # learnt up to here: the next run reads on from it
