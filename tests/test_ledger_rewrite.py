"""The ledger rewritten in place (same inode, not shorter: a `cp` from a backup, an
editor saving in place, a sort): every read back by offset is checked to be the line
meant, a checkpoint that no longer matches is rebuilt with one warning, and nothing
is misrouted, lost or doubled (issue 28, item 1)."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from helpers import bxmem_main, decisions, write_log

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo import sample
from bxmem.demo.sample import turn_lines
from bxmem.store.ledger import Ledger, LedgerChanged
from bxmem.store.outbox import Outbox


def load():
    return config_module.load()


def ledger_path(home):
    return home / "memory" / "honcho.jsonl"


def rewrite_in_place(path, data: bytes) -> None:
    """What `cp backup ledger`, an editor saving in place or `sort -o` does: same inode."""
    ino = os.stat(path).st_ino
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()
    assert os.stat(path).st_ino == ino


def sort_in_place(path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    rewrite_in_place(path, b"".join(sorted(lines)))


def where_each_item_went(honcho) -> dict[str, Counter]:
    found: dict[str, Counter] = {}
    for ws in ("bm0-trusted", "bm0-untrusted", "fleet"):
        found[ws] = Counter(m["metadata"]["bxmem_item"] for m in honcho.messages_in(ws) if m["metadata"]["part"] == 0)
    return found


def assert_nothing_misrouted_lost_or_doubled(home, honcho) -> None:
    decided = decisions(home)
    went = where_each_item_went(honcho)
    for ws, items in went.items():
        for item, count in items.items():
            assert count == 1, f"{item} sent {count} times to {ws}"
            assert decided[item]["ws"] == ws, f"{item}, decided for {decided[item]['ws']}, was sent to {ws}"
    for item, ev in decided.items():
        if ev.get("ws") and ev["kind"] == "turn":  # edits: audit holds conclusions and notes to the ledger
            assert went[ev["ws"]][item] == 1, f"{item} never reached {ev['ws']}"


@pytest.fixture
def outage_with_pending(home, brokerd, honcho, configure):
    """The sample home decided, its items pending through an outage."""
    sample.write_home(home)
    brokerd.states.update(sample.broker_states())
    configure(honcho.url)
    assert bxmem_main("decide").returncode == 0
    honcho.stop()
    assert send.run(load()).outage
    return home


def later() -> float:
    return 10.0**10  # past any backoff


def drain(times: int = 4) -> None:
    for _ in range(times):
        send.run(load(), clock=later)


def assert_no_traceback() -> None:
    for command in (("send",), ("sync",), ("outbox", "list"), ("decide",), ("mirror",)):
        result = bxmem_main(*command)
        assert "Traceback" not in result.stderr and "no ledger event" not in result.stderr, result.stderr
        assert result.returncode in (0, 3, 4), (command, result.stderr)


def assert_audit_clean() -> None:
    result = bxmem_main("audit", "--json")
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout)["discrepancies"] == []


def test_a_sorted_ledger_sends_no_turn_under_another_items_decision(outage_with_pending, honcho):
    home = outage_with_pending
    sort_in_place(ledger_path(home))
    honcho.start()
    drain()
    assert_nothing_misrouted_lost_or_doubled(home, honcho)
    assert_no_traceback()
    assert_audit_clean()


@pytest.mark.parametrize("how", ["reversed", "sorted"])
def test_a_rewrite_is_said_once(outage_with_pending, honcho, caplog, how):
    """Reversed, the ledger's first bytes change: the checkpoint is found stale when it is
    loaded. Sorted, its first and last lines happen to stay where they were: the first
    decision read back is found not to be the one folded."""
    home = outage_with_pending
    path = ledger_path(home)
    if how == "sorted":
        sort_in_place(path)
    else:
        rewrite_in_place(path, b"".join(reversed(path.read_bytes().splitlines(keepends=True))))
    caplog.set_level("WARNING", logger="bxmem")
    from bxmem.log import log

    log.propagate = True
    honcho.start()
    drain(3)
    said = [r.getMessage() for r in caplog.records if "ledger-rewritten" in r.getMessage()]
    assert len(said) == 1 and "outbox was rebuilt" in said[0], said
    assert ("rewritten in place before byte" if how == "reversed" else "is no longer at byte") in said[0]
    assert_nothing_misrouted_lost_or_doubled(home, honcho)


def test_a_pending_decision_edited_in_place_is_never_read_as_the_one_folded(outage_with_pending, honcho):
    """The outbox folded a decision; the line at its offset is then edited without moving
    anything (the same length): reading it back finds the edit and folds again."""
    home = outage_with_pending
    path = ledger_path(home)
    data = path.read_bytes()
    line = next(raw for raw in data.splitlines() if b'"item":"turn:s-clean:2"' in raw and b'"decided"' in raw)
    edited = line.replace(b'"class":"private"', b'"class":"PRIVATE"')
    assert len(edited) == len(line) and edited != line
    # Only the edited line changes: the first bytes and those before the outbox's offset are as they were.
    rewrite_in_place(path, data.replace(line, edited))
    box = Outbox.load(home / "memory" / "bxmem", Ledger(path))
    with pytest.raises(LedgerChanged, match=r"turn:s-clean:2.*edited"):
        box.decision(Ledger(path), "turn:s-clean:2")
    honcho.start()
    drain()
    assert_nothing_misrouted_lost_or_doubled(home, honcho)
    assert_no_traceback()


@pytest.mark.parametrize("backup_at", ["before-decide", "half-decided", "decided", "half-sent", "sent"])
@pytest.mark.parametrize("during_outage", [False, True])
def test_an_older_copy_restored_in_place_sends_nothing_twice_and_loses_nothing(
    home, brokerd, honcho, configure, backup_at, during_outage
):
    """A backup of the ledger taken at any point, copied back over it later (`cp` keeps the
    inode): what was sent after the copy is looked up, not sent again; what was decided
    after it is decided again from the logs and the journal, and sent once."""
    configure(honcho.url, batch=3)
    copies: dict[str, bytes] = {}
    for n, s in enumerate(("a", "b")):
        write_log(home, s, turn_lines(n + 1, f"first {s}", f"one {s}"))
    sample.write_journal(home)
    copies["before-decide"] = ledger_path(home).read_bytes() if ledger_path(home).exists() else b""
    decide.run(load())
    mirror.run(load())
    copies["half-decided"] = ledger_path(home).read_bytes()
    for n, s in enumerate(("c", "d")):
        write_log(home, s, turn_lines(n + 1, f"second {s}", f"two {s}"))
    decide.run(load())
    copies["decided"] = ledger_path(home).read_bytes()
    send.run(load())
    copies["half-sent"] = ledger_path(home).read_bytes()
    drain()
    copies["sent"] = ledger_path(home).read_bytes()
    # More comes in, so the restored ledger ends up no shorter than before.
    write_log(home, "e", turn_lines(1, "third e", "three e"))
    decide.run(load())
    if during_outage:
        honcho.stop()
        send.run(load())
    rewrite_in_place(ledger_path(home), copies[backup_at])
    for _ in range(2):
        decide.run(load())
        mirror.run(load())
    if during_outage:
        honcho.start()
    drain(6)
    assert_nothing_misrouted_lost_or_doubled(home, honcho)
    assert_no_traceback()
    assert_audit_clean()


@pytest.mark.parametrize("job", ["decide", "mirror", "send"])
def test_no_timer_run_is_answered_idle_after_the_ledger_is_copied_back(home, brokerd, honcho, configure, job):
    """The restore the real-server run met: decide's and mirror's idle summaries watch the
    bytes before their offset, so the timer's next run reads the ledger again."""
    from bxmem.start.idle import is_idle
    from bxmem.start.lean_argv import parse

    configure(honcho.url)
    sample.write_home(home)
    sample.write_journal(home)
    brokerd.states.update(sample.broker_states())
    for step in ("decide", "mirror", "send"):
        bxmem_main(step)
    copy = ledger_path(home).read_bytes()
    write_log(home, "x1", turn_lines(1, "later", "turn"))
    sample.write_journal(
        home,
        [
            {
                "id": "j-later",
                "ts": "t",
                "session": "x1",
                "op": "identity_add",
                "file": "user.md",
                "entry": "a later entry",
            }
        ],
    )
    for step in ("decide", "mirror", "send", "decide", "mirror", "send"):
        bxmem_main(step)
    assert is_idle(parse(["bxmem", job]))
    rewrite_in_place(ledger_path(home), copy)
    assert not is_idle(parse(["bxmem", job]))


