"""`bxmem sync`: reads only, takes no job lock, and never shows message text or a key."""

from __future__ import annotations

import re
import time

from bxmem.commands import artifact_owner, live_checks
from bxmem.commands import decide_state as decide_state_file
from bxmem.commands.audit import SUMMARY_FILE as AUDIT_SUMMARY
from bxmem.commands.audit import read_summary as read_audit_summary
from bxmem.commands.outbox_actions import act
from bxmem.commands.send.plan import checked_against, is_session_gone, sendable
from bxmem.commands.send.report import in_doubt, in_doubt_line
from bxmem.config.loader import Config
from bxmem.errors import ExitCode, cite_runbook
from bxmem.formats.timestamps import age_text, format_time
from bxmem.store.ledger import Ledger
from bxmem.store.outbox import KIND, Outbox
from bxmem.store.workspace_roles import other_role, tainted_by
from bxmem.trust import printed_fields
from bxmem.trust.send_retry import next_try

SCHEMA = "bxmem.sync/1"  # `sync --json` (bxmem/schemas/sync.schema.json)
LONG_OUTAGE_S = 600
# brokerd answering this slowly, in a decide run that ran out of time, is why sessions wait.
SLOW_BROKER_S = 1.0
SHOWN_TEXT = 300  # the longest reason or problem sync prints from the ledger (printed_fields.text)
LOCAL_ONLY_SUFFIX = "; local-only"  # what decide and mirror add to the reason when there is no [honcho]


