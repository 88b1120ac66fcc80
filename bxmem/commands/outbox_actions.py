"""`bxmem outbox list|drop|resend|reroute`. Nothing already in Honcho is sent again: an in-doubt item is
refused until send has looked it up, and reroute never changes an item's role. All or nothing under send's job
lock (an item that cannot be acted on stops it before anything is written: exit 5 or 6).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from bxmem.commands.send.plan import checked_against, sendable
from bxmem.commands.send.report import in_doubt
from bxmem.config.loader import Config
from bxmem.errors import BxmemError, ExitCode, NotFound, Refused, StorageError, UsageError, cite_runbook
from bxmem.formats.timestamps import age_text, format_time, parse_time
from bxmem.store import ledger_events
from bxmem.store.files import JobLock
from bxmem.store.ledger import Ledger, LedgerChanged
from bxmem.store.outbox import KIND, ROLE, SESSION, WS, Outbox
from bxmem.trust import printed_fields
from bxmem.trust.send_retry import ALONE, held_by, next_try
from bxmem.trust.write_policy import BEHIND_HELD_EDIT, ROLE_UNKNOWN, WRITE_ROLES, check_item, writes_of

R = TypeVar("R")
SCHEMA = "bxmem.outbox/1"
MAX_REASON = 200
SHOWN_TEXT = 300  # the longest reason `list` prints from the ledger (printed_fields.text)
LOCK_WAIT_S = 10.0  # a send run in progress: wait this long for it before refusing


@dataclass
class Survey:
    box: Outbox
    ledger: Ledger
    roles: Mapping[str, str]
    config: Config
    written: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # what the ledger says each was written as
    held: dict = field(default_factory=dict)  # item -> write_policy.Held
    doubt: dict[str, dict] = field(default_factory=dict)  # item -> its send.report.in_doubt entry
    behind: dict[str, dict] = field(default_factory=dict)  # item -> the in-doubt entry it waits behind

    @classmethod
    def take(cls, config: Config, box: Outbox | None = None) -> Survey:
        ledger = Ledger(config.paths.ledger)
        if box is None:
            config.paths.require_home()
            box = Outbox.load(config.paths.state, ledger)  # read only: the checkpoint is send's to save
        now = checked_against(config, box)  # the rule send holds items to, reused workspaces too
        survey = cls(box, ledger, now.roles, config, now.written)
        queue, config_holds = sendable(box, now, lambda key: box.decision(ledger, key))
        survey.held = config_holds.held
        for entry in in_doubt(((key, box.pending[key]) for key in queue), box.attempts, time.time()):
            survey.doubt.update((key, entry) for key in entry["items"])
        blocked: dict[object, dict] = {}  # what an in-doubt item holds back (retry.Hold) -> its entry
        for key in queue if survey.doubt else ():
            record = box.pending[key]
            holds = held_by(record[KIND], record[WS], record[SESSION])
            if key in survey.doubt:
                blocked.setdefault(holds, survey.doubt[key])
            elif holds in blocked:
                survey.behind[key] = blocked[holds]
        return survey

    def state(self, key: str) -> dict | None:
        box = self.box
        if key in box.failed:
            ev = box.failed[key]
            record = ev.get("decided")
            status = f"HTTP {ev['status']}" if ev.get("status") else "refused by bxmem"
            doubt = "; Honcho may hold it: a resend looks it up first" if ev.get("in_doubt") else ""
            return self._entry(
                key, record, ev.get("ws"), "failed", f"{status}: {ev.get('reason') or '-'}{doubt}", ev.get("ts")
            )
        record = box.pending.get(key)
        if record is None:
            return None
        at = self.box.decision(self.ledger, key).get("ts")
        if key in self.held:
            why = self.held[key]
            return self._entry(key, record, record[WS], "held", f"{why.reason}: {why.explain()}", at)
        if record[WS] in box.stopped:
            return self._entry(key, record, record[WS], "stopped", "the workspace's key is refused", at)
        if key in self.doubt:
            entry = self.doubt[key]
            when = f"looked up at {entry['lookup_at']}" if entry["lookup_at"] else "looked up by the next send"
            return self._entry(
                key, record, record[WS], "in-doubt", f"sent at {entry['attempted_at']} with no answer; {when}", at
            )
        if key in self.behind:
            return self._entry(
                key, record, record[WS], "waiting", f"behind {self.behind[key]['items'][0]}, which is in doubt", at
            )
        if self.box.backoff:
            return {
                **self._entry(
                    key,
                    record,
                    record[WS],
                    "pending",
                    f"waits for Honcho, unreachable since "
                    f"{printed_fields.date(self.box.backoff.get('since'))}; next try at "
                    f"{format_time(self.box.backoff['until'])}",
                    at,
                ),
                "way_out": OUTAGE_WAY_OUT,
            }
        return self._entry(key, record, record[WS], "pending", "on its way", at)

    def outage(self, now: float | None = None) -> dict | None:
        """Honcho's outage as send recorded it (its backoff), and what waits for Honcho
        behind it: every pending item that is not held, failed or stopped by its key."""
        backoff = self.box.backoff
        if not backoff:
            return None
        now = time.time() if now is None else now
        waiting: dict[str, int] = {}
        for key, record in self.box.pending.items():
            if key not in self.held and key not in self.box.failed and record[WS] not in self.box.stopped:
                name = printed_fields.token(record[WS]) or "(no workspace)"
                waiting[name] = waiting.get(name, 0) + 1
        since = parse_time(backoff.get("since"))
        until = (
            next_try(backoff, now) or now
        )  # within the backoff's own bound, whatever the clock did (trust/send_retry.py)
        # A start in the future: its age is not known (sync says why).
        age = None if since is None or since > now + 60 else max(0.0, now - since)
        return {
            "since": printed_fields.date(backoff.get("since")),
            "for_s": age,
            "next_try_at": format_time(until),
            "next_try_in_s": until - now,
            "error": printed_fields.line(backoff["error"], SHOWN_TEXT)
            if isinstance(backoff.get("error"), str)
            else None,
            "waiting": sum(waiting.values()),
            "waiting_by_workspace": waiting,
        }

    def _entry(self, key: str, record: tuple | None, ws: object, state: str, why: str, at: object) -> dict:
        way_out = WAYS_OUT[state]
        if (
            state == "failed"
            and record is not None
            and check_item([(record[WS], record[ROLE])], self.roles, self.written)
        ):
            way_out = "bxmem outbox reroute (its workspace has another role now) or drop"
        # Printed (trust/printed_fields.py): the ledger's names and reasons, as sync prints them.
        return {
            "item": printed_fields.item(key),
            "kind": printed_fields.token(record[KIND]) if record else None,
            "workspace": printed_fields.token(ws),
            "role": printed_fields.token(record[ROLE]) if record else None,
            "state": state,
            "why": printed_fields.line(why, SHOWN_TEXT),
            "since": printed_fields.date(at),
            "way_out": way_out,
        }

    def stuck(self, everything: bool = False) -> list[dict]:
        keys = list(self.box.failed) + [k for k in self.box.pending if k not in self.box.failed]
        states = [s for s in (self.state(k) for k in keys) if s is not None]
        return states if everything else [s for s in states if s["state"] != "pending"]

    def known(self, key: str) -> bool:
        kind, _, rest = key.partition(":")
        session, _, number = rest.rpartition(":")
        if kind == ledger_events.TURN and number.isdigit():
            return any(low <= int(number) <= high for low, high in self.box.known_turns.get(session, []))
        return key in self.box.known_other


@dataclass
class ActionResult:
    action: str
    dry_run: bool
    items: list[dict] = field(default_factory=list)  # {"item", "workspace", "was", "to"?, "note"?}
    left: list[dict] = field(default_factory=list)  # chosen by --all-*, but not for this action: {"item", "why"}
    reason: str | None = None
    listing: list[dict] | None = None  # `list`
    outage: dict | None = None  # `list`: Honcho's outage as send recorded it, and what waits behind it

    def as_json(self) -> dict:
        if self.listing is not None:
            return {"schema": SCHEMA, "action": "list", "items": self.listing, "outage": self.outage}
        return {
            "schema": SCHEMA,
            "action": self.action,
            "dry_run": self.dry_run,
            "written": not self.dry_run and bool(self.items),
            "reason": self.reason,
            "items": self.items,
            "left": self.left,
        }

    def lines(self) -> list[str]:
        if self.listing is not None:
            out = [outage_line(self.outage)] if self.outage else []
            if not self.listing:
                out.append(
                    "nothing else is stuck: no item failed, is held or is in doubt"
                    if self.outage
                    else "nothing is stuck: every item in the outbox is on its way"
                )
            return out + [
                f"{s['state']}: {s['item']} in {s['workspace'] or '(no workspace)'} ({s['role'] or 'no role'}): "
                f"{s['why']}; {s['way_out']}"
                for s in self.listing
            ]
        verb = {"drop": "dropped", "resend": "re-queued", "reroute": "re-routed"}[self.action]
        head = "would be " + verb + " (dry run, nothing written)" if self.dry_run else verb
        out = [
            f"{head}: {i['item']} ({i['was']})"
            + (f" to {i['to']}" if i.get("to") else "")
            + (f": {i['note']}" if i.get("note") else "")
            for i in self.items
        ]
        out += [f"left: {i['item']}: {i['why']}" for i in self.left]
        if not self.items:
            out.append(f"nothing to {self.action}")
        elif not self.dry_run and self.action != "drop":
            out.append("the next bxmem send sends them")
        return out

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


def outage_line(outage: dict) -> str:
    error = f"; {outage['error']}" if outage["error"] else ""
    by = ", ".join(f"{ws} {n}" for ws, n in outage["waiting_by_workspace"].items())
    return (
        f"outage: Honcho unreachable since {outage['since']} ({age_text(outage['for_s'])}{error}); next try at "
        f"{outage['next_try_at']} (in {age_text(outage['next_try_in_s'])}); {outage['waiting']} item(s) wait behind it"
        + (f" ({by})" if by else "")
        + ", and go by themselves once Honcho answers"
        + cite_runbook("honcho-unreachable")
    )


# What gets an item of each state out (`list`), as the runbook entries say it.
WAYS_OUT = {
    "failed": "bxmem outbox resend (once the cause is fixed) or drop",
    "held": "bxmem outbox reroute or drop (or restore the configuration)",
    "stopped": "fix the key file (or bxmem outbox drop)",
    "in-doubt": "send settles it by itself",
    "waiting": "goes once the one before it is settled",
    "pending": "on its way",
}
OUTAGE_WAY_OUT = "goes by itself once Honcho answers"


def surveyed(config: Config, use: Callable[[Survey], R]) -> R:
    """`use(survey)`, run again once if the ledger was rewritten in place (`surveyed` folds again, said once)."""
    survey = Survey.take(config)
    try:
        return use(survey)
    except LedgerChanged as exc:
        survey.box.refold(survey.ledger, f"no longer holds what the outbox folded ({exc})")
        return use(Survey.take(config, survey.box))


def list_items(config: Config, everything: bool = False) -> ActionResult:
    def listing(survey: Survey) -> ActionResult:
        return ActionResult("list", True, listing=survey.stuck(everything), outage=survey.outage())

    return surveyed(config, listing)


def act(
    config: Config,
    action: str,
    items: list[str],
    *,
    all_failed: bool = False,
    all_held: bool = False,
    reason: str | None = None,
    dry_run: bool = False,
) -> ActionResult:
    """drop, resend or reroute: checked item by item, then written at once (or not at all)."""
    if action == "drop":
        reason = check_reason(reason)
    if not items and not all_failed and not all_held:
        raise UsageError(
            f"outbox {action}: name the items (ITEM...), or --all-failed"
            + (" or --all-held" if action != "resend" else "")
        )
    config.paths.require_home()
    lock = JobLock(config.paths.ledger, "send")
    if not dry_run and not _acquire(lock):
        raise Refused("a bxmem send is running and holds the outbox; run this again when it ends")
    try:
        return surveyed(config, lambda survey: _act(survey, action, items, all_failed, all_held, reason, dry_run))
    finally:
        lock.release()


def _act(
    survey: Survey, action: str, items: list[str], all_failed: bool, all_held: bool, reason: str | None, dry_run: bool
) -> ActionResult:
    result = ActionResult(action, dry_run, reason=reason)
    chosen = list(dict.fromkeys(items))
    if all_failed:
        chosen += [k for k in survey.box.failed if k not in chosen]
    if all_held:
        chosen += [k for k in survey.held if k not in chosen]
    events: list[Mapping[str, object]] = []
    renewed: set[tuple] = set()
    for key in chosen:
        try:
            events += PLANNERS[action](survey, key, result, renewed, reason)
        except LedgerChanged:
            raise  # the outbox is folded again, and every item checked again (surveyed)
        except BxmemError as exc:
            if key in items:
                raise  # named by the owner: all or nothing
            result.left.append({"item": key, "why": str(exc)})
    if events and not dry_run:
        survey.ledger.append(events)
        _remember(survey)
    return result


def _remember(survey: Survey) -> None:
    """The outbox as the action left it, saved under send's lock: a ledger put back from an older copy before send's
    next run would otherwise lose what was dropped, which the checkpoint keeps out for good. One that cannot be
    written is the next send's to fold."""
    state = survey.config.paths.state
    if not state.is_dir():
        return  # deleted with memory/bxmem/: the next send folds the ledger whole
    try:
        survey.box.catch_up(survey.ledger)
        survey.box.save(state)
    except StorageError:
        pass


