"""A decision is final: a second `decided` line for an item already decided
(sent, pending, failed or decided nowhere) is ignored by every fold of the
ledger, counted, and said once."""

from __future__ import annotations

import json
from itertools import pairwise

from helpers import bxmem_inprocess, decisions, ledger_events, write_log
from hypothesis import given
from hypothesis import strategies as st

from bxmem.commands import audit, decide, index_fold
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.store import index
from bxmem.store.ledger import Ledger
from bxmem.store.outbox import Outbox

UNTRUSTED = [{"untrusted": True, "class": "public"}]


def load():
    return config_module.load()


def decide_again(home, item: str, **changes) -> None:
    """Append a second decision for `item`: its first one, with `changes`."""
    again = {**decisions(home)[item], **changes}
    Ledger(home / "memory" / "honcho.jsonl").append([again])


def sync_json():
    result = bxmem_inprocess("sync", "--json")
    return result.returncode, json.loads(result.stdout)


def test_a_sent_turn_decided_again_is_not_sent_again_and_it_is_said_once(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    assert send.run(load()).sent == 1
    decide_again(home, "turn:s:1")
    first = bxmem_inprocess("send")
    second = bxmem_inprocess("send")
    assert len(honcho.messages_in("bm0-trusted")) == 2
    assert first.stderr.count("second decision(s) for items already decided ignored") == 1
    assert "first: turn:s:1" in first.stderr and "second decision" not in second.stderr
    code, status = sync_json()
    assert code == 0 and status["ledger_repeated_decisions"] == {"ignored": 1, "first": "turn:s:1"}
    assert status["sent_items"] == 1
    assert "ledger: 1 second decision(s) ignored, the first decision stands (first turn:s:1)" in (
        bxmem_inprocess("sync").stdout.splitlines()
    )


def test_a_pending_turn_decided_again_elsewhere_goes_only_where_it_was_first_decided(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    decide_again(home, "turn:s:1", ws="bm0-untrusted", role="untrusted", reason="untrusted-session")
    send.run(load())
    send.run(load())
    assert [m["metadata"]["part"] for m in honcho.messages_in("bm0-trusted")] == [0, 1]
    assert honcho.messages_in("bm0-untrusted") == []
    _, status = sync_json()
    assert status["ledger_repeated_decisions"]["ignored"] == 1
    assert sum(status["decided_nowhere"].values()) == 0 and status["workspaces"]["bm0-trusted"]["pending_turns"] == 0


def test_a_turn_decided_nowhere_stays_nowhere_whatever_follows(home, brokerd, honcho, configure):
    configure(honcho.url)
    brokerd.states["s"] = ("secret", False)
    write_log(home, "s", turn_lines(1, "my password is hunter2", "noted"))
    decide.run(load())
    assert decisions(home)["turn:s:1"]["ws"] is None
    decide_again(home, "turn:s:1", ws="bm0-trusted", role="trusted", reason="clean", **{"class": "private"})
    assert send.run(load()).sent == 0
    assert honcho.messages == []
    _, status = sync_json()
    assert status["decided_nowhere"] == {"secret-session": 1}  # counted once, as decided first


def test_the_index_keeps_the_first_decisions_labels(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "the zebrafish page", "it says things", results=UNTRUSTED))
    decide.run(load())
    decide_again(
        home, "turn:s:1", ws="bm0-trusted", role="trusted", reason="clean", untrusted_by=[], **{"class": "private"}
    )
    config = load()
    index_fold.update(config.paths, rebuild=True)
    hits = index.Index.for_state(config.paths.state).open_readonly().search("zebrafish", 5)
    assert [(h.key, h.tag) for h in hits] == [("turn:s:1", "memory-tainted")]


def test_audit_holds_items_to_their_first_decision(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    send.run(load())
    decide_again(home, "turn:s:1", ws=None, role=None, reason="secret-session")
    report = audit.audit(load())
    assert report.discrepancies == [], report.discrepancies
    assert [e["ev"] for e in ledger_events(home)].count("decided") == 2


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "s-1"]), st.integers(1, 40)), max_size=120))
def test_the_known_items_are_exactly_the_items_decided_whatever_the_order(decided):
    box = Outbox()
    seen: set[str] = set()
    for session, n in decided:
        item = f"turn:{session}:{n}"
        box.apply({"ev": "decided", "item": item, "kind": "turn", "ws": None})
        seen.add(item)
    assert box.repeated == len(decided) - len(seen)
    held = {
        f"turn:{s}:{n}" for s, ranges in box.known_turns.items() for low, high in ranges for n in range(low, high + 1)
    }
    assert held == seen
    for ranges in box.known_turns.values():  # sorted, disjoint, never adjacent
        assert all(a[1] + 1 < b[0] for a, b in pairwise(ranges))
