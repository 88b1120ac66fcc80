"""The ledger: whole lines, a torn tail tolerated and closed off, nothing rewritten."""

from __future__ import annotations

import json

from bxmem.ledger import Ledger, event
from bxmem.outbox import Outbox


def test_append_and_read_from_offsets(tmp_path):
    ledger = Ledger(tmp_path / "honcho.jsonl")
    end = ledger.append([event("decided", item="turn:s:1", ws="w"), event("sent", item="turn:s:1")])
    result = ledger.read_from(0)
    assert [e["ev"] for e in result.events] == ["decided", "sent"] and result.end == end
    assert ledger.read_from(end).events == []
    assert (tmp_path / "honcho.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_is_tolerated_then_closed_off(tmp_path):
    path = tmp_path / "honcho.jsonl"
    ledger = Ledger(path)
    ledger.append([event("decided", item="turn:s:1", ws="w")])
    with open(path, "ab") as f:
        f.write(b'{"v":1,"ev":"sent","item":"tu')  # a crash mid-write
    first = ledger.read_from(0)
    assert len(first.events) == 1 and first.torn_tail and not first.malformed
    ledger.append([event("decided", item="turn:s:2", ws="w")])
    second = ledger.read_from(0)
    assert [e["item"] for e in second.events] == ["turn:s:1", "turn:s:2"]
    assert len(second.malformed) == 1 and not second.torn_tail
    for line in path.read_bytes().splitlines():
        assert line.startswith(b"{")


def test_outbox_fold_and_rebuild_agree(tmp_path):
    ledger = Ledger(tmp_path / "honcho.jsonl")
    ledger.append(
        [
            event("decided", item="a", ws="w"),
            event("decided", item="b", ws="w"),
            event("decided", item="c", ws=None),
            event("attempt", items=["a"], ws="w", hsession="s"),
            event("sent", item="a", ws="w", ids=["m1"]),
            event("failed", item="b", ws="w", status=422),
        ]
    )
    state = tmp_path / "state"
    state.mkdir()
    box = Outbox.load(state, ledger)
    assert list(box.pending) == [] and list(box.failed) == ["b"] and box.sent_count == 1
    ledger.append([event("requeued", item="b"), event("decided", item="d", ws="w")])
    box.save(state)
    caught_up = Outbox.load(state, ledger)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    rebuilt = Outbox.load(fresh, ledger)  # no checkpoint: folded from the start
    assert list(caught_up.pending) == list(rebuilt.pending) == ["b", "d"]
    assert json.dumps(caught_up.pending, sort_keys=True) == json.dumps(rebuilt.pending, sort_keys=True)
