"""The skeleton the three timer jobs share: lock, state (recovered from the ledger), work, save, unlock,
index refresh. decide and mirror save only a finished run; send saves its checkpoint even when a run stops
with an error, because the ledger lines it wrote are already folded into it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

from bxmem.config.loader import Config
from bxmem.start.idle import summary_path
from bxmem.store.files import JobLock
from bxmem.store.ledger import Ledger

R = TypeVar("R")
# Stops a job's catch-up of the local index (a million decisions after memory/bxmem/ was deleted), inside the timer
# units' TimeoutStartSec=60 with room for the interpreter's start and exit on a loaded machine.
INDEX_BY_S = 45.0


def run_locked(
    config: Config,
    name: str,
    report: R,
    load: Callable,
    work: Callable,
    save: Callable,
    *,
    save_on_error: bool = False,
    refresh_index: bool = True,
    index_progress=None,
) -> R:
    """load(state_dir, ledger) -> state; work(state, ledger); save(state_dir, state). `report` gets busy=True when
    another run holds the lock. `index_progress`: the CLI's bar over a rebuild of the local index, or None."""
    started = time.monotonic()
    config.paths.require_home()  # a job never makes the home: a wrong environment fails, it does not start afresh
    state_dir = config.paths.ensure_state_dir()
    lock = JobLock(config.paths.ledger, name)  # on the ledger: memory/bxmem/ may be deleted mid-run
    if not lock.acquire():
        report.busy = True  # type: ignore[attr-defined]
        return report
    with lock:
        ledger = Ledger(config.paths.ledger)
        state = load(state_dir, ledger)
        if save_on_error:
            try:
                work(state, ledger)
            finally:
                save(config.paths.ensure_state_dir(), state)  # the cache folder may have been deleted meanwhile
        else:
            work(state, ledger)
            save(config.paths.ensure_state_dir(), state)
    if refresh_index:
        from bxmem.commands.index_fold import refresh  # deferred: command (send, which runs here too, never refreshes)

        if refresh(config.paths, index_progress, started + INDEX_BY_S):
            # Behind: the next timer run must not be answered idle before the index has caught up.
            try:
                os.unlink(summary_path(config.paths.state, name))
            except FileNotFoundError:
                pass
        if os.path.isdir(config.paths.artifacts / "cards"):
            from bxmem.commands.artifact_recall import refresh as refresh_cards  # deferred: command (only with a store)

            refresh_cards(config)  # the cards' catalog, made again here if it is gone or stale
    return report
