"""`bxmem demo`: a sample Boxmaker home, a stand-in brokerd, and the jobs run on it.

Everything happens in a temporary folder. Nothing leaves the machine unless a
Honcho URL is given.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import sample
from .brokerd import StubBrokerd


@dataclass
class DemoResult:
    home: Path
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # session, item, destination, why
    notes: list[str] = field(default_factory=list)
    sent: int = 0
    messages: int = 0
    sync: dict = field(default_factory=dict)
    recall: object = None


def run_demo(honcho_url: str | None, keep: Path | None = None) -> DemoResult:
    from .. import config as config_module
    from .. import decide, mirror, send
    from ..ledger import Ledger

    base = keep or Path(tempfile.mkdtemp(prefix="bxmem-demo-"))
    home = base / "home"
    sample.write_home(home)
    sample.write_journal(home)
    config_path = base / "bxmem.toml"
    sample.write_config(config_path, home, honcho_url)
    config = config_module.load(config_path, home=home)  # never the caller's BOXMAKER_HOME
    result = DemoResult(home=home)

    with StubBrokerd(config.paths.broker_socket, sample.broker_states()) as broker:
        broker.late_once.add("s-late")
        first = decide.run(config)
        result.notes.append(
            f"decide, first run: {sum(first.decided.values())} turns decided, {first.undecided} waiting "
            f"(brokerd answered too late for s-late: {first.broker_problem})"
        )
        second = decide.run(config)
        result.notes.append(f"decide, second run: brokerd answers now; {sum(second.decided.values())} more decided")
    edits = mirror.run(config)
    result.notes.append(
        f"mirror: {sum(edits.decided.values())} memory edits decided "
        f"({sum(n for k, n in edits.decided.items() if not k.startswith('none/'))} to Honcho, the rest stay local)"
    )
    if honcho_url:
        while True:
            report = send.run(config)
            result.sent += report.sent
            result.messages += report.messages
            if report.outage:
                result.notes.append(f"send: Honcho unreachable ({report.outage}); the outbox keeps everything")
                break
            if report.pending == 0 or not report.sent:
                break
        result.notes.append(f"send: {result.sent} items ({result.messages} turn messages, plus conclusions) to {honcho_url}")
    else:
        result.notes.append(
            "send: local-only (no --honcho URL), nothing leaves this machine; "
            "the table names the workspace each item would go to"
        )

    from .. import recall, sync

    result.sync = sync.status(config)
    result.recall = recall.recall(config, "backups nightly", k=3)
    for ev in Ledger(config.paths.ledger).read_from(0).events:
        if ev["ev"] == "decided":
            where = ev["ws"] or (f"{ev['role']} workspace" if ev["role"] else "nowhere")
            what = f"turn {ev['turn']}" if ev["kind"] == "turn" else f"{ev['op']} {ev['edit']}"
            result.rows.append((ev["session"] or "", what, where, ev["reason"].removesuffix("; local-only")))
    return result
