"""`bxmem audit`: the agent's workspaces read back, ids and counters only, and held against the ledger.
The kinds of finding are docs/interfaces.md's; each has its runbook entry, `audit-<kind>`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.commands.outbox_actions import check_reason
from bxmem.config.loader import Config, read_key
from bxmem.errors import ExitCode, NotFound, cite_runbook
from bxmem.formats.shapes import dict_of, integer, record, string
from bxmem.honcho.answers import is_honcho_id
from bxmem.store.ledger import Ledger, ReadResult, now_iso
from bxmem.store.ledger_events import ACCEPTED, DECIDED, REROUTED, SENT, accepted
from bxmem.store.outbox import Outbox
from bxmem.store.state_json import load_json, write_json
from bxmem.trust import printed_fields
from bxmem.trust.write_policy import WRITE_ROLES, roles_of, writable

# The whole command's deadline: past it the audit is incomplete (exit 7), never hung. A legitimate audit of 100,000
# messages takes about a thousand requests, some 30 s.
DEADLINE_S = 300.0
SCHEMA = "bxmem.audit/1"  # `audit --json` (bxmem/schemas/audit.schema.json)
SUMMARY_FILE = "audit.json"  # the last run's counts, for bxmem sync
# audit.json as AuditReport.summary writes it; of any other shape it is not shown (the next audit writes it again).
SUMMARY_SHAPE = record({"at": string, "discrepancies": dict_of(integer(1)), "accepted": integer(0)})
# An edit's or a card's actions that write messages (their ids are in its `sent` line's results).
MESSAGE_ACTIONS = ("fleet-message", "retract", "card", "retract-card")
# Every kind of finding; each has its runbook entry, audit-<kind>.
KINDS = (
    "missing",
    "duplicate",
    "misrouted",
    "role-changed",
    "not-recorded",
    "foreign-agent-message",
    "missing-conclusion",
    "unexpected-conclusion",
    "duplicate-conclusion",
)

# how each field of a discrepancy is printed (trust/printed_fields.py)
_SHOWN = {
    "message": printed_fields.honcho_id,
    "session": printed_fields.honcho_id,
    "conclusion": printed_fields.honcho_id,
    "of": printed_fields.honcho_id,
    "item": printed_fields.item,
    "written_by": printed_fields.item,
}


def _shown(name: str, value: object) -> object:
    if value is None or (type(value) is int):
        return value
    return _SHOWN.get(name, printed_fields.token)(value)


@dataclass
class AuditReport:
    discrepancies: list[dict] = field(default_factory=list)
    messages: int = 0
    conclusions: int = 0
    workspaces: list[str] = field(default_factory=list)
    # Items the ledger sent to a workspace that is not one of this agent's now
    # (renamed, or a [[honcho.read]] source): not read as if it were ours.
    not_audited: dict[str, dict] = field(default_factory=dict)  # workspace -> {"items", "now"}
    accepted: list[dict] = field(default_factory=list)  # findings the owner accepted: each with its "reason"
    _ids: set[str] = field(default_factory=set)  # the discrepancies' ids

    def add(self, kind: str, workspace: str, **what: object) -> None:
        """A discrepancy, every field printed by trust/printed_fields.py; its id (what `audit --accept` names) is
        made of those fields."""
        what = {name: _shown(name, value) for name, value in what.items()}
        subject = (
            what.get("message")
            or what.get("conclusion")
            or (f"{what.get('item')}#{what['part']}" if what.get("part") is not None else what.get("item"))
        )
        finding = f"{kind}:{workspace}:{subject}"
        # Once per id: a finding about an item (misrouted, role-changed) is met at each of its
        # messages, and one item is one discrepancy, however many parts say it.
        if finding not in self._ids:
            self._ids.add(finding)
            self.discrepancies.append({"id": finding, "kind": kind, "workspace": workspace, **what})

    def set_aside(self, accepted: dict[str, str]) -> None:
        for finding in [d for d in self.discrepancies if d["id"] in accepted]:
            self.discrepancies.remove(finding)
            self.accepted.append({**finding, "reason": accepted[finding["id"]]})

    def as_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "workspaces": self.workspaces,
            "messages": self.messages,
            "conclusions": self.conclusions,
            "discrepancies": self.discrepancies,
            "not_audited": self.not_audited,
            "accepted": self.accepted,
        }

    def lines(self) -> list[str]:
        out = [f"audited {', '.join(self.workspaces)}: {self.messages} messages, {self.conclusions} conclusions"]
        for ws, left in self.not_audited.items():
            now = f"now {left['now']}" if left["now"] else "not in the configuration"
            out.append(
                f"not audited: {left['items']} item(s) sent to {ws} ({now}): it is not one of this agent's "
                "workspaces any more, so it is not read as one"
            )
        out += [
            "  " + " ".join(f"{k}={v}" for k, v in d.items()) + cite_runbook(f"audit-{d['kind']}")
            for d in self.discrepancies
        ]
        out += [f"  accepted: {d['id']} ({d['reason']})" for d in self.accepted]
        return out + ["no discrepancies" if not self.discrepancies else f"{len(self.discrepancies)} discrepancies"]

    def summary(self, at: str) -> dict:
        kinds: dict[str, int] = {}
        for d in self.discrepancies:
            kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        return {"at": at, "discrepancies": dict(sorted(kinds.items())), "accepted": len(self.accepted)}

    @property
    def exit_code(self) -> int:
        return ExitCode.ATTENTION if self.discrepancies else ExitCode.OK


@dataclass
class Expected:
    """What the ledger says: where each item was decided to go (its first decision, as the outbox takes it) and the
    message ids Honcho gave each item sent."""

    decided: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # item -> (ws, role), rerouted too
    sent: dict[str, tuple[str | None, list[str | None]]] = field(default_factory=dict)  # item -> (ws, ids by part)
    sent_to: dict[str, str | None] = field(default_factory=dict)  # every item sent (conclusions too) -> ws
    accepted: dict[str, str] = field(default_factory=dict)  # finding id -> the owner's reason


def _expected(config: Config) -> tuple[Expected, Outbox]:
    ledger = Ledger(config.paths.ledger)
    expected = Expected()
    for ev in ledger.iter_from(0, ReadResult()):
        if ev.get("ev") == DECIDED and isinstance(ev.get("item"), str):
            expected.decided.setdefault(ev["item"], (ev.get("ws"), ev.get("role")))
        elif ev.get("ev") == REROUTED and ev.get("item") in expected.decided:  # the owner sent it where its role is now
            expected.decided[ev["item"]] = (ev.get("ws"), expected.decided[ev["item"]][1])
        elif ev.get("ev") == ACCEPTED and isinstance(ev.get("finding"), str):
            expected.accepted[ev["finding"]] = str(ev.get("reason"))
        elif ev.get("ev") == SENT and isinstance(ev.get("item"), str):
            expected.sent_to[ev["item"]] = ev.get("ws")
            if ev["item"].startswith("turn:"):
                expected.sent[ev["item"]] = (ev.get("ws"), _recorded_ids(ev.get("ids")))
            results = ev.get("results")
            for result in results if isinstance(results, list) else []:
                if isinstance(result, dict) and result.get("do") in MESSAGE_ACTIONS and result.get("ids"):
                    expected.sent[ev["item"]] = (ev.get("ws"), _recorded_ids(result["ids"]))
    box = Outbox.load(config.paths.state, ledger)
    return expected, box


def _save_summary(config: Config, report: AuditReport) -> None:
    """For sync: beside the jobs' state, which audit never creates (a read-only command)."""
    if config.paths.state.is_dir():
        write_json(config.paths.state / SUMMARY_FILE, report.summary(now_iso()))


