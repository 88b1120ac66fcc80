"""`bxmem send`: one batch of the outbox to Honcho, oldest first, then exit.

At-least-once delivery with duplicate defence (seed 002 section 12.2):

* an item leaves the outbox only through a `sent` or `failed` line;
* before any POST that creates messages, an `attempt` line names the items
  and the Honcho session, so a crash or a lost answer leaves a trace;
* an item with an attempt and no `sent` is in doubt: once Honcho can no
  longer be working on that request (retry.py), its messages are looked up
  by their `bxmem_item` metadata and only the missing parts sent, while the
  later items of its session wait behind it.

A request Honcho stores later than that, after the lookup, is sent twice:
the window is narrow, not closed, and `bxmem audit` reports such a duplicate.

Every change of state is a ledger line folded back into the outbox, so the
checkpoint and the ledger cannot disagree.

The work is split by responsibility: send_plan.py chooses and groups a run's
work from the outbox (no HTTP), send_messages.py builds a turn's messages,
send_edits.py carries out a memory write's actions, and send_runner.py does
the requests, the ledger writes, the backoff and the keys.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from .config import Config, read_key
from .ledger import Ledger
from .outbox import Outbox
from .retry import Hold
from .send_runner import RUN_BUDGET_S, Sender
from .store import JobLock

__all__ = ["RUN_BUDGET_S", "SendReport", "Sender", "run", "write_idle_summary"]


@dataclass
class SendReport:
    busy: bool = False
    local_only: bool = False
    waiting_until: float | None = None
    sent: int = 0
    messages: int = 0
    requests: int = 0
    failed: int = 0
    outage: str | None = None
    stopped: list[str] = field(default_factory=list)
    pending: int = 0
    held: int = 0  # items waiting behind an in-doubt attempt (retry.Hold)
    settle_at: float | None = None  # when the first of those may be looked up

    @property
    def degraded(self) -> bool:
        return bool(self.outage or self.waiting_until or self.stopped)


def run(config: Config, clock=None, rng: random.Random | None = None) -> SendReport:
    if config.local_only:
        return SendReport(local_only=True)
    for workspace in config.workspaces():
        read_key(workspace)  # an unreadable or exposed key stops the job at start, with the reason
    state_dir = config.paths.ensure_state_dir()
    lock = JobLock(state_dir / "send.lock")
    if not lock.acquire():
        return SendReport(busy=True)
    with lock:
        ledger = Ledger(config.paths.ledger)
        box = Outbox.load(state_dir, ledger)
        report = SendReport()
        sender = Sender(config, box, ledger, report, clock, rng)
        try:
            sender.run()
        finally:
            sender.close()
            box.save(state_dir)
            write_idle_summary(config, box, state_dir, sender._hold)
    return report


def write_idle_summary(config: Config, box: Outbox, state_dir: Path, hold: Hold | None = None) -> None:
    """What the next run's fast path compares to decide there is nothing to do."""
    from .fastpath import stat_fingerprint, write_summary

    held = hold.items if hold else set()
    sendable = any(
        item["ws"] not in box.stopped and config.workspace_by_name(item["ws"]) is not None and item["item"] not in held
        for item in box.pending_items()
    )
    # Items that only wait behind an in-doubt one wake the job when it may be looked up.
    wake_at = box.backoff["until"] if box.backoff else (0.0 if sendable else (hold.until if hold else None))
    ledger_version = [box.ino, box.offset] if box.ino is not None else None  # None: no ledger yet
    watch: dict[str, tuple[str, object]] = {str(config.paths.ledger): ("size", ledger_version)}
    for workspace in config.workspaces():
        if workspace.key_file:
            refusal = box.stopped.get(workspace.name)
            # A stopped workspace wakes when its key differs from the refused one.
            version = refusal.get("key") if refusal else stat_fingerprint(workspace.key_file)
            watch[str(workspace.key_file)] = ("stat", version)
    write_summary(state_dir, "send", config, watch, wake_at)
