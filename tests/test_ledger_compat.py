"""Ledgers written before the event vocabulary moved to ledger_events.py fold
exactly as they did then.

The ledgers in tests/fixtures/ledger-v1/ were written by the suite's own send,
mirror, fault and key tests at commit 6d1f869; the expected folds beside them
(`*.fold.json`) were computed by that commit's code. Every fold over the ledger
is checked: the outbox, audit's expectations, and decide's and mirror's
recovery, and the index's catch-up. `BXMEM_WRITE_FOLDS=1` writes the expectations again (only ever from
a commit whose folds are known good).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from bxmem import audit, decide, index, mirror
from bxmem.ledger import Ledger
from bxmem.outbox import Outbox

LEDGERS = Path(__file__).parent / "fixtures" / "ledger-v1"
NAMES = sorted(p.stem for p in LEDGERS.glob("*.jsonl"))


def _plain(value):
    """JSON-comparable: tuples as lists, keys as strings."""
    return json.loads(json.dumps(value, sort_keys=True, default=list))


def _index_fold(ledger_path: Path, state_dir: Path, monkeypatch) -> list:
    """What the index's catch-up takes from the ledger: the decided turns and their labels."""
    from bxmem.sources import loopd

    turns = []
    monkeypatch.setattr(loopd.SpanReader, "text", lambda self, path, span: f"{path.name}@{span[0]}")
    monkeypatch.setattr(index, "index_turn", lambda _ix, ev, user, reply: turns.append([ev["item"], *index.turn_labels(ev), user, reply]))
    paths = SimpleNamespace(ledger=ledger_path, logs=state_dir, journal=state_dir / "no-journal.jsonl", state=state_dir)
    index.update(paths)
    return turns


def folds(ledger_path: Path, state_dir: Path, monkeypatch) -> dict:
    ledger = Ledger(ledger_path)
    box = Outbox.load(state_dir, ledger)
    outbox = {k: v for k, v in box.__dict__.items() if k != "ino"}
    paths = SimpleNamespace(ledger=ledger_path, ensure_state_dir=lambda: state_dir)
    decided, sent, _box = audit._expected(SimpleNamespace(paths=paths))
    decide_state = decide._fresh_state()
    decide._recover(decide_state, ledger)
    recovered_edits = mirror._recover(mirror._fresh_state(), ledger)
    return _plain({"index": _index_fold(ledger_path, state_dir, monkeypatch), "outbox": outbox, "audit": {"decided": decided, "sent": sent},
                   "decide_recover": decide_state, "mirror_recover": recovered_edits})


@pytest.mark.parametrize("name", NAMES)
def test_an_old_ledger_folds_as_it_did(name, tmp_path, monkeypatch):
    ledger_path = tmp_path / "honcho.jsonl"
    shutil.copyfile(LEDGERS / f"{name}.jsonl", ledger_path)
    state = tmp_path / "state"
    state.mkdir()
    got = folds(ledger_path, state, monkeypatch)
    expected_path = LEDGERS / f"{name}.fold.json"
    if os.environ.get("BXMEM_WRITE_FOLDS"):
        expected_path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(expected_path.read_text())


def test_the_fixtures_cover_every_event_kind():
    kinds = set()
    for name in NAMES:
        for line in (LEDGERS / f"{name}.jsonl").read_text().splitlines():
            ev = json.loads(line)
            kinds.add(ev["ev"] + (f"/{ev['kind']}" if ev["ev"] == "decided" else "") + (f"/{ev['what']}" if ev["ev"] == "created" else ""))
    assert kinds == {
        "decided/turn", "decided/edit", "attempt", "sent", "failed", "unsent", "cancelled", "requeued",
        "created/workspace", "created/peer", "created/session", "key_refused", "key_resumed",
    }