def status(config: Config, now: float | None = None, check: bool = True, prepare: bool = True) -> dict:
    """Where everything stands. With `check`, brokerd, Honcho and the key files
    are asked now (commands/live_checks.py); without, each says "not checked". Without
    `prepare`, memory/bxmem/ is read as it is, never made (metrics' read-only home)."""
    now = time.time() if now is None else now
    if prepare:
        config.paths.require_home()  # sync's own run; metrics reads whatever home there is
    state_dir = config.paths.state  # read only: sync creates nothing
    ledger = Ledger(config.paths.ledger)
    box = Outbox.load(state_dir, ledger)

    def pending() -> tuple:
        workspaces: dict[str, dict] = {}
        for own in config.workspaces():
            if own.role.startswith("read:"):
                continue
            workspaces[own.name] = {
                "role": own.role,
                "pending_turns": 0,
                "pending_edits": 0,
                "pending_cards": 0,
                "oldest_pending": None,
                "oldest_pending_at": None,
                "oldest_pending_age_s": None,
                "in_doubt": 0,
                "waiting_behind": 0,
                "failed": 0,
                "key_refused_since": None,
            }
        queue, holds = sendable(box, checked_against(config, box), lambda key: box.decision(ledger, key))
        held = holds.groups(lambda key: box.pending[key][KIND])
        for group in held:
            group["oldest_at"] = box.decision(ledger, group["oldest"]).get("ts")
            group["oldest_age_s"] = live_checks.age(group["oldest_at"], now)
        held = [_held(group) for group in held]  # as printed (trust/printed_fields.py): the attention lines too
        for item in box.pending_items():
            if item["item"] in holds.held:
                continue
            ws = workspaces[item["ws"]]  # not held: one of this agent's write workspaces
            ws[{"edit": "pending_edits", "card": "pending_cards"}.get(item.get("kind"), "pending_turns")] += 1
            if ws["oldest_pending"] is None:  # the outbox is in ledger order: the first is the oldest
                ws["oldest_pending"] = printed_fields.item(item["item"])
                ws["oldest_pending_at"] = printed_fields.date(box.decision(ledger, item["item"]).get("ts"))
                ws["oldest_pending_age_s"] = live_checks.age(ws["oldest_pending_at"], now)
        return workspaces, queue, held

    with ledger:  # decisions read back keep the ledger open
        workspaces, queue, held = box.reading(ledger, pending)
    doubts = in_doubt(((key, box.pending[key]) for key in queue), box.attempts, now)
    for entry in doubts:
        ws = workspaces[entry["workspace"]]
        ws["in_doubt"] += len(entry["items"])
        ws["waiting_behind"] += entry["waiting_behind"]
    failed = [_failed(item, ev) for item, ev in box.failed.items()]
    for ev in box.failed.values():
        if ev.get("ws") in workspaces:
            workspaces[ev["ws"]]["failed"] += 1
    refused = [
        {
            "workspace": printed_fields.token(ws),
            "status": _status(ev.get("status")),
            "since": printed_fields.date(ev.get("ts")),
            "secret": printed_fields.token(ev.get("secret")),
            "problem": _text(ev.get("problem")),
        }
        for ws, ev in box.stopped.items()
    ]
    for entry in refused:
        if entry["workspace"] in workspaces:
            workspaces[entry["workspace"]]["key_refused_since"] = entry["since"]
    outage: dict | None = None
    if box.backoff:
        until = next_try(box.backoff, now) or now  # within the backoff's own bound, whatever the clock did
        outage = {
            "since": printed_fields.date(box.backoff.get("since")),
            "for_s": live_checks.age(box.backoff.get("since"), now),
            "next_try_at": format_time(until),
            "next_try_in_s": until - now,
            "error": _text(box.backoff.get("error")),
        }
    decide_state, unusable = decide_state_file.read(state_dir)
    decide_state = decide_state or {}
    waiting = sum(len(turns) for turns in (decide_state.get("undecided") or {}).values())
    last_run: dict = decide_state.get("last_run") or {}
    broker = {
        "undecided_turns": waiting,
        "unavailable_since": decide_state.get("broker_down_since"),
        "last_run": last_run or None,
    }
    cursors = (decide_state.get("logs") or {}).items()
    logs_unreadable = [
        {"log": str(config.paths.logs / f"{stem}.jsonl"), "why": c["error"]["why"], "since": c["error"]["since"]}
        for stem, c in cursors
        if c.get("error") and not c.get("gone")
    ]
    out_of_order = sum(c.get("out_of_order", 0) for _stem, c in cursors)
    nowhere: dict[str, int] = {}
    local_only = {"turns": 0, "edits": 0, "cards": 0}
    for key, count in box.decided.items():
        kind, role, reason = key.split("/", 2)
        if role == "none" and kind == "turn":
            nowhere[reason] = nowhere.get(reason, 0) + count
        if reason.endswith(
            LOCAL_ONLY_SUFFIX
        ):  # decide, mirror and artifact record mark what had a workspace but no [honcho]
            local_only[{"edit": "edits", "card": "cards"}.get(kind, "turns")] += count
    if check:
        first_waiting = next(iter(decide_state.get("undecided") or {}), None)
        live = live_checks.services(config, first_waiting)
        key_checks = live_checks.keys(config)
    else:
        live = {name: live_checks.not_checked("sync ran without checks") for name in ("brokerd", "honcho")}
        key_checks = [
            {
                "workspace": ws.name,
                "role": ws.role,
                "secret": f"secrets.{ws.secret}",
                "file": str(ws.key_file) if ws.key_file else None,
                **live_checks.not_checked("sync ran without checks"),
            }
            for ws in config.workspaces()
        ]
    audit_state, audit_unusable = read_audit_summary(state_dir)
    reused = reused_workspaces(config, box.roles)
    needs: list[tuple[str, str]] = [
        ("reused", reused_text(entry)) for entry in reused
    ]  # (kind, line): URGENCY ranks the kinds

    def need(kind: str, line: str) -> None:
        needs.append((kind, line))

    for line in live_checks.named_wrong(config, box, nowhere):
        need("owner", line)
    future = live_checks.future_times(box, decide_state, audit_state, now)
    if future:
        need("clock", live_checks.future_line(future))
    gone = [f for f in failed if is_session_gone(f["reason"])]
    doubted = [f for f in failed if f["in_doubt"] and f not in gone]
    if len(failed) > len(gone) + len(doubted):
        need(
            "failed",
            f"{len(failed) - len(gone) - len(doubted)} failed item(s): bxmem outbox resend or drop them "
            "once the cause is fixed" + cite_runbook("honcho-send-refused"),
        )
    if doubted:
        need(
            "failed",
            f"{len(doubted)} failed item(s) Honcho may hold (its answer was not usable): bxmem outbox "
            "resend looks each up before sending anything, once the cause is fixed; or drop"
            + cite_runbook("honcho-send-refused"),
        )
    if gone:
        need(
            "failed",
            f"{len(gone)} item(s) failed because Honcho deleted their session: bxmem outbox resend sends "
            "them to a new one, bxmem outbox drop gives them up" + cite_runbook("honcho-session-deleted"),
        )
    for group in held:
        need(
            "held",
            f"{group['turns'] + group['edits'] + group.get('cards', 0)} item(s) held that would write to {group['workspace'] or '(no workspace)'} as "
            f"{group['role'] or '(no role)'} ({group['reason']}); nothing is sent for them until the "
            "configuration says so again, or bxmem outbox reroute or drop" + cite_runbook("honcho-held-by-config"),
        )
    if refused:
        need("key", f"{len(refused)} workspace key(s) refused" + cite_runbook("honcho-key-refused"))
    if outage and (outage["for_s"] or 0) > LONG_OUTAGE_S:
        need("outage", "Honcho unreachable for over 10 minutes" + cite_runbook("honcho-unreachable"))
    if broker["unavailable_since"]:
        need("broker", f"{waiting} turn(s) undecided: brokerd cannot answer" + cite_runbook("broker-state-unavailable"))
    if logs_unreadable:
        first = logs_unreadable[0]
        need(
            "log",
            f"{len(logs_unreadable)} log(s) cannot be read, their turns wait undecided (first: {first['log']}: "
            f"{first['why']})" + cite_runbook("log-unreadable"),
        )
    if last_run.get("sessions_waiting") and (last_run.get("broker_slowest_s") or 0) >= SLOW_BROKER_S:
        need(
            "slow-broker",
            f"decide ran out of time with {last_run['sessions_waiting']} session(s) waiting: brokerd "
            f"questions took up to {last_run['broker_slowest_s']:g} s" + cite_runbook("broker-state-unavailable"),
        )
    for kind, count in ((audit_state or {}).get("discrepancies") or {}).items():
        need(
            "audit",
            f"bxmem audit found {count} {kind} at {(audit_state or {}).get('at')}: bxmem audit lists them; "
            "put right on the server, or bxmem audit --accept" + cite_runbook(f"audit-{kind}"),
        )
    for checked in key_checks:
        if checked["ok"] is False:  # that workspace alone stops until it is fixed
            ws = checked["workspace"]
            stops = f"recall and ask cannot read {ws}" if checked["role"].startswith("read:") else f"sends to {ws} stop"
            need("key", f"{checked['problem']}: {stops} until it is fixed" + cite_runbook("honcho-key-refused"))
    return {
        "schema": SCHEMA,
        "mode": "local-only" if config.local_only else "honcho",
        "honcho_url": config.honcho.url if config.honcho else None,
        "workspaces": workspaces,
        "held": held,
        "reused": reused,
        "failed": failed,
        "keys_refused": refused,
        "outage": outage,
        "broker": broker,
        "logs_unreadable": logs_unreadable,
        "log_lines_out_of_order": out_of_order,
        "decided_nowhere": dict(sorted(nowhere.items())),
        "decided_local_only": local_only,
        "artifacts": artifact_owner.sync_section(config, box, lambda line: need("artifacts", line)),  # before attention
        "checks": live,
        "keys": key_checks,
        "sent_items": box.sent_count,
        "last_sent": printed_fields.date(box.last_sent),
        "in_doubt": [_doubt(entry) for entry in doubts],
        "dropped_items": box.dropped,
        "audit": audit_state,
        "ledger_malformed_lines": box.malformed,
        "ledger_repeated_decisions": {"ignored": box.repeated, "first": printed_fields.item(box.first_repeated)},
        "future_times": future,
        "attention": [line for _kind, line in needs],
        "verdict": verdict(needs, workspaces, outage, live, doubts),
        # Legal, perhaps harmless, never a reason to exit 4 on its own: a server
        # with auth on refuses the keyless ones, and that refusal is attention.
        "warnings": [w for w in (live_checks.partial_keys(config),) if w]
        + (
            [
                f"{state_dir / decide_state_file.STATE_FILE}: {unusable}; shown as empty, decide rebuilds it on its next run"
            ]
            if unusable
            else []
        )
        + (
            [f"{state_dir / AUDIT_SUMMARY}: {audit_unusable}; not shown, the next bxmem audit writes it again"]
            if audit_unusable
            else []
        ),
    }