def rewritten(path, how: str, copy: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    if how == "sorted":
        rewrite_in_place(path, b"".join(sorted(lines)))
    elif how == "reversed":
        rewrite_in_place(path, b"".join(reversed(lines)))
    else:  # an older copy, from before the owner's undo or drop
        rewrite_in_place(path, copy)


@pytest.mark.parametrize("how", ["sorted", "reversed", "older copy"])
def test_an_edit_undone_before_it_was_sent_is_never_sent_whatever_the_ledger_says(
    home, brokerd, honcho, configure, how
):
    """The owner undid an entry before send got to it (its item `cancelled`). A ledger whose
    lines are sorted (the cancellation then comes before the decision), reversed, or an older
    copy from before the undo put back: the entry is never written to Honcho."""
    configure(honcho.url)
    sample.write_journal(
        home, [{"id": "j1", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "likes tea"}]
    )
    mirror.run(load())
    honcho.stop()
    send.run(load())  # an outage: the entry waits
    copy = ledger_path(home).read_bytes()
    assert bxmem_main("undo", "j1").returncode == 0
    honcho.start()
    drain()
    assert b'"ev":"cancelled","ts"' in ledger_path(home).read_bytes() and honcho.conclusions_in("bm0-trusted") == []
    write_log(home, "s", turn_lines(1, "more", "to come"))  # the ledger grows past the copy
    decide.run(load())
    drain()
    rewritten(ledger_path(home), how, copy)
    for _ in range(2):
        decide.run(load())
        mirror.run(load())
    drain(6)
    assert honcho.conclusions_in("bm0-trusted") == []
    assert_nothing_misrouted_lost_or_doubled(home, honcho)
    assert_no_traceback()


@pytest.mark.parametrize("how", ["sorted", "reversed", "older copy"])
def test_an_item_the_owner_dropped_is_never_sent_whatever_the_ledger_says(outage_with_pending, honcho, how):
    """`bxmem outbox drop` takes an item out for good. A ledger sorted, reversed, or an older
    copy from before the drop put back: the dropped turn is still never sent."""
    home = outage_with_pending
    copy = ledger_path(home).read_bytes()
    result = bxmem_main("outbox", "drop", "turn:s-clean:1", "--reason", "not for memory")
    assert result.returncode == 0, result.stderr
    write_log(home, "later", turn_lines(1, "more", "to come"))
    decide.run(load())
    rewritten(ledger_path(home), how, copy)
    for _ in range(2):
        decide.run(load())
    honcho.start()
    drain(6)
    assert [m for m in honcho.messages if m["metadata"]["bxmem_item"] == "turn:s-clean:1"] == []
    assert_no_traceback()
