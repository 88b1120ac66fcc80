"""The outbox: a checkpoint of a fold over the ledger (its offset and the result), caught up on every run.
There is no second queue: deleting the checkpoint is always safe, the next run folds the ledger again.
"""

from __future__ import annotations

import marshal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bxmem.formats import turn_ranges
from bxmem.formats.shapes import anything, problem, record
from bxmem.log import log, runbook
from bxmem.start.marshal_seal import seal
from bxmem.store.files import load_marshal, write_bytes
from bxmem.store.ledger import Ledger, LedgerChanged, ReadResult
from bxmem.store.ledger_events import (
    ATTEMPT,
    CANCELLED,
    CREATED,
    DECIDED,
    DROPPED,
    EDIT,
    FAILED,
    KEY_REFUSED,
    KEY_RESUMED,
    REQUEUED,
    REROUTED,
    SENT,
    SESSION_GONE,
    SESSION_RENEWED,
    TURN,
    UNSENT,
    in_doubt,
)
from bxmem.store.local_key import key_id, ledger_tag
from bxmem.store.local_key import load as load_key
from bxmem.store.outbox_merge import in_order, inherit, knows
from bxmem.store.outbox_shape import KIND, PEER, ROLE, SESSION, SHAPE, WS, at, offset_of, tag_of
from bxmem.store.workspace_roles import apply as fold_roles
from bxmem.store.workspace_roles import save as save_roles

T = TypeVar("T")
NAMED_WRONG = ("speaker-named-like-the-owner", "speaker-is-the-agent")  # trust/rules.speaker_peer's reasons
CHECKPOINT = "outbox.marshal"
# marshal, not JSON: every send run loads and saves it, and JSON was too slow at that for a large
# outbox (docs/performance.md, "Start-up"). It is a cache of the ledger: any doubt means a rebuild.
CHECKPOINT_VERSION = 8  # a checkpoint another version wrote is rebuilt from the ledger


def read_checkpoint(state_dir: Path) -> tuple[dict | None, str | None]:
    raw, why = load_marshal(state_dir / CHECKPOINT, record({"version": anything}))
    if raw is None or raw["version"] != CHECKPOINT_VERSION:
        return None, why  # another version: folded again, as planned
    why = problem(raw, SHAPE)
    return (raw, None) if why is None else (None, why)


def light(item: str, record: tuple) -> dict:
    return {
        "item": item,
        "offset": offset_of(record),
        "ws": record[WS],
        "session": record[SESSION],
        "kind": record[KIND],
        "peer": record[PEER],
        "role": record[ROLE],
    }


def _intern(value: str | None) -> str | None:
    return sys.intern(value) if isinstance(value, str) else value