# What needs attention first, for sync's verdict line (docs/design.md, "Operating"): what stops every decision, then
# every send, one workspace's sends, its writes, one session's turns, items one by one, a slow decide, the artifact
# store, then what is already past.
URGENCY = (
    "broker",
    "outage",
    "key",
    "reused",
    "log",
    "held",
    "owner",
    "failed",
    "clock",
    "slow-broker",
    "artifacts",
    "audit",
)
_CITED = re.compile(r" \(see: bxmem runbook ([a-z-]+)\)$")


def verdict(needs: list[tuple[str, str]], workspaces: dict, outage: dict | None, live: dict, doubts: list) -> dict:
    """sync's first line: what needs attention first (URGENCY), or what is waiting on
    Honcho or brokerd though nothing needs the owner yet, or all clear; with the
    runbook entry that line names. `state` is attention, waiting or clear."""
    pending = sum(ws["pending_turns"] + ws["pending_edits"] + ws.get("pending_cards", 0) for ws in workspaces.values())
    if needs:
        _kind, line = min(needs, key=lambda need: URGENCY.index(need[0]))
        first = "" if len(needs) == 1 else f" ({len(needs)} things, the most urgent first)"
        cited = _CITED.search(line)
        return {"state": "attention", "line": f"needs attention{first}: {line}", "runbook": cited and cited.group(1)}
    waits: list[tuple[str, str]] = []
    honcho, broker = live.get("honcho") or {}, live.get("brokerd") or {}
    if outage:
        waits.append(
            (
                f"Honcho unreachable since {outage['since']} ({age_text(outage['for_s'])}), next try at "
                f"{outage['next_try_at']}; {pending} item(s) wait",
                "honcho-unreachable",
            )
        )
    elif honcho.get("ok") is False:
        waits.append(
            (f"Honcho does not answer now ({honcho['problem']}); {pending} item(s) wait", "honcho-unreachable")
        )
    if broker.get("ok") is False:
        waits.append((f"brokerd does not answer now ({broker['problem']})", "broker-state-unavailable"))
    if doubts:
        waits.append(
            (
                f"{sum(len(entry['items']) for entry in doubts)} item(s) in doubt, each looked up by a later send",
                "honcho-in-doubt",
            )
        )
    if waits:
        return {
            "state": "waiting",
            "line": "nothing needs attention yet; waiting: " + "; ".join(w for w, _ in waits),
            "runbook": waits[0][1],
        }
    answered = [name for name in ("brokerd", "Honcho") if (live.get(name.lower()) or {}).get("ok")]
    return {
        "state": "clear",
        "runbook": None,
        "line": "all clear: nothing needs attention"
        + (f", {pending} item(s) on their way" if pending else "")
        + (f" ({' and '.join(answered)} answered just now)" if answered else ""),
    }


