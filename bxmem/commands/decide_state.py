"""decide's state, `memory/bxmem/decide.json`, and its recovery from the ledger: a turn is decided once,
whatever stops a run (docs/design.md, "Deciding").
"""

from __future__ import annotations

from pathlib import Path

from bxmem.formats import turn_ranges
from bxmem.formats.shapes import (
    RANGES,
    SPAN,
    anything,
    boolean,
    dict_of,
    integer,
    list_of,
    maybe,
    number,
    one_of,
    problem,
    record,
    string,
)
from bxmem.log import log, runbook
from bxmem.sources import cursor
from bxmem.sources.loopd import MAX_TURN, new_cursor
from bxmem.store.ledger import Ledger, ReadResult
from bxmem.store.ledger_events import TURN, is_decided
from bxmem.store.ledger_shapes import MARK as LEDGER_MARK
from bxmem.store.state_json import load_json, say_unusable
from bxmem.trust.labels import CLASS_RANK

STATE_FILE = "decide.json"
# A log that cannot be read (permission denied, an I/O error) is tried again this
# often, and at once when its mode or owner changes: never on every 5 s run.
RETRY_UNREADABLE_S = 60.0
# A state of another version is read again from the logs and the ledger.
STATE_VERSION = 2


def fresh_state() -> dict:
    return {
        "v": STATE_VERSION,
        "ledger_size": 0,
        "logs": {},
        "undecided": {},
        "broker_down_since": None,
        "logs_missing": False,
        "resume_at": None,
        "last_run": None,
    }


# --- the shape of decide.json: checked whole on load; any other shape is rebuilt ----------------

_NAME = maybe(string)
OPEN_TURN = record(
    {
        "user": list_of(SPAN),
        "speakers": list_of(_NAME),
        "ts": _NAME,
        "reply": maybe(SPAN),
        "secret": _NAME,
        "reply_secret": _NAME,
        "key": _NAME,
        "macs": list_of(string),
        "reply_mac": _NAME,
    },
    {"end": _NAME},
)  # `end`: its turn_end's status, while it waits for a lower-numbered turn (loopd)
UNREADABLE = maybe(record({"line": integer(1), "why": string}))
CLASS = one_of(*CLASS_RANK)
# A cursor as decide.json keeps it (decide_state.SHAPE): anything else is a state to rebuild.
CURSOR = record(
    {
        **cursor.FIELDS,
        "untrusted": boolean,
        "class": CLASS,
        "unreadable": UNREADABLE,
        "skipping": boolean,
        "open": dict_of(OPEN_TURN),
        "decided": RANGES,
    },
    {
        **cursor.OPTIONAL,
        "ended": RANGES,
        "out_of_order": integer(0),
        "ignored": string,
        "gone": boolean,
        "error": record({"why": string, "since": string, "retry_at": number, "access": maybe(list_of(integer(None)))}),
    },
)
# A finished turn waiting for brokerd (FinishedTurn's fields, and `late`).
WAITING_TURN = record(
    {
        "session": string,
        "turn": integer(1, MAX_TURN),
        "status": _NAME,
        "user": list_of(SPAN),
        "reply": maybe(SPAN),
        "speaker": _NAME,
        "ts": _NAME,
        "has_text": boolean,
        "secret": _NAME,
        "untrusted_by_log": boolean,
        "log_class": CLASS,
        "log_unreadable": UNREADABLE,
        "macs": maybe(record({"key": string, "user": list_of(string), "reply": _NAME})),
    },
    {"late": boolean},
)


SHAPE = record(
    {
        "v": one_of(STATE_VERSION),
        "ledger_size": integer(0),
        "logs": dict_of(CURSOR),
        "undecided": dict_of(list_of(WAITING_TURN)),
        "broker_down_since": _NAME,
        "logs_missing": boolean,
        "resume_at": _NAME,
        "last_run": maybe(
            record(
                {
                    "at": string,
                    "budget_s": number,
                    "sessions_waiting": integer(0),
                    "broker_questions": integer(0),
                    "broker_slowest_s": maybe(number),
                }
            )
        ),
    },
    {"ledger_mark": maybe(LEDGER_MARK)},
)  # Ledger.mark at ledger_size


def read(state_dir: Path) -> tuple[dict | None, str | None]:
    """decide.json as last saved: (state, None); (None, None) when there is none or
    it is of another version (read again from the logs and the ledger, as
    planned); (None, why) when it cannot be used."""
    state, why = load_json(state_dir / STATE_FILE, _any_version)
    if state is None or state["v"] != STATE_VERSION:
        return None, why
    return state, None


def _any_version(value: object) -> str | None:
    why = problem(value, record({"v": anything}))
    if why is None and value["v"] != STATE_VERSION:  # type: ignore[index]
        return None
    return why or problem(value, SHAPE)


def load(state_dir: Path) -> dict:
    state, why = read(state_dir)
    if why is not None:
        # Every log is read again (its taint is in its lines) and the ledger says which turns are decided.
        say_unusable(state_dir / STATE_FILE, why, "rebuilt from the logs and the ledger")
    # None: lost, or written by a version that kept only the highest decided turn.
    return state if state is not None else fresh_state()


has_turn, add_turn = turn_ranges.has, turn_ranges.add  # the decided set of a session's turns


def recover(state: dict, ledger: Ledger) -> None:
    """Learn the turns decided in the ledger since the state's last write, the torn last line too when it is a whole
    decision (the next append completes it). A ledger that is not the one the state was learnt from makes the
    state unusable: every log is read again, and the whole ledger says which turns are decided."""
    changed = ledger.changed(state["ledger_size"], state.get("ledger_mark"))
    if changed is not None:
        log.warning(
            f"{ledger.path} is {changed}; decide's state is read again from the logs and the ledger"
            + runbook("ledger-rewritten")
        )
        state.clear()
        state.update(fresh_state())
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
    learnt(state, ledger, result.end)  # learnt up to here: the next run reads on from it


def learnt(state: dict, ledger: Ledger, size: int) -> None:
    """The ledger is learnt (or written) up to `size`: kept with what it holds there (Ledger.mark)."""
    state["ledger_size"] = size
    state["ledger_mark"] = ledger.mark(size)