def _acquire(lock: JobLock) -> bool:
    deadline = time.monotonic() + LOCK_WAIT_S
    while not lock.acquire():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def check_reason(reason: str | None, command: str = "outbox drop") -> str:
    text = " ".join((reason or "").split())
    if not text:
        raise UsageError(f"{command}: say why with --reason TEXT (it is kept in the ledger)")
    if len(text) > MAX_REASON or not text.isprintable():
        raise UsageError(f"{command}: --reason must be one line of at most {MAX_REASON} printable characters")
    return text


def _state_or_raise(survey: Survey, key: str) -> dict:
    state = survey.state(key)
    if state is not None:
        return state
    if survey.known(key):
        raise Refused(f"{key} is not in the outbox: it was sent, dropped, or decided to go nowhere")
    raise NotFound(f"no item {key!r} in the ledger")


def _plan_drop(
    survey: Survey, key: str, result: ActionResult, _renewed: set, reason: str | None
) -> list[Mapping[str, object]]:
    state = _state_or_raise(survey, key)
    if state["state"] == "in-doubt":
        raise Refused(f"{key} is in doubt ({state['why']}): it may be in Honcho already; drop it once send has looked")
    assert reason is not None  # act checked it
    result.items.append({"item": key, "workspace": state["workspace"], "was": state["state"]})
    failed = survey.box.failed.get(key)
    ws = failed.get("ws") if failed else survey.box.pending[key][WS]  # the ledger's own, not as printed
    return [ledger_events.dropped(key, ws, state["state"], reason)]