def _text(value: object) -> str | None:
    return printed_fields.line(value, SHOWN_TEXT) if isinstance(value, str) else None


def _status(value: object) -> int | None:
    return value if type(value) is int else None


def _failed(item: str, ev: dict) -> dict:
    """A failed item as sync shows it, through trust/printed_fields.py, `in_doubt` when Honcho may hold what its
    attempt sent."""
    return {
        "item": printed_fields.item(item),
        "workspace": printed_fields.token(ev.get("ws")),
        "status": _status(ev.get("status")),
        "reason": _text(ev.get("reason")),
        "when": printed_fields.date(ev.get("ts")),
        "in_doubt": bool(ev.get("in_doubt")),
    }


def _held(group: dict) -> dict:
    return {
        **group,
        **{k: printed_fields.token(group[k]) for k in ("workspace", "role", "now")},
        "oldest": printed_fields.item(group["oldest"]),
        "oldest_at": printed_fields.date(group["oldest_at"]),
        "explain": _text(group["explain"]),
    }


def _doubt(entry: dict) -> dict:
    return {
        **entry,
        "workspace": printed_fields.token(entry["workspace"]),
        "session": printed_fields.token(entry["session"]),
        "hsession": printed_fields.honcho_id(entry["hsession"]),
        "items": [printed_fields.item(i) for i in entry["items"]],
        "attempted_at": printed_fields.date(entry["attempted_at"]),
    }