@dataclass
class Outbox:
    offset: int = 0
    ino: int | None = None
    mark: dict | None = None  # the ledger as folded up to `offset` (Ledger.mark)
    key: str | None = None  # which entry.key the pending items' tags were made with (local_key.key_id)
    pending: dict[str, tuple] = field(default_factory=dict)  # item -> compact record (above), ledger order
    attempts: dict[str, dict] = field(default_factory=dict)  # item -> its last attempt event
    failed: dict[str, dict] = field(default_factory=dict)  # item -> failed event
    setup: dict[str, dict] = field(default_factory=dict)  # workspace -> what exists there
    stopped: dict[str, dict] = field(default_factory=dict)  # workspace -> key_refused event
    backoff: dict | None = None  # {"since", "delay", "until"} while Honcho is down
    last_sent: str | None = None
    sent_count: int = 0  # items sent, each once (a second `sent` line for an item counts no more)
    dropped: int = 0  # items the owner dropped (bxmem outbox drop)
    malformed: int = 0
    undone: dict[str, str] = field(default_factory=dict)  # edit item -> the undo item that reverses it
    conclusions: dict[str, dict] = field(
        default_factory=dict
    )  # ref (edit:<id>#<i>) -> {"id", "ws", "hsession", "deleted_by"?}
    fleet: dict[str, dict] = field(
        default_factory=dict
    )  # ref -> {"ws", "hsession", "ids"}: fleet notes and artifact cards
    cancelled: int = 0
    decided: dict[str, int] = field(default_factory=dict)  # "kind/role/reason" -> count, for bxmem sync
    # Every item decided so far. A decision is final: a second `decided` line for a known item (two runs
    # that both decided it, a recovery that missed it) is ignored, counted here and said once, so it can
    # neither re-queue a sent item nor move a pending one. Turns as ranges of turn numbers per session
    # (a history of 100,000 turns is a few hundred numbers), edits by item.
    known_turns: dict[str, list[list[int]]] = field(default_factory=dict)
    known_other: set[str] = field(default_factory=set)
    # Items out for good whatever the ledger later says: dropped (bxmem outbox drop), or undone before sent.
    withdrawn: set[str] = field(default_factory=set)
    # workspace -> {"set_up": [roles], "written": {role: first item}} (store/workspace_roles.py)
    roles: dict[str, dict] = field(default_factory=dict)
    # workspace -> {Honcho session name: the Boxmaker session it was made for}: a new one never takes one (send/plan.py)
    hsessions: dict[str, dict[str, str]] = field(default_factory=dict)
    # When a turn was last decided nowhere because its speaker's name reads as the agent's or
    # the owner's (reason -> ts): an owner whose name is written wrong loses every turn so (sync).
    named_wrong: dict[str, str] = field(default_factory=dict)
    repeated: int = 0  # second decisions ignored
    first_repeated: str | None = None  # the first item decided twice (for sync's line)
    # The lasting states send last logged ({"held": [...], "in_doubt": [...]}): each logged when it starts
    # or changes and when it ends, not on every run (commands/send/report.py).
    announced: dict = field(default_factory=dict)
    # This catch-up's second decisions, said once at its end (not saved): how many, and the first.
    _new_repeats: int = 0
    _first_new_repeat: tuple[str, int] | None = None
    _secret: bytes | None = None  # entry.key, which the tags are made with (not saved)
    _order: dict | None = None  # while folding from the start: each pending item's turn or journal line (in_order)
    # Items a fold met sent before their decision (a sorted or reversed ledger): it is not pending (not saved).
    _sent_early: set | None = None

    # --- the fold -----------------------------------------------------------------

    def apply(self, ev: dict, offset: int = 0, raw: bytes = b"") -> None:
        kind = ev.get("ev")
        item: str = ev.get("item", "")  # every kind that names an item has one
        if kind in (ATTEMPT, SENT, CREATED):  # before the item leaves the outbox: its decided role is still here
            fold_roles(self.roles, ev, self._decided_role)
            if kind == ATTEMPT:
                self._learn_name(ev.get("ws"), ev.get("hsession"), ev.get("session"))
        if kind == DECIDED:
            if not self._first_decision(item):
                self.repeated += 1
                self.first_repeated = self.first_repeated or item
                self._new_repeats += 1
                self._first_new_repeat = self._first_new_repeat or (item, offset)
                return
            key = f"{ev.get('kind', TURN)}/{ev.get('role') or 'none'}/{ev.get('reason')}"
            self.decided[key] = self.decided.get(key, 0) + 1
            if not ev.get("role") and ev.get("reason") in NAMED_WRONG and isinstance(ev.get("ts"), str):
                self.named_wrong[ev["reason"]] = ev["ts"]
            if ev.get("ws") and item in self.withdrawn:
                pass  # dropped or cancelled before this line came (a ledger with its lines moved)
            elif ev.get("ws") and self._sent_early and item in self._sent_early:
                self.sent_count += 1
            elif ev.get("ws"):
                if self._order is not None:
                    self._order[item] = ev.get("journal_line") if ev.get("kind") == EDIT else ev.get("turn")
                self.pending[item] = (
                    at(offset, ledger_tag(self._secret, raw)),
                    _intern(ev["ws"]),
                    _intern(ev.get("session")),
                    _intern(ev.get("kind", TURN)),
                    _intern(ev.get("peer")),
                    _intern(ev.get("role")),
                )
            if ev.get("op") == "undo" and ev.get("ws") and ev.get("target"):
                self.undone[ev["target"]] = item
        elif kind == ATTEMPT:
            for one in ev.get("items", []):
                self.attempts[one] = ev
        elif kind == SENT:
            if self.pending.pop(item, None) is not None:
                self.sent_count += 1
            elif self._sent_early is not None and not self.knows(item):
                self._sent_early.add(item)
            self.attempts.pop(item, None)
            self.failed.pop(item, None)
            self.last_sent = ev.get("ts")
            self._learn_results(ev)
        elif kind == FAILED:
            decided = self.pending.pop(item, None)
            attempt = self.attempts.pop(item, None)
            self.failed[item] = {**ev, "decided": decided}
            if ev.get("in_doubt"):  # Honcho may hold what it sent: kept for the lookup a requeue needs
                self.failed[item]["attempt"] = attempt or in_doubt(item, ev.get("ws"))
            self._learn_results(ev)  # what an edit did before it was refused still happened
        elif kind == UNSENT:  # the attempt never reached Honcho: nothing to look up
            for one in ev.get("items", []):
                self.attempts.pop(one, None)
        elif kind == CANCELLED:
            self.pending.pop(item, None)
            self.attempts.pop(item, None)
            self.withdrawn.add(item)
            self.cancelled += 1
        elif kind == REQUEUED:
            failed = self.failed.pop(item, None) if item not in self.withdrawn else None
            if failed and failed.get("decided"):
                self.pending[item] = failed["decided"]
                if failed.get("attempt"):
                    # Honcho may hold what its attempt sent: the item is in doubt again,
                    # and is looked up (in the attempt's Honcho session) before anything is sent.
                    self.attempts[item] = failed["attempt"]
                elif failed.get("results"):
                    # An edit refused half-way did part of its work: it goes through
                    # the in-doubt path, which looks before it creates again.
                    self.attempts[item] = in_doubt(item, failed.get("ws"))
        elif kind == DROPPED:
            if self.pending.pop(item, None) is not None or self.failed.pop(item, None) is not None:
                self.dropped += 1
            self.attempts.pop(item, None)
            self.withdrawn.add(item)
        elif kind == REROUTED and item not in self.withdrawn:
            self._reroute(item, ev.get("ws"))
        elif kind in (SESSION_GONE, SESSION_RENEWED):
            known = (self.setup.get(ev.get("ws", "")) or {}).get("sessions", {}).get(ev.get("session"))
            if known is not None and known["name"] == ev.get("hsession"):
                known["gone" if kind == SESSION_GONE else "renew"] = True
        elif kind == CREATED:
            self._learn_created(ev)
        elif kind == KEY_REFUSED:
            self.stopped[ev["ws"]] = ev
        elif kind == KEY_RESUMED:
            self.stopped.pop(ev.get("ws", ""), None)

    def _reroute(self, item: str, ws: object) -> None:
        if not isinstance(ws, str):
            return
        record = self.pending.get(item)
        if record is None and item in self.failed:
            record = self.failed.pop(item).get("decided")
        if record is not None:
            self.pending[item] = (*record[:WS], _intern(ws), *record[WS + 1 :])

    def _decided_role(self, item: str) -> object:
        record = self.pending.get(item)
        return record[ROLE] if record is not None else None

    def _learn_name(self, ws: object, hsession: object, session: object) -> None:
        if isinstance(ws, str) and isinstance(hsession, str) and isinstance(session, str):
            self.hsessions.setdefault(ws, {}).setdefault(hsession, session)

    def _first_decision(self, item: str) -> bool:
        """Note `item` as decided; False when it was already."""
        kind, _, rest = item.partition(":")
        session, _, number = rest.rpartition(":")
        if kind == TURN and session and number.isascii() and number.isdigit():
            return turn_ranges.add(self.known_turns.setdefault(session, []), int(number))
        if item in self.known_other:
            return False
        self.known_other.add(item)
        return True

    def _learn_results(self, ev: dict) -> None:
        for result in ev.get("results") or []:
            ref = f"{ev['item']}#{result['i']}"
            if result["do"] in ("conclude", "reconclude") and result.get("id"):
                self.conclusions[ref] = {"id": result["id"], "ws": ev.get("ws"), "hsession": result.get("hsession")}
            elif result["do"] == "unconclude" and result.get("deleted"):
                target = self.conclusions.get(result["of"])
                if target is not None:
                    target["deleted_by"] = ref
            elif result["do"] in ("fleet-message", "card") and result.get("ids"):  # a retraction may sit beside it
                self.fleet[ref] = {"ws": ev.get("ws"), "hsession": result.get("hsession"), "ids": result["ids"]}

    def decision(self, ledger: Ledger, item: str, record: tuple | None = None) -> dict:
        """The whole decision of a pending item (or of `record`, a failed one's), read back
        from the ledger by its offset and checked to be the line folded there: a
        `decided` line, for this item, with the keyed hash it had. LedgerChanged if
        not: the ledger was rewritten in place, and must be folded again (`refold`)."""
        record = record if record is not None else self.pending[item]
        offset = offset_of(record)
        raw, ev = ledger.line_at(offset)
        if isinstance(ev, str):
            why = f"the line there is {ev}" if raw.strip() else "there is no line there"
        elif ev.get("ev") != DECIDED or ev.get("item") != item:
            why = "the line there is another event"
        elif ledger_tag(self._secret, raw) != tag_of(record):
            why = "the line there was edited"
        else:
            return ev
        raise LedgerChanged(f"{ledger.path}: the decision of {item} is no longer at byte {offset:,} ({why})")

    def reading(self, ledger: Ledger, read: Callable[[], T]) -> T:
        """`read()`, which reads decisions back; if one is not the line folded (LedgerChanged),
        the ledger is folded again (`refold`, said once) and `read()` done again, once."""
        try:
            return read()
        except LedgerChanged as exc:
            self.refold(ledger, f"no longer holds what the outbox folded ({exc})")
            return read()

    def pending_items(self):
        """The pending items in outbox order, as small dicts (see `light`)."""
        for item, compact in self.pending.items():
            yield light(item, compact)

    def workspace(self, ws: str) -> dict:
        return self.setup.setdefault(ws, {"configured": False, "peers": [], "sessions": {}})

    def _learn_created(self, ev: dict) -> None:
        ws = self.workspace(ev["ws"])
        what = ev.get("what")
        if what == "workspace":
            ws["configured"] = True
        elif what == "peer" and ev.get("id") not in ws["peers"]:
            ws["peers"].append(ev["id"])
        elif what == "session" and ev.get("session"):
            self._learn_name(ev["ws"], ev.get("id"), ev["session"])
            known = ws["sessions"].get(ev["session"])
            if known is None or ev.get("n", 1) >= known["n"]:
                ws["sessions"][ev["session"]] = {"name": ev["id"], "n": ev.get("n", 1), "peers": ev.get("peers", [])}

    # --- persistence ----------------------------------------------------------------

    @classmethod
    def load(cls, state_dir: Path, ledger: Ledger) -> Outbox:
        """The checkpoint caught up with the ledger: folded again if it is missing, of another
        shape, made with another entry.key, or the ledger is no longer the one it folded."""
        secret = load_key(state_dir, create=False)
        raw, why = read_checkpoint(state_dir)
        if why is not None:
            log.warning(f"{state_dir / CHECKPOINT}: {why}; rebuilt from the ledger" + runbook("state-rewritten"))
        box = cls._from_dict(raw) if raw is not None else cls()
        box._secret = secret
        st = ledger.path.stat() if ledger.path.exists() else None
        if raw is None:
            box.catch_up(ledger)
        elif st is not None and box.ino is not None and st.st_ino != box.ino:
            box.refold(ledger, "was replaced (another file)")
        elif (changed := ledger.changed(box.offset, box.mark)) is not None:
            box.refold(ledger, f"is {changed}")
        elif box.key != (key_id(secret) if secret else None):
            box.refold(ledger, None)  # the tags are made with entry.key, which was replaced: nothing to say
        else:
            box.catch_up(ledger)
        if st is not None:
            box.ino = st.st_ino
        return box

    def refold(self, ledger: Ledger, why: str | None) -> None:
        """Fold the ledger again from its start, in place, keeping what this checkpoint
        knew that the ledger may have lost (`inherit`); `why` the ledger is not the one
        folded, said once (None: nothing to say)."""
        new = type(self)()
        new._secret, new.ino = self._secret, self.ino
        new.catch_up(ledger)
        doubted = inherit(new, self)
        gone = sum(1 for item in self.pending if not new.knows(item))
        if why is not None:
            again = (
                f"; {doubted} item(s) it had seen settled are pending in it again, and are looked up in Honcho "
                "before anything is sent"
                if doubted
                else ""
            )
            # Decided again by decide or mirror when they notice the ledger changed; if not, the runbook says how.
            lost = f"; {gone} item(s) waiting to be sent are decided in it no more" if gone else ""
            log.warning(
                f"{ledger.path} {why}; the outbox was rebuilt from it{again}{lost}" + runbook("ledger-rewritten")
            )
        self.__dict__.update(new.__dict__)

    def knows(self, item: str) -> bool:
        return knows(self.known_turns, self.known_other, item)

    def catch_up(self, ledger: Ledger) -> None:
        # From the start, the ledger's order is checked, not trusted: it may have been sorted.
        whole = self.offset == 0
        if whole:
            self._order, self._sent_early = {}, set()
        result = ReadResult()
        self._new_repeats, self._first_new_repeat = 0, None
        for ev in ledger.iter_from(self.offset, result):
            self.apply(ev, result.at, result.line)
        if self._first_new_repeat is not None:
            item, at = self._first_new_repeat
            log.warning(
                f"{ledger.path}: {self._new_repeats} second decision(s) for items already decided "
                f"ignored, the first decision stands (first: {item} at byte {at})"
            )
            self._new_repeats, self._first_new_repeat = 0, None
        self.malformed += result.skipped
        for line in result.skipped_lines(ledger.path):
            log.warning(line)
        if whole:
            self.pending = in_order(self.pending, self._order or {})
            self._order = self._sent_early = None
        if result.end != self.offset or self.mark is None:
            self.mark = ledger.mark(result.end)
        self.offset = result.end
        self.key = key_id(self._secret) if self._secret else None

    def save(self, state_dir: Path) -> None:
        saved = {name: value for name, value in self.__dict__.items() if not name.startswith("_")}
        write_bytes(state_dir / CHECKPOINT, seal(marshal.dumps({"version": CHECKPOINT_VERSION, **saved})))
        save_roles(state_dir, self.roles, self.ino, self.offset, self.mark)  # for recall and ask (workspace_roles.read)

    @classmethod
    def _from_dict(cls, raw: dict) -> Outbox:
        box = cls()
        for name in box.__dict__:
            if name in raw and not name.startswith("_"):
                setattr(box, name, raw[name])
        return box