def _plan_resend(
    survey: Survey, key: str, result: ActionResult, renewed: set, _reason: str | None
) -> list[Mapping[str, object]]:
    state = _state_or_raise(survey, key)
    if state["state"] != "failed":
        raise Refused(f"{key} has not failed ({state['state']}: {state['why']}): only a failed item is sent again")
    record = survey.box.failed[key].get("decided")
    if record is None:
        raise Refused(f"{key} failed before it was decided with a workspace: there is nothing to send")
    held = check_item([(record[WS], record[ROLE])], survey.roles, survey.written)
    if held is not None:
        raise Refused(
            f"{key} cannot go to {record[WS]} now ({held.reason}: {held.explain()}): bxmem outbox reroute sends it "
            "where its role is now"
        )
    events: list[Mapping[str, object]] = [ledger_events.requeued(key)]
    known = (survey.box.setup.get(record[WS]) or {}).get("sessions", {}).get(record[SESSION])
    entry: dict = {"item": key, "workspace": record[WS], "was": "failed"}
    if known and known.get("gone"):
        entry["note"] = (
            f"its Honcho session {known['name']} is gone: to a new session, {record[SESSION]}-{known['n'] + 1}"
        )
        if (record[WS], record[SESSION]) not in renewed and not known.get("renew"):
            renewed.add((record[WS], record[SESSION]))
            events.insert(0, ledger_events.session_renewed(record[WS], record[SESSION], known["name"]))
    result.items.append(entry)
    return events


