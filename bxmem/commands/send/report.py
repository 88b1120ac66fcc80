"""What a `send` run did and what holds the outbox up after it, said by every run; the journal hears of each
lasting state once (`announce`), so a timer run every few seconds adds nothing to it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bxmem.errors import ExitCode, cite_runbook
from bxmem.formats.timestamps import format_time, parse_time
from bxmem.honcho.api import settle_wait_s
from bxmem.log import log, notice
from bxmem.store.outbox import KIND, SESSION, WS
from bxmem.trust.send_retry import ALONE, held_by, next_try, settle_at

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from bxmem.commands.send.plan import Tally

SCHEMA = "bxmem.send/2"


@dataclass
class SendReport:
    busy: bool = False
    local_only: bool = False
    waiting_until: float | None = None  # this run waited out the backoff, sending nothing (until then)
    sent: int = 0
    messages: int = 0
    requests: int = 0
    failed: int = 0
    outage: str | None = None  # what this run met when Honcho did not answer
    stopped: list[str] = field(default_factory=list)  # workspaces this run stopped
    pending: int | None = None  # items in the outbox after the run; None when not counted
    held: int = 0  # items this run left waiting behind an in-doubt attempt (retry.Hold)
    # Items the configuration holds, by workspace, recorded role, role now and reason
    held_by_config: list[dict] = field(default_factory=list)
    # What holds the outbox up after the run (Sender.note_state), whatever this run did:
    backoff: dict | None = None  # the outage as send recorded it: {"since", "until", "error"?}
    refused: list[dict] = field(default_factory=list)  # every workspace whose sends are stopped, and why
    in_doubt: list[dict] = field(default_factory=list)
    # What this run's warnings said already, so its summary does not say it twice: ("outage",), ("refused", ws),
    # ("held", key), ("doubt", key).
    said: set = field(default_factory=set)
    refolded: bool = False  # a decision read back was not the line folded: the outbox was folded again, said then

    @property
    def degraded(self) -> bool:
        return bool(
            self.backoff
            or self.outage
            or self.waiting_until
            or self.refused
            or self.stopped
            or self.in_doubt
            or self.refolded
        )

    def notice(self) -> str | None:
        if self.local_only:
            return "local-only: no [honcho] section in the configuration, nothing is sent"
        return "another send is running; this one exits" if self.busy else None

    def not_counted(self) -> str | None:
        if self.local_only:
            return "local-only: no [honcho] section, so there is no outbox"
        if self.busy:
            return "another send is running and holds the outbox"
        return None if self.pending is not None else "the run stopped before it counted"

    def outage_json(self) -> dict | None:
        if not self.backoff:
            return None
        now = time.time()
        return {
            "since": self.backoff.get("since"),
            "next_try_at": format_time(next_try(self.backoff, now) or now),
            "error": self.backoff.get("error"),
            "this_run": self.outage is not None,
        }

    def as_json(self, config=None) -> dict:  # scripts get an object in every case
        return {
            "schema": SCHEMA,
            "local_only": self.local_only,
            "busy": self.busy,
            "sent": self.sent,
            "messages": self.messages,
            "requests": self.requests,
            "failed": self.failed,
            "pending": None if self.not_counted() else self.pending,
            "pending_not_counted": self.not_counted(),
            "outage": self.outage_json(),
            "waiting_until": format_time(self.waiting_until) if self.waiting_until is not None else None,
            "stopped": [r["workspace"] for r in self.refused],
            "keys_refused": self.refused,
            "held_by_config": self.held_by_config,
            "in_doubt": self.in_doubt,
        }

    def held_count(self) -> int:
        return sum(g["turns"] + g["edits"] + g.get("cards", 0) for g in self.held_by_config)

    def summary(self, config=None) -> list[str]:
        if self.local_only or self.busy:
            return []
        out = []
        held = self.held_count()
        if self.sent or self.failed:
            out.append(
                f"sent {self.sent} item(s) in {self.requests} request(s); {self.failed} failed; "
                f"{self.pending} pending" + (f", {held} of them held by the configuration" if held else "")
            )
        return out + holding_lines(self, time.time())

    @property
    def exit_code(self) -> int:
        if self.local_only or self.busy:
            return ExitCode.OK
        if self.held_by_config:  # the owner's to resolve: nothing sends them until the configuration does
            return ExitCode.ATTENTION
        return ExitCode.DEGRADED if self.degraded else ExitCode.OK


def note_state(report: Tally, box, holds, decision_of, now: float) -> None:
    """What holds `box` up now, into `report`: the configuration's holds, the outage, the stopped workspaces, the
    items in doubt. `decision_of(item)` reads a pending item's decision (for when the oldest held was decided)."""
    report.pending = len(box.pending)
    groups = holds.groups(lambda key: box.pending[key][KIND])
    for group in groups:
        group["oldest_at"] = decision_of(group["oldest"]).get("ts")
    report.held_by_config = groups
    report.backoff = dict(box.backoff) if box.backoff else None
    report.refused = [
        {
            "workspace": ws,
            "since": ev.get("ts"),
            "status": ev.get("status"),
            "problem": ev.get("problem"),
            "secret": ev.get("secret"),
        }
        for ws, ev in box.stopped.items()
    ]
    pending = box.pending.items()
    if holds.held or box.stopped:  # they wait for something else: not behind an item in doubt
        pending = ((key, r) for key, r in pending if key not in holds.held and r[WS] not in box.stopped)
    report.in_doubt = in_doubt(pending, box.attempts, now)


