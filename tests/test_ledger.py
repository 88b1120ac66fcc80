"""The ledger: whole lines, a torn tail tolerated and closed off, nothing rewritten."""

from __future__ import annotations

import json

from bxmem.store import ledger_events as le
from bxmem.store.ledger import Ledger, now_iso
from bxmem.store.outbox import Outbox


def decided(n: int, ws: str | None = "w") -> le.DecidedTurn:
    return le.decided_turn(
        session="s",
        turn=n,
        role="trusted",
        ws=ws,
        reason="clean",
        peer="kyle",
        trust_class="private",
        untrusted_by=[],
        secret_rule=None,
        log="s.jsonl",
        user=[[0, 10]],
        reply=[10, 10],
        at=None,
    )


def test_append_and_read_from_offsets(tmp_path):
    ledger = Ledger(tmp_path / "honcho.jsonl")
    end = ledger.append([decided(1), le.sent_turn("turn:s:1", "w", "trusted", "s", ["m1"])])
    result = ledger.read_from(0)
    assert [e["ev"] for e in result.events] == ["decided", "sent"] and result.end == end
    assert ledger.read_from(end).events == []
    assert (tmp_path / "honcho.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_is_tolerated_then_closed_off(tmp_path):
    path = tmp_path / "honcho.jsonl"
    ledger = Ledger(path)
    ledger.append([decided(1)])
    with open(path, "ab") as f:
        f.write(b'{"v":1,"ev":"sent","item":"tu')  # a crash mid-write
    first = ledger.read_from(0)
    assert len(first.events) == 1 and first.torn_tail and not first.malformed
    ledger.append([decided(2)])
    second = ledger.read_from(0)
    assert [e["item"] for e in second.events] == ["turn:s:1", "turn:s:2"]
    assert len(second.malformed) == 1 and not second.torn_tail
    for line in path.read_bytes().splitlines():
        assert line.startswith(b"{")


def test_outbox_fold_and_rebuild_agree(tmp_path):
    ledger = Ledger(tmp_path / "honcho.jsonl")
    ledger.append(
        [
            decided(1),
            decided(2),
            decided(3, ws=None),
            le.attempt(now_iso(), items=["turn:s:1"], ws="w", role="trusted", session="s", hsession="s"),
            le.sent_turn("turn:s:1", "w", "trusted", "s", ["m1"]),
            le.failed("turn:s:2", "w", 422, "refused"),
        ]
    )
    state = tmp_path / "state"
    state.mkdir()
    box = Outbox.load(state, ledger)
    assert list(box.pending) == [] and list(box.failed) == ["turn:s:2"] and box.sent_count == 1
    ledger.append([le.requeued("turn:s:2"), decided(4)])
    box.save(state)
    caught_up = Outbox.load(state, ledger)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    rebuilt = Outbox.load(fresh, ledger)  # no checkpoint: folded from the start
    assert list(caught_up.pending) == list(rebuilt.pending) == ["turn:s:2", "turn:s:4"]
    assert json.dumps(caught_up.pending, sort_keys=True) == json.dumps(rebuilt.pending, sort_keys=True)