def _recorded_ids(value: object) -> list[str | None]:
    """Message ids the ledger recorded, by part, checked again: written from an
    older answer, one that is not a Honcho id (None here) is never found, so it is
    reported missing, never used."""
    return [i if is_honcho_id(i) else None for i in value] if isinstance(value, list) else []


def read_summary(state_dir: Path) -> tuple[dict | None, str | None]:
    return load_json(state_dir / SUMMARY_FILE, SUMMARY_SHAPE)


def audit(config: Config) -> AuditReport:
    from bxmem.honcho.client import AuditClient  # deferred: command (sync imports this module; only audit asks Honcho)
    from bxmem.honcho.http import monotonic  # deferred: command

    honcho = config.honcho
    if honcho is None:  # the CLI refuses a local-only audit before this
        raise ValueError("audit needs a [honcho] section")
    config.paths.require_home()
    report = AuditReport()
    expected, box = _expected(config)
    roles = roles_of((ws.role, ws.name) for ws in config.workspaces())
    for where in expected.sent_to.values():
        if isinstance(where, str) and not writable(where, roles):
            left = report.not_audited.setdefault(
                printed_fields.token(where) or "", {"items": 0, "now": roles.get(where)}
            )
            left["items"] += 1
    ends_by = monotonic() + DEADLINE_S
    for role in WRITE_ROLES:
        workspace = config.workspace(role)
        report.workspaces.append(workspace.name)
        with AuditClient(honcho.url, workspace.name, read_key(workspace), ends_by=ends_by) as client:
            _messages(client, role, workspace.name, honcho.agent, expected, box, report)
            if role == "trusted":
                _conclusions(client, box, workspace.name, (honcho.agent, honcho.owner), report)
    report.set_aside(expected.accepted)
    _save_summary(config, report)
    return report