def reused_workspaces(config: Config, roles: dict) -> list[dict]:
    """The configured workspaces holding what this agent wrote in a role other than their role now: a write
    workspace, to which nothing more is written, or a read source labelled trusted, read as tainted."""
    out = []
    trusted_reads = {f"read:{s.agent}" for s in config.honcho.read if s.trust == "trusted"} if config.honcho else set()
    for ws in config.workspaces():
        if ws.role in trusted_reads:
            found = tainted_by(roles, ws.name)
        elif ws.role.startswith("read:"):
            continue  # read as untrusted already, and never written
        else:
            found = other_role(roles, ws.name, ws.role)
        if found is not None:
            out.append(
                {"workspace": ws.name, "role": ws.role, "written_as": found[0], "first": printed_fields.item(found[1])}
            )
    return out


def reused_text(entry: dict) -> str:
    ws, role, was, first = entry["workspace"], entry["role"], entry["written_as"], entry["first"]
    if role.startswith("read:"):
        return (
            f"{ws} is read as {role.removeprefix('read:')}'s trusted workspace, but this agent wrote it as its {was} "
            f"workspace (first {first}): recall and ask tag what it holds memory-tainted"
            + cite_runbook("honcho-workspace-reused")
        )
    tainted = role == "trusted" and was in ("untrusted", "fleet")
    return (
        f"{ws} is this agent's {role} workspace now, but this agent wrote it as its {was} workspace before "
        f"(first {first}): bxmem writes nothing more to it"
        + (", and ask answers from it memory-tainted" if tainted else "")
        + cite_runbook("honcho-workspace-reused")
    )


def retry_failed(config: Config):
    """Put every failed item back in the outbox, as `bxmem outbox resend --all-failed` does."""
    return act(config, "resend", [], all_failed=True)


def exit_code(report: dict) -> int:
    return ExitCode.ATTENTION if report["attention"] else ExitCode.OK


def _check_text(what: str, result: dict, ok_text: str, failed_text: str) -> str:
    if result["checked_at"] is None:
        return f"{what}: {result['problem']}"
    when = f"checked {result['checked_at']}" + (
        f", {result['deadline_s']:g} s deadline" if result["deadline_s"] else ""
    )
    return f"{what}: {ok_text if result['ok'] else failed_text + ': ' + result['problem']} ({when})"


