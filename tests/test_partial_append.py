"""A partial ledger append loses no decision and doubles none: a full disk (the
append is cut back off) or a crash at any byte (half a line stays, and the
next append closes it off), then the jobs run again."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from enospc import Crash, DiskFull, Killed
from helpers import write_log

from bxmem.commands import decide, mirror
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.errors import StorageError
from bxmem.store.ledger import Ledger


def load():
    return config_module.load()


def decided_counts(home) -> Counter:
    """Decided items in the ledger as its readers (the outbox, the index) see them:
    whole lines only, a torn last line none."""
    events = Ledger(home / "memory" / "honcho.jsonl").read_from(0).events
    return Counter(ev["item"] for ev in events if ev.get("ev") == "decided")


def thirty_turns_stepping_back(home) -> set[str]:
    """30 turns whose timestamps step back at turn 16 (loopd's clock was reset):
    turns 16-30 sort before turns 1-15."""
    lines = []
    for n in range(1, 31):
        for line in turn_lines(n, f"question {n}", f"answer {n}"):
            minute = n if n < 16 else n - 15
            line["ts"] = f"2026-09-27T{10 if n < 16 else 9:02d}:{minute:02d}:00Z"
            lines.append(line)
    write_log(home, "s", lines)
    return {f"turn:s:{n}" for n in range(1, 31)}


@pytest.fixture
def local(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    return home


def test_the_disk_full_but_8_kib_during_decide_loses_no_turn(local):
    """The issue's reproduction: turns 16-30 were decided and 1-15 never were."""
    expected = thirty_turns_stepping_back(local)
    decide.run(load())  # a first run: the state, the key and the index exist, as on a live host
    (local / "memory" / "honcho.jsonl").unlink()
    (local / "memory" / "bxmem" / "decide.json").unlink()
    with DiskFull(local, 8192) as disk, pytest.raises(StorageError, match="No space left on device"):
        decide.run(load())
    assert disk.hit
    decide.run(load())
    decide.run(load())
    assert decided_counts(local) == Counter(dict.fromkeys(expected, 1))


def test_a_full_disk_mid_append_leaves_the_ledger_as_it_was(local):
    write_log(local, "a", turn_lines(1, "one", "1"))
    decide.run(load())
    ledger = local / "memory" / "honcho.jsonl"
    before = ledger.read_bytes()
    write_log(local, "a", turn_lines(2, "two", "2") + turn_lines(3, "three", "3"))
    with DiskFull(ledger, 300), pytest.raises(StorageError, match="nothing of this append was kept"):
        decide.run(load())
    assert ledger.read_bytes() == before


def crash_points(rng: random.Random, total: int, line_ends: list[int], n: int) -> list[int]:
    """Byte counts to die at: just before and after each newline (a line
    missing only its newline is a whole event), and others at random."""
    points = {p + d for p in line_ends for d in (-1, 0, 1) if 0 <= p + d < total}
    points |= {rng.randrange(total) for _ in range(n)}
    return sorted(points)


def ledger_line_ends(home) -> tuple[int, list[int]]:
    data = (home / "memory" / "honcho.jsonl").read_bytes()
    return len(data), [i for i, b in enumerate(data) if b == 0x0A]


@pytest.mark.parametrize("seed", [1, 2])
def test_decide_killed_at_any_byte_of_its_append_decides_each_turn_once(local, tmp_path, seed):
    expected = thirty_turns_stepping_back(local)
    write_log(local, "t", turn_lines(1, "other", "session"))
    expected.add("turn:t:1")
    decide.run(load())
    total, ends = ledger_line_ends(local)
    state = local / "memory" / "bxmem"
    for point in crash_points(random.Random(seed), total, ends[:6] + ends[-3:], 12):
        (local / "memory" / "honcho.jsonl").unlink()
        (state / "decide.json").unlink()
        with Crash(local / "memory" / "honcho.jsonl", point), pytest.raises(Killed):
            decide.run(load())
        decide.run(load())
        decide.run(load())
        assert decided_counts(local) == Counter(dict.fromkeys(expected, 1)), point


def test_mirror_killed_at_any_byte_of_its_append_decides_each_edit_once(home, configure):
    configure("http://127.0.0.1:9")
    records = [
        {"id": f"e{n}", "ts": "t", "session": "s", "op": "identity_add", "file": "memory.md", "entry": f"fact {n}"}
        for n in range(12)
    ]
    records += [
        {"id": "r3", "ts": "t", "session": "s", "op": "identity_remove", "file": "memory.md", "entry": "fact 3"}
    ]
    write_journal(home, records)
    mirror.run(load())
    reference = [json.loads(line) for line in (home / "memory" / "honcho.jsonl").read_text().splitlines()]
    total, ends = ledger_line_ends(home)
    for point in crash_points(random.Random(3), total, ends[:4] + ends[-2:], 10):
        (home / "memory" / "honcho.jsonl").unlink()
        (home / "memory" / "bxmem" / "mirror.json").unlink()
        with Crash(home / "memory" / "honcho.jsonl", point), pytest.raises(Killed):
            mirror.run(load())
        mirror.run(load())
        mirror.run(load())
        assert decided_counts(home) == Counter({f"edit:{r['id']}": 1 for r in records}), point
        got = {
            e["item"]: (e["role"], e["reason"], e["actions"])
            for e in Ledger(home / "memory" / "honcho.jsonl").read_from(0).events
        }
        # The remove still names the conclusion its add wrote, however the run was cut.
        assert got == {e["item"]: (e["role"], e["reason"], e["actions"]) for e in reference}, point


def test_a_full_disk_leaves_the_index_in_place_and_it_catches_up_later(local, monkeypatch, caplog):
    """SQLite's "database or disk is full" is no corrupt index: it stays where it is
    (moving it aside took more of a full disk) and catches up on a later run."""
    import sqlite3

    from bxmem.commands import index_fold
    from bxmem.log import log
    from bxmem.store import index

    write_log(local, "a", turn_lines(1, "first words", "1"))
    decide.run(load())
    real = index_fold.catch_up

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(index_fold, "catch_up", full)
    log.propagate = True
    write_log(local, "a", turn_lines(2, "second words", "2"))
    decide.run(load())
    assert any("local index not updated" in r.getMessage() and "catches up" in r.getMessage() for r in caplog.records)
    state = local / "memory" / "bxmem"
    assert not (state / "index.sqlite3.corrupt").exists()
    monkeypatch.setattr(index_fold, "catch_up", real)
    write_log(local, "a", turn_lines(3, "third words", "3"))
    decide.run(load())
    assert index.Index.for_state(state).count() == 3