def _messages(client, role: str, ws: str, agent: str, expected: Expected, box: Outbox, report: AuditReport) -> None:
    """Every message of the workspace this agent answers for: in the fleet only those under its peer, whatever
    metadata the others carry."""
    from bxmem.honcho.client import Missing  # deferred: command (as in audit)

    try:
        sessions = list(client.sessions())  # Honcho ids, each checked (honcho/answers.py's listed_id)
    except Missing:
        sessions = []
    seen: Counter = Counter()
    found: set[str] = set()
    unrecorded: list[tuple[str, int, str, str]] = []  # (item, part, message id, session)
    for session in sessions:
        # each as honcho/answers.py's listed_message checked it
        for message in client.list_messages(session, {"peer_id": agent} if role == "fleet" else None):
            report.messages += 1
            meta = message["metadata"]
            item, writer, part = meta.get("bxmem_item"), meta.get("bxmem_agent"), meta.get("part")
            if not isinstance(item, str) or (writer is not None and writer != agent) or type(part) is not int:
                # Under this agent's peer but not written by this agent's bxmem (which writes
                # every part as a number); in its own workspaces, a message another agent's
                # bxmem wrote is not ours either.
                if message["peer_id"] == agent or isinstance(item, str):
                    report.add("foreign-agent-message", ws, message=message["id"], session=session)
                continue
            seen[(item, part)] += 1
            found.add(message["id"])
            decided_ws, decided_role = expected.decided.get(item, (ws, None))
            if item not in expected.decided:
                report.add("not-recorded", ws, item=item)
            elif decided_ws != ws:
                report.add("misrouted", ws, item=item, decided=decided_ws)
            elif decided_role != role:
                # Sent here when this workspace had the role decided; the configuration has
                # changed it since, and readers now take it as this role.
                report.add("role-changed", ws, item=item, decided=decided_role, now=role)
            elif item not in expected.sent:
                if item not in box.attempts:
                    report.add("not-recorded", ws, item=item)
            elif message["id"] not in expected.sent[item][1]:
                unrecorded.append((item, part, message["id"], session))
    for (item, part), count in seen.items():
        if count > 1:
            report.add("duplicate", ws, item=item, part=part, copies=count)
    for item, part, message_id, session in unrecorded:
        if seen[(item, part)] == 1:  # no copy of a part the ledger recorded: a message bxmem never wrote
            report.add("not-recorded", ws, item=item, part=part, message=message_id, session=session)
    for item, (where, ids) in expected.sent.items():
        if where != ws:
            continue
        for part, recorded in enumerate(ids):
            if recorded not in found:
                report.add("missing", ws, item=item, part=part)


def _conclusions(client, box: Outbox, ws: str, peers: tuple[str, str], report: AuditReport) -> None:
    live: dict[str, str] = {}  # conclusion id -> the ref that wrote it
    for ref, c in box.conclusions.items():
        if c.get("ws") == ws and not c.get("deleted_by"):
            if is_honcho_id(c.get("id")):
                live[c["id"]] = ref
            else:  # recorded from an older answer that was not usable: it cannot be found
                report.add("missing-conclusion", ws, conclusion=c.get("id"), written_by=ref)
    found: set[str] = set()
    for peer in peers:
        # Each as honcho/answers.py's listed_conclusion checked it: a Honcho id and its text.
        listed = list(client.list_conclusions({"observer_id": peer, "observed_id": peer}))
        # Texts are compared here and never reported; a live one is named by its id.
        live_texts = {c["content"]: c["id"] for c in listed if c["id"] in live}
        for conclusion in listed:
            report.conclusions += 1
            found.add(conclusion["id"])
            if conclusion["id"] in live:
                continue
            twin = live_texts.get(conclusion["content"])
            if twin is not None:
                report.add("duplicate-conclusion", ws, conclusion=conclusion["id"], peer=peer, of=twin)
            else:
                report.add("unexpected-conclusion", ws, conclusion=conclusion["id"], peer=peer)
    for conclusion_id, ref in live.items():
        if conclusion_id not in found:
            report.add("missing-conclusion", ws, conclusion=conclusion_id, written_by=ref)


def accept(config: Config, report: AuditReport, ids: list[str], reason: str | None) -> None:
    """The owner accepts findings of this audit (`bxmem audit --accept ID --reason TEXT`):
    an `accepted` line each, so later audits set them aside. Every id must be one of
    this audit's findings (NotFound, nothing written, otherwise)."""
    why = check_reason(reason, "audit --accept")
    found = {d["id"] for d in report.discrepancies}
    unknown = [i for i in ids if i not in found and i not in {a["id"] for a in report.accepted}]
    if unknown:
        raise NotFound(f"no finding {unknown[0]!r} in this audit (bxmem audit lists each finding's id)")
    new = [i for i in dict.fromkeys(ids) if i in found]
    if new:
        Ledger(config.paths.ledger).append([accepted(i, why) for i in new])
    report.set_aside({i: why for i in new})
    _save_summary(config, report)
