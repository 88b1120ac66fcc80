"""`bxmem demo`, in a temporary folder. With a Honcho URL it writes to three workspaces named for this run,
so a rerun never adds to an earlier run's data or to a real agent's.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.commands import decide, mirror, recall, sync
from bxmem.commands.recall import RecallResult
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.config.schema import check_url
from bxmem.demo import sample
from bxmem.demo.brokerd import StubBrokerd
from bxmem.errors import ExitCode, UsageError
from bxmem.sources.brokerd import TIMEOUT_S
from bxmem.store.ledger import Ledger
from bxmem.store.ledger_events import DECIDED, TURN


@dataclass
class DemoResult:
    home: Path
    run_id: str = ""
    workspaces: dict[str, str] = field(default_factory=dict)  # role -> name; empty when local-only
    kept: bool = False  # False: `home` was removed when the demo ended
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # session, item, destination, why
    notes: list[str] = field(default_factory=list)
    sent: int = 0
    messages: int = 0
    sync: dict = field(default_factory=dict)
    recall: RecallResult | None = None  # set once the jobs have run
    outage: str | None = None  # Honcho did not answer: what was left unsent stays in the outbox
    unsent: int | None = None  # items left in the outbox then (None: not counted)

    @property
    def exit_code(self) -> int:
        return ExitCode.DEGRADED if self.outage else ExitCode.OK


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def checked_url(honcho_url: str) -> str:
    """`--honcho` is held to honcho.url's rule before anything is written: a usage error naming the option."""
    try:
        return check_url(honcho_url)
    except ValueError as exc:
        raise UsageError(f"--honcho {honcho_url!r}: {exc}") from None


def run_demo(honcho_url: str | None, keep: Path | None = None, broker_wait: float = TIMEOUT_S) -> DemoResult:
    if honcho_url is not None:
        honcho_url = checked_url(honcho_url)
    if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        # The demo writes a whole sample home: never over an owner's files.
        raise UsageError(f"--keep {keep}: not a new or empty directory; name one the demo may fill")
    base = keep if keep is not None else Path(tempfile.mkdtemp(prefix="bxmem-demo-"))
    try:
        result = _run(base, honcho_url, kept=keep is not None, broker_wait=broker_wait)
    finally:
        if keep is None:  # a failed run leaves nothing behind either
            shutil.rmtree(base, ignore_errors=True)
    return result


def _run(base: Path, honcho_url: str | None, kept: bool, broker_wait: float) -> DemoResult:
    home = base / "home"
    sample.write_home(home)
    sample.write_journal(home)
    config_path = base / "bxmem.toml"
    run_id = new_run_id()
    names = sample.workspaces(run_id) if honcho_url else {}
    sample.write_config(config_path, home, honcho_url, names)
    config = config_module.load(config_path, home=home)  # never the caller's BOXMAKER_HOME
    result = DemoResult(home=home, run_id=run_id, workspaces=names, kept=kept)

    # The stand-in brokerd answers until the owner's view below has been taken, so
    # `sync` reports it as the jobs saw it, not as stopped by the demo itself.
    with StubBrokerd(config.paths.broker_socket, sample.broker_states()) as broker:
        broker.late_once.add("s-late")
        broker.late_delay = broker_wait + 1.0  # later than decide waits, whatever the wait
        first = decide.run(config, broker_timeout=broker_wait)
        result.notes.append(
            f"decide, first run: {sum(first.decided.values())} turns decided, {first.undecided} waiting "
            f"(brokerd answered too late for s-late: {first.broker_problem})"
        )
        second = decide.run(config, broker_timeout=broker_wait)
        result.notes.append(f"decide, second run: brokerd answers now; {sum(second.decided.values())} more decided")
        edits = mirror.run(config)
        result.notes.append(
            f"mirror: {sum(edits.decided.values())} memory edits decided "
            f"({sum(n for k, n in edits.decided.items() if not k.startswith('none/'))} to Honcho, the rest stay local)"
        )
        if honcho_url:
            _send(config, honcho_url, result)
        else:
            result.notes.append(
                "send: local-only (no --honcho URL), nothing leaves this machine; "
                "the table names the workspace each item would go to"
            )

        result.sync = sync.status(config)
        result.recall = recall.recall(config, "backups nightly", k=3)
    for ev in Ledger(config.paths.ledger).read_from(0).events:
        if ev["ev"] == DECIDED:
            where = ev["ws"] or (f"{ev['role']} workspace" if ev["role"] else "nowhere")
            what = f"turn {ev['turn']}" if ev["kind"] == TURN else f"{ev['op']} {ev['edit']}"
            result.rows.append((ev["session"] or "", what, where, ev["reason"].removesuffix("; local-only")))
    return result


def _send(config, honcho_url: str, result: DemoResult) -> None:
    """Batches until the outbox is empty; on an outage, say what stays unsent and where."""
    while True:
        report = send.run(config)
        result.sent += report.sent
        result.messages += report.messages
        if report.outage:
            result.outage = report.outage
            result.unsent = report.pending
            break
        if report.pending == 0 or not report.sent:
            break
    if result.sent or not result.outage:
        result.notes.append(
            f"send: {result.sent} items ({result.messages} turn messages, plus conclusions) to {honcho_url}"
        )
    if result.outage:
        unsent = "the items not sent" if result.unsent is None else f"{result.unsent} item(s) not sent"
        where = (
            (
                f"they wait in this demo's outbox under {result.home}; `bxmem --config {result.home.parent / 'bxmem.toml'} send` "
                "sends them once Honcho answers"
            )
            if result.kept
            else (
                "they were in this demo's outbox, in its temporary home, which is removed now with them "
                "(--keep DIR keeps the home, to send them later)"
            )
        )
        result.notes.append(f"send: Honcho at {honcho_url} did not answer ({result.outage}): {unsent}; {where}")