def _plan_reroute(
    survey: Survey, key: str, result: ActionResult, _renewed: set, _reason: str | None
) -> list[Mapping[str, object]]:
    state = _state_or_raise(survey, key)
    if state["state"] not in ("held", "failed"):
        raise Refused(f"{key} is {state['state']} ({state['why']}): only a held or failed item is re-routed")
    failed = survey.box.failed.get(key)
    record: tuple | None = failed.get("decided") if failed else survey.box.pending[key]
    if record is None:
        raise Refused(f"{key} failed before it was decided with a workspace: there is nothing to re-route")
    role, ws = record[ROLE], record[WS]
    if key in survey.held and survey.held[key].reason in (ROLE_UNKNOWN, BEHIND_HELD_EDIT):
        raise Refused(f"{key} cannot be re-routed: {survey.held[key].explain()}")
    if role not in WRITE_ROLES:
        raise Refused(f"{key} cannot be re-routed: its decision records no role that can be checked")
    to = survey.config.workspace(role).name  # the workspace of the role it was decided for: never another role
    if to == ws:
        raise Refused(
            f"{key} is already decided for {to}, this agent's {role} workspace: bxmem outbox resend sends it again"
        )
    target = check_item(
        [(to, role)], survey.roles, survey.written
    )  # the rule send holds it to: a re-route goes nowhere it may not
    if target is not None:
        raise Refused(f"{key} cannot be re-routed to {to}: {target.explain()}")
    if key in survey.box.attempts:
        raise Refused(
            f"{key} is in doubt in {ws} (it may be there already): it cannot move until send has looked it up"
        )
    if failed and failed.get("attempt"):
        raise Refused(
            f"{key} failed in {ws} with Honcho perhaps holding it (its answer was not usable): it cannot move; "
            "bxmem outbox resend looks it up there first, or drop it"
        )
    if failed and failed.get("results"):
        raise Refused(f"{key} did part of its work in {ws} before it failed: it cannot move; drop it")
    if record[KIND] in ALONE:
        decision = {**survey.box.decision(survey.ledger, key, record), "ws": to}
        held = check_item(writes_of(decision, survey.box.conclusions, survey.box.fleet), survey.roles, survey.written)
        if held is not None:
            raise Refused(f"{key} cannot be re-routed: it also writes to {held.workspace} ({held.explain()}); drop it")
    result.items.append({"item": key, "workspace": ws, "was": state["state"], "to": to})
    return [ledger_events.rerouted(key, to, role, str(ws))]


PLANNERS = {"drop": _plan_drop, "resend": _plan_resend, "reroute": _plan_reroute}
