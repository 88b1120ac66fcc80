"""An index another version of bxmem built is rebuilt on its first update, never read;
one writer at a time; a large rebuild at a terminal shows its progress (bxmem/commands/index_fold.py)."""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading

import pytest
from helpers import write_log

from bxmem.cli import progress
from bxmem.commands import decide, index_fold, recall
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.start import idle as fastpath
from bxmem.store.files import JobLock
from bxmem.store.index import INDEX_FILE, SCHEMA_VERSION, Index, IndexOutdated

# The schema bxmem 0.1.0 wrote (index schema 1): one FTS5 row per document, no passages.
SCHEMA_1 = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE docs(id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, kind TEXT NOT NULL, tag TEXT NOT NULL,
    class TEXT NOT NULL, file TEXT, session TEXT, ts TEXT, text TEXT NOT NULL);
CREATE TABLE edit_spans(id TEXT PRIMARY KEY, off INTEGER, len INTEGER);
CREATE VIRTUAL TABLE docs_fts USING fts5(text, content='docs', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER docs_ai AFTER INSERT ON docs BEGIN INSERT INTO docs_fts(rowid, text) VALUES (new.id, new.text); END;
INSERT INTO meta VALUES ('schema', '1');
INSERT INTO docs(key, kind, tag, class, session, text) VALUES ('turn:s:1', 'turn', 'memory', 'private', 's', 'the wombat backups');
"""


def load():
    return config_module.load()


def _old_index(home) -> None:
    path = home / "memory" / "bxmem" / INDEX_FILE
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)
    db.close()


@pytest.fixture
def decided(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "where do the wombat backups go", "to the numbat nas"))
    decide.run(load())
    return home


def test_recall_never_reads_an_index_of_another_version_and_says_so(decided):
    _old_index(decided)
    result = recall.recall(load(), "wombat backups")
    assert result.hits == []
    assert "built by another version of bxmem (schema 1" in result.unavailable["local"]
    assert "the next decide or mirror rebuilds it" in result.unavailable["local"]


def test_the_next_update_rebuilds_it_and_says_so_once(decided, caplog):
    _old_index(decided)
    with caplog.at_level(logging.INFO, logger="bxmem"):
        decide.run(load())  # nothing new to decide: the index is still updated after the run
    lines = [r.getMessage() for r in caplog.records]
    assert any("rebuilding the local index" in line and "schema 1" in line for line in lines), lines
    assert any(line.startswith("local index rebuilt: 1 turns and edits") for line in lines), lines
    hits = recall.recall(load(), "wombat backups").hits
    assert [h.text for h in hits] == ["where do the wombat backups go\nto the numbat nas"]
    state = decided / "memory" / "bxmem"
    assert not [p.name for p in state.iterdir() if p.name.endswith(".new")]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bxmem"):
        decide.run(load())
    assert not [r for r in caplog.records if "rebuil" in r.getMessage()]


def test_an_index_whose_version_cannot_be_read_is_rebuilt(decided):
    path = decided / "memory" / "bxmem" / INDEX_FILE
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = 'two' WHERE key = 'schema'")
    db.commit()
    db.close()
    with pytest.raises(IndexOutdated):
        Index(path).db()
    decide.run(load())
    assert Index(path).db().execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (str(SCHEMA_VERSION),)


def test_a_summary_from_before_the_new_index_is_not_idle():
    """After an upgrade the timer's first run is a real one, which rebuilds the index: the
    idle path never opens it. Summaries of the version that wrote schema 1 said version 2."""
    assert fastpath.SUMMARY_VERSION >= 3


def test_one_writer_at_a_time(decided, monkeypatch):
    """The lock is a byte of the ledger (store.JobLock), as each job's: another run holding
    it makes an update wait, then give up with a warning; once it lets go, the update runs."""
    other = JobLock(load().paths.ledger, "index")
    assert other.acquire()
    monkeypatch.setattr(index_fold, "WAIT_S", 0.2)
    try:
        applied, warning = index_fold.update(load().paths)
        assert warning is not None
        assert applied == 0 and "another run held its lock" in warning
        timer = threading.Timer(0.1, other.release)  # the other run finishes: this one goes on
        timer.start()
        monkeypatch.setattr(index_fold, "WAIT_S", 5.0)
        write_log(
            decided,
            "s",
            turn_lines(1, "where do the wombat backups go", "to the numbat nas")
            + turn_lines(2, "and the quokka logs", "the quokka nas"),
        )
        decide.run(load())
        timer.join()
    finally:
        other.release()
    assert [h.text for h in recall.recall(load(), "quokka").hits] == ["and the quokka logs\nthe quokka nas"]


def test_a_large_rebuild_at_a_terminal_shows_its_progress(decided, monkeypatch):
    master, slave = os.openpty()
    monkeypatch.setattr(progress, "THRESHOLD_BYTES", 0)
    monkeypatch.setattr(sys, "stderr", os.fdopen(slave, "w"))
    try:
        applied, warning = index_fold.update(load().paths, rebuild=True, progress=progress.index_rebuild_bar)
        sys.stderr.flush()
    finally:
        sys.stderr.close()
    shown = os.read(master, 65536).decode(errors="replace")
    os.close(master)
    assert applied == 1 and warning is None
    assert "rebuilding the local index" in shown


def test_a_rebuild_elsewhere_shows_no_bar(decided, monkeypatch, capfd):
    monkeypatch.setattr(progress, "THRESHOLD_BYTES", 0)
    assert index_fold.update(load().paths, rebuild=True, progress=progress.index_rebuild_bar) == (1, None)
    assert "rebuilding" not in capfd.readouterr().err
