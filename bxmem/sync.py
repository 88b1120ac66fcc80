"""`bxmem sync`: where everything stands, for the owner.

Built from the outbox (a fold of the ledger) and decide's state; reads only,
takes no job lock, and never shows message text or a key.
"""

from __future__ import annotations

import time
from datetime import datetime

from .config import Config
from .ledger import Ledger, event
from .outbox import Outbox
from .store import read_json

LONG_OUTAGE_S = 600


def _age(ts: str | None, now: float) -> float | None:
    if not ts:
        return None
    try:
        return max(0.0, now - datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def status(config: Config, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    state_dir = config.paths.ensure_state_dir()
    ledger = Ledger(config.paths.ledger)
    box = Outbox.load(state_dir, ledger)
    workspaces: dict[str, dict] = {}
    for ws in config.workspaces():
        if ws.role.startswith("read:"):
            continue
        workspaces[ws.name] = {"role": ws.role, "pending_turns": 0, "pending_edits": 0, "oldest_pending": None,
                               "oldest_pending_age_s": None, "failed": 0, "key_refused_since": None}
    with ledger:  # event_at keeps the ledger open
        for item in box.pending_items():
            ws = workspaces.setdefault(item["ws"], {"role": "not configured any more", "pending_turns": 0,
                                                    "pending_edits": 0, "oldest_pending": None,
                                                    "oldest_pending_age_s": None, "failed": 0, "key_refused_since": None})
            ws["pending_edits" if item.get("kind") == "edit" else "pending_turns"] += 1
            if ws["oldest_pending"] is None:  # the outbox is in ledger order: the first is the oldest
                ws["oldest_pending"] = item["item"]
                ws["oldest_pending_age_s"] = _age(ledger.event_at(item["offset"]).get("ts"), now)
    failed = []
    for item, ev in box.failed.items():
        failed.append({"item": item, "workspace": ev.get("ws"), "status": ev.get("status"), "reason": ev.get("reason"), "when": ev.get("ts")})
        if ev.get("ws") in workspaces:
            workspaces[ev["ws"]]["failed"] += 1
    refused = [{"workspace": ws, "status": ev.get("status"), "since": ev.get("ts"), "secret": ev.get("secret")} for ws, ev in box.stopped.items()]
    for entry in refused:
        if entry["workspace"] in workspaces:
            workspaces[entry["workspace"]]["key_refused_since"] = entry["since"]
    outage = None
    if box.backoff:
        since_age = _age(box.backoff.get("since"), now)
        outage = {"since": box.backoff.get("since"), "for_s": since_age, "next_try_in_s": max(0.0, box.backoff["until"] - now)}
    decide_state = read_json(state_dir / "decide.json") or {}
    waiting = sum(len(turns) for turns in (decide_state.get("undecided") or {}).values())
    broker = {"undecided_turns": waiting, "unavailable_since": decide_state.get("broker_down_since")}
    nowhere: dict[str, int] = {}
    for key, count in box.decided.items():
        kind, role, reason = key.split("/", 2)
        if role == "none" and kind == "turn":
            nowhere[reason] = nowhere.get(reason, 0) + count
    attention = []
    if failed:
        attention.append(f"{len(failed)} failed item(s) (runbook honcho-send-refused)")
    if refused:
        attention.append(f"{len(refused)} workspace key(s) refused (runbook honcho-key-refused)")
    if outage and (outage["for_s"] or 0) > LONG_OUTAGE_S:
        attention.append("Honcho unreachable for over 10 minutes (runbook honcho-unreachable)")
    if broker["unavailable_since"]:
        attention.append(f"{waiting} turn(s) undecided: brokerd cannot answer (runbook broker-state-unavailable)")
    return {
        "mode": "local-only" if config.local_only else "honcho",
        "honcho_url": config.honcho.url if config.honcho else None,
        "workspaces": workspaces,
        "failed": failed,
        "keys_refused": refused,
        "outage": outage,
        "broker": broker,
        "decided_nowhere": dict(sorted(nowhere.items())),
        "sent_items": box.sent_count,
        "last_sent": box.last_sent,
        "ledger_malformed_lines": box.malformed,
        "attention": attention,
    }


def retry_failed(config: Config) -> list[str]:
    """Put every failed item back in the outbox. An item refused half-way goes
    through the in-doubt path, which looks before it creates again."""
    ledger = Ledger(config.paths.ledger)
    box = Outbox.load(config.paths.ensure_state_dir(), ledger)
    items = list(box.failed)
    if items:
        ledger.append([event("requeued", item=item) for item in items])
    return items
