"""`bxmem send`: one batch of the outbox to Honcho, oldest first. Delivery is at-least-once with duplicate
defence (docs/design.md, "Sending"): every change of state is a ledger line folded back into the outbox, so the
checkpoint and the ledger cannot disagree.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from bxmem.commands.jobrun import run_locked
from bxmem.commands.send.report import SendReport
from bxmem.config.loader import Config
from bxmem.errors import BxmemError
from bxmem.start.idle import ledger_tail, stat_fingerprint, write_summary
from bxmem.store.ledger import Ledger
from bxmem.store.outbox import Outbox
from bxmem.trust.send_retry import Hold, next_try
from bxmem.trust.write_policy import Holds

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from bxmem.commands.send.runner import Sender

__all__ = ["SendReport", "run", "write_idle_summary"]  # and, through __getattr__, RUN_BUDGET_S and Sender


def __getattr__(name: str):
    """The runner, and httpx with it, is imported only by a run that may send."""
    if name in ("RUN_BUDGET_S", "Sender"):
        from bxmem.commands.send import runner  # deferred: lean

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(config: Config, clock=None, rng: random.Random | None = None, now: bool = False) -> SendReport:
    """One batch; `now` (send --now): without waiting out the outage backoff."""
    if config.local_only:
        config.paths.require_home()
        _local_only_summary(config)
        return SendReport(local_only=True)
    from bxmem.commands.send.runner import Sender  # deferred: lean

    report = SendReport()
    senders: list[Sender] = []

    def load(state_dir: Path, ledger: Ledger) -> Outbox:
        return Outbox.load(state_dir, ledger)  # the outbox is send's state, recovered from the ledger

    def work(box: Outbox, ledger: Ledger) -> None:
        senders.append(Sender(config, box, ledger, report, clock, rng, try_now=now))
        try:
            senders[0].run()
        finally:
            senders[0].close()

    def save(state_dir: Path, box: Outbox) -> None:
        box.save(state_dir)
        write_idle_summary(
            config,
            box,
            state_dir,
            senders[0].hold if senders else None,
            senders[0].holds if senders else None,
            report.exit_code,
        )

    return run_locked(config, "send", report, load, work, save, save_on_error=True, refresh_index=False)


def _local_only_summary(config: Config) -> None:
    """Local-only, send has nothing to do until the configuration changes, and every
    idle summary holds the config file's version: the next runs are idle ones."""
    try:
        write_summary(config.paths.ensure_state_dir(), "send", config, {}, None)
    except (OSError, BxmemError):
        pass  # a home that cannot be written: the next run asks again, slower, never wrong


def write_idle_summary(
    config: Config,
    box: Outbox,
    state_dir: Path,
    hold: Hold | None = None,
    holds: Holds | None = None,
    exit_code: int = 0,
) -> None:
    """What the next run's fast path compares to decide there is nothing to do.
    Items the configuration holds do not wake it: a change of the configuration does."""
    held = hold.items if hold else set()
    by_config = set(holds.held) if holds else set()
    sendable = any(
        item["item"] not in by_config and item["item"] not in held and item["ws"] not in box.stopped
        for item in box.pending_items()
    )
    # Items that only wait behind an in-doubt one wake the job when it may be looked up. Each
    # wake-up within its own bound of now (retry.next_try, retry.settle_at), whatever the clock did.
    wake_at: float | None
    if box.backoff:
        wake_at = next_try(box.backoff, time.time()) or 0.0
    else:
        wake_at = 0.0 if sendable else (hold.until if hold else None)
    # Any append wakes it; so does the ledger rewritten in place (start/idle.py's ledger_tail).
    watch: dict[str, tuple[str, object]] = {
        str(config.paths.ledger): ("ledger", ledger_tail(config.paths.ledger, box.offset))
    }
    for workspace in config.workspaces():
        if workspace.key_file:
            refusal = box.stopped.get(workspace.name)
            # A stopped workspace wakes when its key differs from the refused one.
            version = refusal.get("key") if refusal else stat_fingerprint(workspace.key_file)
            watch[str(workspace.key_file)] = ("stat", version)
    write_summary(state_dir, "send", config, watch, wake_at, exit_code=exit_code)
