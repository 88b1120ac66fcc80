"""A log (or the journal) rewritten under its cursor is read again from its start
(sources/cursor.py): a copy-truncate rotation cuts the file to nothing in
place, loopd goes on appending, and by the next run the file may have grown
past the old cursor, which then falls among new lines. Reading on from there
would skip the earlier ones, and a tool result's taint with them.
"""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
from helpers import decisions, ledger_events, write_log

from bxmem.commands import decide, mirror
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.start.idle import is_idle
from bxmem.start.lean_argv import parse

UNTRUSTED = [{"untrusted": True, "class": "public"}]


def raw(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def padded_to(size: int, lines: list[dict]) -> bytes:
    """`lines` with the tool result's text padded so that they take exactly `size` bytes."""
    base = len(raw(lines))
    assert base <= size, "the old log must be longer than the new turn"
    for line in lines:
        if line["type"] == "tool_result":
            line["text"] += "x" * (size - base)
    data = raw(lines)
    assert len(data) == size
    return data


def rewritten(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "rewritten" in r.getMessage()]


@pytest.fixture
def clean(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    return home


def test_a_copy_truncate_that_grew_past_the_cursor_is_read_from_the_start(clean, caplog):
    old = [line for n in range(1, 6) for line in turn_lines(n, f"q{n}", f"a{n}")]
    path = write_log(clean, "s", old)
    decide.run(config_module.load())
    offset = path.stat().st_size
    ino = path.stat().st_ino
    # copy-truncate: the old lines go elsewhere, the file is cut in place (same inode), loopd appends
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(padded_to(offset, turn_lines(6, "read this page", "done", results=UNTRUSTED)))
        f.write(raw(turn_lines(7, "and now?", "fine")))
    assert path.stat().st_ino == ino and path.stat().st_size > offset
    decide.run(config_module.load())
    got = decisions(clean)
    assert got["turn:s:6"]["role"] == "untrusted"
    assert got["turn:s:7"]["role"] == "untrusted"  # the tool result before the old cursor was seen
    assert [e["item"] for e in ledger_events(clean) if e["ev"] == "decided"] == [f"turn:s:{n}" for n in range(1, 8)]
    assert [m for m in rewritten(caplog) if m.startswith(f"{path}: rewritten before the point read to")]


def test_a_log_overwritten_in_place_with_other_bytes_is_read_from_the_start(clean, caplog):
    path = write_log(clean, "s", turn_lines(1, "a", "b"))
    decide.run(config_module.load())
    size = path.stat().st_size
    # Written over in place, to the same length: a user line, a tool result's label, the turn's end, blanks.
    tainted = (
        raw(turn_lines(1, "a", "b")[:1])
        + b'{"type":"tool_result","turn":1,"label":{"untrusted":true,"class":"public"}}\n'
        + raw(turn_lines(1, "a", "b")[-1:])
    )
    assert len(tainted) < size
    with open(path, "r+b") as f:
        f.write(tainted + b" " * (size - len(tainted) - 1) + b"\n")
        f.write(raw(turn_lines(2, "c", "d")))
    decide.run(config_module.load())
    assert rewritten(caplog)
    assert decisions(clean)["turn:s:2"]["role"] != "trusted"


def written_a_while_ago(path) -> None:
    """As a log is when a rotation comes: its mtime is not the one a rewrite gives
    it (the kernel's clock for mtimes ticks every few ms; a test is quicker)."""
    then = time.time_ns() - 10 * 10**9
    os.utime(path, ns=(then, then))


def cut_and_write(path, data: bytes) -> None:
    with open(path, "r+b") as f:  # copy-truncate leaves the same inode
        f.truncate(0)
        f.write(data)


def test_a_turn_starting_exactly_at_the_old_cursor_after_a_copy_truncate_is_not_trusted(clean, caplog):
    """Before: read on from the old offset, the tool result before it was never
    seen and turn 2 went trusted."""
    path = write_log(clean, "s", turn_lines(1, "q", "a"))
    decide.run(config_module.load())
    old = path.stat().st_size
    result = raw([{"type": "tool_result", "turn": 1, "id": "c1", "label": UNTRUSTED[0], "text": "<page>"}])
    filler = {"type": "note", "x": ""}
    filler["x"] = "y" * (old - len(result) - len(raw([filler])))
    head = result + raw([filler])
    assert len(head) == old  # turn 2's first line starts where the cursor stands
    cut_and_write(path, head + raw(turn_lines(2, "and now?", "fine")))
    report = decide.run(config_module.load())
    got = decisions(clean)["turn:s:2"]
    assert got["role"] == "untrusted" and got["untrusted_by"] and report.decided == {"untrusted/untrusted-session": 1}
    assert [e["item"] for e in ledger_events(clean) if e["ev"] == "decided"] == ["turn:s:1", "turn:s:2"]
    assert [m for m in rewritten(caplog) if m.startswith(f"{path}: rewritten before the point read to")]


def test_a_log_rewritten_to_the_same_size_is_read_again_by_decide_and_the_idle_path(clean, caplog):
    """Before: a log of the inode and size the cursor names was taken as read,
    by decide and by the idle path: the new turn was never decided."""
    path = write_log(clean, "s", turn_lines(1, "q", "a"))
    written_a_while_ago(path)
    decide.run(config_module.load())
    assert is_idle(parse(["bxmem", "decide"]))
    new = raw(turn_lines(2, "q", "a"))
    assert len(new) == path.stat().st_size
    cut_and_write(path, new)
    assert not is_idle(parse(["bxmem", "decide"]))
    report = decide.run(config_module.load())
    assert report.decided == {"trusted/clean": 1}
    assert [e["item"] for e in ledger_events(clean) if e["ev"] == "decided"] == ["turn:s:1", "turn:s:2"]
    assert [m for m in rewritten(caplog) if m.startswith(f"{path}: rewritten")]
    assert is_idle(parse(["bxmem", "decide"]))  # read: idle again, and nothing decided twice
    decide.run(config_module.load())
    assert len([e for e in ledger_events(clean) if e["ev"] == "decided"]) == 2


def test_a_journal_rewritten_to_the_same_size_wakes_the_idle_path(home):
    path = write_journal(home, [note(1, "one")])
    written_a_while_ago(path)
    mirror.run(config_module.load())
    assert is_idle(parse(["bxmem", "mirror"]))
    cut_and_write(path, raw([note(2, "owt")]))
    assert path.stat().st_size == len(raw([note(1, "one")]))
    assert not is_idle(parse(["bxmem", "mirror"]))
    mirror.run(config_module.load())
    assert set(decisions(home)) == {"edit:e1", "edit:e2"}


def test_appends_are_never_mistaken_for_a_rewrite(clean, caplog):
    path = write_log(clean, "s", [])
    for n in range(1, 30):
        write_log(clean, "s", turn_lines(n, "q" * n, "a")[: n % 4 + 1])  # runs stop anywhere in a turn
        decide.run(config_module.load())
        write_log(clean, "s", turn_lines(n, "q" * n, "a")[n % 4 + 1 :])
    decide.run(config_module.load())
    assert not rewritten(caplog) and len(decisions(clean)) == 29
    assert path.stat().st_size > 256  # past the hashed windows


def test_a_replaced_entry_key_is_no_rewrite(clean, caplog):
    write_log(clean, "s", turn_lines(1, "a", "b"))
    decide.run(config_module.load())
    (clean / "memory" / "bxmem" / "entry.key").unlink()  # the cursor's hashes were made with it
    write_log(clean, "s", turn_lines(2, "c", "d"))
    decide.run(config_module.load())
    assert not rewritten(caplog) and set(decisions(clean)) == {"turn:s:1", "turn:s:2"}


def note(n: int, text: str = "x") -> dict:
    return {"id": f"e{n}", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": text}


def test_a_journal_rewritten_under_its_cursor_loses_no_edit(home, caplog):
    path = write_journal(home, [note(1, "one"), note(2, "two"), note(3, "three")])
    mirror.run(config_module.load())
    offset = path.stat().st_size
    first = note(4, "")
    first["entry"] = "y" * (offset - len(json.dumps(first).encode()) - 1)
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(json.dumps(first).encode() + b"\n")
    assert path.stat().st_size == offset
    write_journal(home, [note(5, "five")])
    mirror.run(config_module.load())
    assert set(decisions(home)) == {f"edit:e{n}" for n in range(1, 6)}  # e4, before the old cursor, too
    assert [m for m in rewritten(caplog) if m.startswith(f"{path}: rewritten")]
