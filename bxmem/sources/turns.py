"""A session's turns as its log's lines build them, and the labels each is decided with
(docs/interfaces.md, "Turn order").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bxmem.formats import turn_ranges
from bxmem.trust.labels import UNREADABLE_LINE, tool_result_label
from bxmem.trust.rules import LogLabels, after_line
from bxmem.trust.turn_order import result_too_late, turns_to_decide

Warn = Callable[[str], None]


@dataclass
class FinishedTurn:
    session: str
    turn: int
    status: str | None
    user: list[list[int]]  # [offset, length] of each user line
    reply: list[int] | None  # [offset, length] of the last final assistant line
    speaker: str | None
    ts: str | None
    has_text: bool  # at least one user line
    secret: str | None  # the name of the secret rule that matched, if any
    untrusted_by_log: bool
    log_class: str
    log_unreadable: dict | None  # the first line of the log bxmem could not read, before the turn's end
    macs: dict | None  # {"key", "user", "reply"}: keyed hashes of the lines at the spans; None without a key


def cursor_labels(cursor: Mapping) -> LogLabels:
    return LogLabels(cursor["untrusted"], cursor["class"], cursor.get("unreadable"))


class Order:
    """Turn numbers, as loopd writes them: from 1, one turn after another. A
    user, assistant or turn_end line naming a turn that has already ended in
    this reading of the log (a repeated or backwards turn number) belongs to no
    turn: it is skipped, counted in the cursor, and said once a read."""

    def __init__(self, cursor: dict) -> None:
        cursor.setdefault("ended", [])
        cursor.setdefault("out_of_order", 0)
        self.ended: list[list[int]] = cursor["ended"]
        self.cursor = cursor
        self.count = 0
        self.first: tuple[int, int] | None = None  # (line, turn)

    def skip(self, record: dict, line_no: int) -> bool:
        turn = record["turn"]
        # A turn above every ended one, the usual case, needs no search.
        if not self.ended or self.ended[-1][1] < turn or not turn_ranges.has(self.ended, turn):
            return False
        self.count += 1
        self.cursor["out_of_order"] += 1
        self.first = self.first or (line_no, turn)
        return True

    def say(self, path: Path, note: Warn) -> None:
        if self.first is not None:
            line_no, turn = self.first
            more = f" ({self.count} such lines in this read)" if self.count > 1 else ""
            note(
                f"{path}:{line_no}: turn {turn} has already ended (a repeated or backwards turn number); "
                f"line skipped, the turn is not decided again{more}"
            )


def taint(cursor: dict, line_no: int, why: str) -> None:
    labels = after_line(cursor_labels(cursor), *UNREADABLE_LINE, {"line": line_no, "why": why})
    cursor["untrusted"], cursor["class"], cursor["unreadable"] = labels


def tool_result(record: dict, cursor: dict, finished: list[FinishedTurn], line_no: int) -> int | None:
    """Fold a tool result's label in by its turn number (turn_order.result_too_late):
    into the session from here, and into the turns numbered at or above it that
    ended before it and are still to be decided. Returns the turn already
    decided without it, if any: then the line taints the session as an
    unreadable one does."""
    label = tool_result_label(record["label"])
    assert label is not None  # record_problem checked it
    labels = after_line(cursor_labels(cursor), *label)
    cursor["untrusted"], cursor["class"] = labels.untrusted, labels.trust_class
    turn, ended = record["turn"], cursor.setdefault("ended", [])
    if not ended or ended[-1][1] < turn:
        return None  # the usual case: no turn at or above it has ended
    for done in finished:
        if done.turn >= turn:
            was = LogLabels(done.untrusted_by_log, done.log_class, done.log_unreadable)
            done.untrusted_by_log, done.log_class, _ = after_line(was, *label)
    late = result_too_late(turn, ended, cursor.get("decided") or [])
    if late is not None:
        taint(cursor, line_no, f"a tool result of turn {turn}, logged after turn {late} was decided without it")
    return late


def release(cursor: dict, session: str, finished: list[FinishedTurn], gave_up: list[int]) -> None:
    """The turns that may be decided now (turn_order.turns_to_decide) out of the open ones, into `finished`."""
    tainted, open_turns = cursor.get("unreadable") is not None, cursor["open"]
    given_up: list[int] = []
    if len(open_turns) == 1:  # one turn at a time, as loopd nearly always logs: it is decided at its end
        ((key, turn),) = open_turns.items()
        now = [int(key)] if "end" in turn else []
    else:
        now, given_up = turns_to_decide({int(k): "end" in t for k, t in open_turns.items()}, tainted=tainted)
    for n in now:
        done = cursor["open"].pop(str(n))
        if n in given_up:
            done["end"] = None  # never ended: decided as not completed
            turn_ranges.add(cursor["ended"], n)
            gave_up.append(n)
        finished.append(finished_turn(cursor, session, n, done))


def finished_turn(cursor: dict, session: str, number: int, turn: dict) -> FinishedTurn:
    speakers = turn["speakers"]
    # Two user lines from different people are a burst of several speakers:
    # incomplete speaker information, like a null speaker.
    speaker = speakers[0] if speakers and all(s == speakers[0] for s in speakers) else None
    macs = None
    if turn.get("key") is not None and len(turn["macs"]) == len(turn["user"]):
        macs = {"key": turn["key"], "user": turn["macs"], "reply": turn["reply_mac"] if turn["reply"] else None}
    return FinishedTurn(
        session=session,
        turn=number,
        status=turn["end"],
        user=turn["user"],
        reply=turn["reply"],
        speaker=speaker,
        ts=turn["ts"],
        has_text=bool(turn["user"]),
        secret=turn["secret"] or turn["reply_secret"],
        untrusted_by_log=bool(cursor["untrusted"]),
        log_class=cursor["class"],
        log_unreadable=cursor.get("unreadable"),
        macs=macs,
    )