def in_doubt(pending: Iterable[tuple[str, tuple]], attempts: Mapping[str, dict], now: float) -> list[dict]:
    """What waits on an in-doubt lookup, for `send` and `sync`: one entry per attempt line whose items are still in
    doubt, in outbox order, with its items, when it was attempted, when it may be looked up (`lookup_at`; None: by
    the next send), and how many later items wait behind it (as retry.Hold holds them). `pending`: (item, outbox
    record) pairs in outbox order."""
    if not attempts:
        return []
    wait = settle_wait_s()
    groups: dict[tuple, dict] = {}
    behind: dict[object, dict] = {}  # what an in-doubt item holds -> the entry it waits behind
    for key, record in pending:
        attempt = attempts.get(key)
        if attempt is None:
            if behind:  # nothing is behind anything before the first item in doubt
                entry = behind.get(held_by(record[KIND], record[WS], record[SESSION]))
                if entry is not None:
                    entry["waiting_behind"] += 1
            continue
        holds = held_by(record[KIND], record[WS], record[SESSION])
        group_key = (holds, attempt.get("ts"), attempt.get("hsession"))
        entry = groups.get(group_key)
        if entry is None:
            when = settle_at(attempt, now, wait)
            entry = groups[group_key] = {
                "workspace": record[WS],
                "session": None if holds == "edits" else record[SESSION],
                "hsession": attempt.get("hsession"),
                "kind": record[KIND] or "turn",
                "items": [],
                "attempted_at": attempt.get("ts"),
                "lookup_at": format_time(when) if when is not None else None,
                "waiting_behind": 0,
            }
        entry["items"].append(key)
        behind.setdefault(holds, entry)
    return list(groups.values())


def _in(seconds: float) -> str:
    return f"in {seconds:.0f} s" if seconds < 120 else f"in {seconds / 60:.0f} min"


def held_line(g: dict) -> str:
    return (
        f"{g['turns'] + g['edits'] + g.get('cards', 0)} item(s) held that would write to {g['workspace'] or '(no workspace)'} as "
        f"{g['role'] or '(no role)'} ({g['reason']}): {g['explain']}; nothing is sent for them"
        + cite_runbook("honcho-held-by-config")
    )


