"""decide's catch-up of the local index is inside its run's time (issue 28, item 8): a
long history indexed again (memory/bxmem/ deleted, or an index another version built)
is done over several runs, each stopping at its deadline with what it did kept, the
next run going on, and no run answered idle while the index is behind."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from helpers import write_log

from bxmem.commands import decide, jobrun
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.start.idle import is_idle
from bxmem.start.lean_argv import parse
from bxmem.store import index as index_module

TURNS = 300


def load():
    return config_module.load()


def indexed(home) -> int:
    path = home / "memory" / "bxmem" / "index.sqlite3"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM docs").fetchone()[0]


@pytest.fixture
def history(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    lines = []
    for n in range(1, TURNS + 1):
        lines += turn_lines(n, f"question {n}", f"answer {n}")
    write_log(home, "long", lines)
    decide.run(load())
    assert indexed(home) == TURNS
    return home


def test_the_index_is_caught_up_over_runs_each_within_its_time(history, monkeypatch):
    shutil.rmtree(history / "memory" / "bxmem")  # the owner deletes the cache
    monkeypatch.setattr(jobrun, "INDEX_BY_S", -1.0)  # every run's time is up at once: 63 lines a run
    counts = []
    for _ in range(20):
        decide.run(load())
        counts.append(indexed(history))
        if counts[-1] == TURNS:
            break
        assert not is_idle(parse(["bxmem", "decide"]))  # behind: the next timer run goes on with it
    assert counts[-1] == TURNS and len(counts) > 3, counts
    assert counts == sorted(counts) and len(set(counts)) == len(counts)  # each run went on from the last
    decide.run(load())
    assert is_idle(parse(["bxmem", "decide"]))  # caught up: idle again


def test_a_rebuild_of_an_index_another_version_built_spans_runs_too(history, monkeypatch):
    path = history / "memory" / "bxmem" / "index.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(index_module.SCHEMA_VERSION - 1),))
    monkeypatch.setattr(jobrun, "INDEX_BY_S", -1.0)
    runs = 0
    while runs < 20:
        decide.run(load())
        runs += 1
        if not (path.parent / ".index.sqlite3.new").exists():
            break
    assert runs > 3
    assert indexed(history) == TURNS