def lines(report: dict) -> list[str]:
    """The owner's view as plain text, one fact per line: greppable, and whole
    in journald, a pipe or a mail (nothing is wrapped or cut)."""
    out = [report["verdict"]["line"]]
    honcho = report["checks"]["honcho"]
    if report["mode"] == "local-only":
        out.append("local-only: no [honcho] section, nothing is sent")
    else:
        out.append(f"Honcho: {report['honcho_url']}")
        out.append(_check_text("Honcho now", honcho, "answering (/health ok)", "not answering"))
    outage = report["outage"]
    if outage:
        error = f": {outage['error']}" if outage.get("error") else ""
        out.append(
            f"Honcho as send recorded: unreachable since {outage['since']} ({age_text(outage['for_s'])}){error}; "
            f"next try at {outage['next_try_at']} (in {age_text(outage['next_try_in_s'])})"
        )
    elif report["mode"] != "local-only":  # what the ledger knows, never more
        out.append(
            "Honcho as send recorded: no outage"
            + (f"; last sent {report['last_sent']}" if report["last_sent"] else "; nothing sent yet")
        )
    broker = report["broker"]
    out.append(_check_text("brokerd now", report["checks"]["brokerd"], "answering", "cannot answer"))
    if broker["unavailable_since"]:
        out.append(
            f"brokerd as decide recorded: unavailable since {broker['unavailable_since']}; "
            f"{broker['undecided_turns']} turn(s) undecided"
        )
    else:
        out.append(f"brokerd as decide recorded: no outage; {broker['undecided_turns']} turn(s) undecided")
    last_run = broker["last_run"]
    if last_run:
        slowest = (
            f", the slowest took {last_run['broker_slowest_s']:g} s" if last_run["broker_slowest_s"] is not None else ""
        )
        out.append(
            f"decide's last run (at {last_run['at']}): {last_run['broker_questions']} brokerd question(s){slowest}; "
            + (
                f"{last_run['sessions_waiting']} session(s) wait for the next run ({last_run['budget_s']:g} s budget spent)"
                if last_run["sessions_waiting"]
                else "every session reached"
            )
        )
    for entry in report["logs_unreadable"]:
        out.append(
            f"log {entry['log']} as decide recorded: {entry['why']} since {entry['since']}; tried again every minute"
        )
    if report["log_lines_out_of_order"]:
        out.append(
            f"logs: {report['log_lines_out_of_order']} line(s) naming a turn that had already ended skipped "
            "(a repeated or backwards turn number)"
        )
    for name, ws in report["workspaces"].items():
        oldest = (
            f"; oldest {ws['oldest_pending']} ({age_text(ws['oldest_pending_age_s'])})" if ws["oldest_pending"] else ""
        )
        doubt = (
            f" ({ws['in_doubt']} in doubt, {ws['waiting_behind']} waiting behind them)" if ws.get("in_doubt") else ""
        )
        out.append(
            f"outbox {name} ({ws['role']}): {ws['pending_turns']} turn(s) and {ws['pending_edits']} edit(s)"
            f"{artifact_owner.cards_text(ws.get('pending_cards'))} pending{doubt}, {ws['failed']} failed{oldest}"
        )
    now = time.time()
    out += [in_doubt_line(entry, now) for entry in report.get("in_doubt") or []]
    for g in report["held"]:
        out.append(
            f"held: {g['turns']} turn(s) and {g['edits']} edit(s) that would write to {g['workspace'] or '(no workspace)'} as "
            f"{g['role'] or '(no role)'} ({g['reason']}): {g['explain']}; oldest {g['oldest']} "
            f"({age_text(g['oldest_age_s'])})"
        )
    for key in report["keys"]:
        ok = f"{key['secret']} file {key['file']} ok (a regular file of this user's, mode 600, one key)"
        out.append(_check_text(f"key for {key['workspace']}", key, ok, "send would refuse it"))
    for entry in report["keys_refused"]:
        since = f"since {entry['since']}"
        by = (
            f"by bxmem {since}: {entry['problem']}"
            if entry.get("problem")
            else f"by Honcho (HTTP {entry['status']}) {since}"
        )
        out.append(f"key for {entry['workspace']} refused {by}")
    for f in report["failed"]:
        status = f"HTTP {f['status']}" if f["status"] else "refused by bxmem"
        doubt = "; Honcho may hold it: a resend looks it up first" if f.get("in_doubt") else ""
        out.append(
            f"failed: {f['item']} in {f['workspace']}: {status}: {f['reason'] or '-'}{doubt} (at {f['when'] or '-'})"
        )
    out.append(f"sent: {report['sent_items']} item(s); last at {report['last_sent'] or 'never'}")
    if report.get("dropped_items"):
        out.append(f"dropped by the owner: {report['dropped_items']} item(s) (bxmem outbox drop; the ledger holds why)")
    audit = report.get("audit")
    if audit:
        found = ", ".join(f"{kind} {n}" for kind, n in audit["discrepancies"].items()) or "no discrepancies"
        out.append(
            f"audit's last run (at {audit['at']}): {found}"
            + (f"; {audit['accepted']} accepted" if audit["accepted"] else "")
        )
    if report["decided_nowhere"]:
        out.append(
            "turns decided nowhere: " + ", ".join(f"{reason} {n}" for reason, n in report["decided_nowhere"].items())
        )
    local = report["decided_local_only"]
    if any(local.values()):
        out.append(
            f"decided while local-only: {local['turns']} turn(s), {local['edits']} edit(s)"
            f"{artifact_owner.cards_text(local.get('cards'))}; never sent (Honcho is not rebuilt from the logs)"
        )
    if report["ledger_malformed_lines"]:
        out.append(f"ledger: {report['ledger_malformed_lines']} malformed line(s) skipped")
    repeated = report["ledger_repeated_decisions"]
    if repeated["ignored"]:
        out.append(
            f"ledger: {repeated['ignored']} second decision(s) ignored, the first decision stands "
            f"(first {repeated['first']})"
        )
    out += artifact_owner.sync_lines(report.get("artifacts")) + [f"warning: {line}" for line in report["warnings"]]
    out += [f"attention: {line}" for line in report["attention"]]
    return out
