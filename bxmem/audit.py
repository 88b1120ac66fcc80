"""`bxmem audit`: Honcho read back and held against the ledger.

For each of the agent's own workspaces it pages through every active session's
messages and the conclusions of the agent's and the owner's peers, keeping
only ids and counters, and reports each discrepancy by item and kind (never
text):

* `missing`: an item recorded sent is not there (or a part of it);
* `duplicate`: a part of an item is there more than once;
* `misrouted`: an item is in a workspace its decision did not name, for
  instance a turn decided untrusted, or nowhere, found in the trusted one;
* `not-recorded`: a message carries a bxmem item the ledger never sent;
* `foreign-agent-message`: a message under the agent's peer bxmem did not write;
* `missing-conclusion`, `unexpected-conclusion`: conclusions that differ from
  the live memory entries the ledger says were written;
* `duplicate-conclusion`: an unexpected conclusion of the same peer and text
  as a live one (a create Honcho stored after bxmem had looked for it).

Delivery is at-least-once (send.py): `duplicate` and `duplicate-conclusion`
are how a copy that got past the duplicate defence shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .config import Config, read_key
from .errors import ExitCode
from .ledger import Ledger, ReadResult
from .ledger_events import DECIDED, SENT
from .outbox import Outbox


@dataclass
class AuditReport:
    discrepancies: list[dict] = field(default_factory=list)
    messages: int = 0
    conclusions: int = 0
    workspaces: list[str] = field(default_factory=list)

    def add(self, kind: str, workspace: str, **what: object) -> None:
        self.discrepancies.append({"kind": kind, "workspace": workspace, **what})

    # What the command prints (jobs.show writes it): the report knows its own output.
    def as_json(self) -> dict:
        return {"workspaces": self.workspaces, "messages": self.messages, "conclusions": self.conclusions,
                "discrepancies": self.discrepancies}

    def lines(self) -> list[str]:
        out = [f"audited {', '.join(self.workspaces)}: {self.messages} messages, {self.conclusions} conclusions"]
        out += ["  " + " ".join(f"{k}={v}" for k, v in d.items()) for d in self.discrepancies]
        return out + ["no discrepancies" if not self.discrepancies else f"{len(self.discrepancies)} discrepancies"]

    @property
    def exit_code(self) -> int:
        return ExitCode.ATTENTION if self.discrepancies else ExitCode.OK


def _expected(config: Config) -> tuple[dict[str, str | None], dict[str, tuple[str | None, int]], Outbox]:
    """Where each item was decided to go, and what was sent: item -> (workspace, parts)."""
    ledger = Ledger(config.paths.ledger)
    decided: dict[str, str | None] = {}
    sent: dict[str, tuple[str | None, int]] = {}
    for ev in ledger.iter_from(0, ReadResult()):
        if ev.get("ev") == DECIDED:
            decided[ev["item"]] = ev.get("ws")
        elif ev.get("ev") == SENT:
            if ev["item"].startswith("turn:"):
                sent[ev["item"]] = (ev.get("ws"), len(ev.get("ids") or []))
            for result in ev.get("results") or []:
                if result.get("do") in ("fleet-message", "retract") and result.get("ids"):
                    sent[ev["item"]] = (ev.get("ws"), len(result["ids"]))
    box = Outbox.load(config.paths.ensure_state_dir(), ledger)
    return decided, sent, box


def audit(config: Config) -> AuditReport:
    from .honcho import AuditClient, Missing

    honcho = config.honcho
    if honcho is None:  # the CLI refuses a local-only audit before this
        raise ValueError("audit needs a [honcho] section")
    report = AuditReport()
    decided, sent, box = _expected(config)
    agent, owner = honcho.agent, honcho.owner
    for role in ("trusted", "untrusted", "fleet"):
        workspace = config.workspace(role)
        ws = workspace.name
        report.workspaces.append(ws)
        seen: Counter = Counter()
        with AuditClient(honcho.url, ws, read_key(workspace)) as client:
            try:
                sessions = list(s["id"] for s in client.sessions() if isinstance(s.get("id"), str))
            except Missing:
                sessions = []
            for session in sessions:
                for message in client.list_messages(session):
                    report.messages += 1
                    meta = message.get("metadata") or {}
                    item = meta.get("bxmem_item")
                    if not isinstance(item, str):
                        if message.get("peer_id") == agent:
                            report.add("foreign-agent-message", ws, message=message.get("id"), session=session)
                        continue
                    seen[(item, meta.get("part"))] += 1
                    if decided.get(item, ws) != ws:
                        report.add("misrouted", ws, item=item, decided=decided.get(item))
                    elif (item not in sent and item not in box.attempts and item in decided) or item not in decided:
                        report.add("not-recorded", ws, item=item)
            for (item, part), count in seen.items():
                if count > 1:
                    report.add("duplicate", ws, item=item, part=part, copies=count)
            for item, (where, parts) in sent.items():
                if where != ws:
                    continue
                for part in range(parts):
                    if seen[(item, part)] == 0:
                        report.add("missing", ws, item=item, part=part)
            if role == "trusted":
                _conclusions(client, box, ws, (agent, owner), report)
    return report


def _conclusions(client, box: Outbox, ws: str, peers: tuple[str, str], report: AuditReport) -> None:
    live = {c["id"]: ref for ref, c in box.conclusions.items() if c.get("ws") == ws and not c.get("deleted_by")}
    found: set[str] = set()
    for peer in peers:
        listed = list(client.list_conclusions({"observer_id": peer, "observed_id": peer}))
        # Texts are compared here and never reported; a live one is named by its id.
        live_texts = {c.get("content"): c.get("id") for c in listed if c.get("id") in live}
        for conclusion in listed:
            report.conclusions += 1
            found.add(conclusion.get("id"))
            if conclusion.get("id") in live:
                continue
            twin = live_texts.get(conclusion.get("content"))
            if twin is not None:
                report.add("duplicate-conclusion", ws, conclusion=conclusion.get("id"), peer=peer, of=twin)
            else:
                report.add("unexpected-conclusion", ws, conclusion=conclusion.get("id"), peer=peer)
    for conclusion_id, ref in live.items():
        if conclusion_id not in found:
            report.add("missing-conclusion", ws, conclusion=conclusion_id, written_by=ref)