def refused_line(r: dict) -> str:
    why = (
        f"bxmem refused its key file: {r['problem']}"
        if r.get("problem")
        else f"Honcho refused its key (HTTP {r.get('status')})"
    )
    return (
        f"sends to {r['workspace']} stopped since {r.get('since')}: {why}; its items wait until "
        f"secrets.{r.get('secret')} changes" + cite_runbook("honcho-key-refused")
    )


def in_doubt_line(d: dict, now: float) -> str:
    what = f"{len(d['items'])} {d['kind'] if d['kind'] in ALONE else 'turn'}(s)"
    where = f"in {d['workspace']}" if d["kind"] in ALONE else f"of session {d['session']} in {d['workspace']}"
    if d["lookup_at"] is None:
        when = "looked up in Honcho by the next send"
    else:
        at = parse_time(d["lookup_at"])
        when = f"looked up in Honcho at {d['lookup_at']}" + (f" ({_in(max(0.0, at - now))})" if at else "")
    behind = f"; {d['waiting_behind']} later item(s) wait behind them" if d["waiting_behind"] else ""
    # No time: no request is behind it (an edit requeued after part of its work, an item seen settled before the
    # ledger was restored).
    how = f"sent at {d['attempted_at']} with no answer" if d["attempted_at"] else "perhaps in Honcho already"
    return f"in doubt: {what} {where} (first {d['items'][0]}), {how}; {when}{behind}" + cite_runbook("honcho-in-doubt")


def outage_line(backoff: dict, pending: int | None, now: float) -> str:
    error = f" ({backoff['error']})" if backoff.get("error") else ""
    wait = f"; {pending} item(s) wait" if pending else ""
    until = next_try(backoff, now) or now  # never further off than the backoff's longest wait, whatever the clock did
    return (
        f"Honcho unreachable since {backoff.get('since')}{error}; next try at {format_time(until)} "
        f"({_in(until - now)}){wait}" + cite_runbook("honcho-unreachable")
    )


def holding_lines(report: Tally, now: float) -> list[str]:
    out = []
    said = report.said
    if report.backoff and ("outage",) not in said:
        out.append(outage_line(report.backoff, report.pending, now))
    out += [refused_line(r) for r in report.refused if ("refused", r["workspace"]) not in said]
    out += ["held: " + held_line(g) for g in report.held_by_config if ("held", _held_key(g)) not in said]
    out += [in_doubt_line(d, now) for d in report.in_doubt if ("doubt", _doubt_key(d)) not in said]
    return out


def announce(announced: dict, report: Tally, now: float) -> None:
    """Log a lasting state (items held by the configuration, items in doubt) to the journal once when it starts or
    changes and once when it ends; `announced` remembers what was said. The outage and a refused key are logged
    where they start and end (runner.py)."""
    groups = {_held_key(g): g for g in report.held_by_config}
    said = {tuple(key) for key in announced.get("held", [])}
    for key, g in groups.items():
        if key not in said:
            log.warning(held_line(g))
            report.said.add(("held", key))
    for key in said - groups.keys():
        notice(
            f"nothing is held any more that would write to {key[0] or '(no workspace)'} as {key[1] or '(no role)'} "
            f"({key[3]})"
        )
    announced["held"] = sorted([list(k) for k in groups], key=repr)
    doubts = {_doubt_key(d): d for d in report.in_doubt}
    said = {tuple(key) for key in announced.get("in_doubt", [])}
    for key, d in doubts.items():
        if key not in said:
            log.warning(in_doubt_line(d, now))
            report.said.add(("doubt", key))
    for key in said - doubts.keys():
        notice(
            f"the items in doubt since {key[2]} ({'edits' if key[1] is None else 'session ' + str(key[1])} in "
            f"{key[0]}) are settled"
        )
    announced["in_doubt"] = sorted([list(k) for k in doubts], key=repr)


def _held_key(g: dict) -> tuple:
    return (g["workspace"], g["role"], g["now"], g["reason"])


def _doubt_key(d: dict) -> tuple:
    return (d["workspace"], d["session"], d["attempted_at"])
