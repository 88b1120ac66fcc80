"""A FIFO, a directory or a link where bxmem reads a file: refused by name, never waited on.

A blocking open() of a FIFO with no writer never returns: one in the place of
a decided log, of the journal or of the index's files would hang every job at
its index refresh, send at its read-back and mirror at its journal, on every
run, until systemd killed it. Every reader opens through store.open_regular
(O_NONBLOCK, O_NOFOLLOW, then fstat: a regular file, or NotRegularFile naming
what it is) and says so in one line naming the file; the log's turns wait,
nothing is decided from it, nothing is lost (docs/interfaces.md, "Read").

Each job runs on a thread with a deadline; then the FIFO's write side is opened
so that a job that did block is let go and the suite does not hang.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time

import pytest
from helpers import decisions, ledger_events, write_log
from runbook_lines import cites

from bxmem.commands import decide, index_fold, mirror, recall, undo
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.errors import StorageError
from bxmem.store import files as store
from bxmem.store import index

DEADLINE_S = 10.0


def load():
    return config_module.load()


def finishes(job, fifo) -> tuple[bool, BaseException | None]:
    """Run `job` on a thread: (it ended within DEADLINE_S, what it raised). Then unblock it."""
    done = threading.Event()
    raised: list[BaseException] = []

    def body() -> None:
        try:
            job()
        except BaseException as exc:  # handed to the test
            raised.append(exc)
        done.set()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    in_time = done.wait(DEADLINE_S)
    for _ in range(200):  # every open of the FIFO after the first blocks too
        if not thread.is_alive():
            break
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # no reader waiting yet
                raise
        time.sleep(0.05)
    thread.join(5)
    return in_time, raised[0] if raised else None


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def to_fifo(path) -> None:
    path.unlink()
    os.mkfifo(path)


# --- the helper itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, kind",
    [
        (lambda p: os.mkfifo(p), "a named pipe (FIFO)"),
        (lambda p: p.mkdir(), "a directory"),
        (lambda p: p.symlink_to(p.with_name("real")), "a symbolic link"),
        (lambda p: p.symlink_to(p.with_name("absent")), "a symbolic link"),
    ],
)
@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_RDWR | os.O_APPEND, os.O_WRONLY])
def test_open_fd_refuses_what_is_not_a_regular_file_naming_it(tmp_path, make, kind, flags):
    (tmp_path / "real").write_bytes(b"x\n")
    path = tmp_path / "f.jsonl"
    make(path)
    with pytest.raises(store.NotRegularFile) as caught:
        os.close(store.open_fd(path, flags))
    assert caught.value.strerror == f"is {kind}, not a regular file" and caught.value.filename == str(path)
    assert isinstance(caught.value, OSError)  # every reader's handling of an unreadable file takes it


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_check_regular_names_what_sqlite_would_open(tmp_path, suffix):
    store.check_regular(tmp_path / "absent")
    (tmp_path / "regular").write_bytes(b"")
    store.check_regular(tmp_path / "regular")
    os.mkfifo(tmp_path / f"index{suffix}")
    with pytest.raises(store.NotRegularFile, match="named pipe"):
        store.check_regular(tmp_path / f"index{suffix}")


def test_open_file_opens_a_regular_file_and_says_when_there_is_none(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    with store.open_file(tmp_path / "f") as f:
        assert f.read() == b"abc"
    with pytest.raises(FileNotFoundError):
        store.open_file(tmp_path / "none")


# --- logs ------------------------------------------------------------------------------------


def test_a_fifo_in_place_of_a_decided_log_does_not_hang_the_index_refresh(
    home, brokerd, configure, monkeypatch, caplog
):
    configure(None)
    path = write_log(home, "s", turn_lines(1, "hi", "hello"))
    real = index_fold.refresh

    def after_the_swap(
        paths, progress=None, deadline=None
    ):  # the log becomes a FIFO between the decision and the refresh
        to_fifo(path)
        return real(paths, progress, deadline)

    monkeypatch.setattr(index_fold, "refresh", after_the_swap)
    in_time, raised = finishes(lambda: decide.run(load()), path)
    assert in_time and raised is None, ("decide hung in the index refresh", raised)
    assert decisions(home)["turn:s:1"]["reason"] == "clean; local-only"
    assert f"{path}: is a named pipe (FIFO), not a regular file; its decided turns are not indexed" in warnings(caplog)


def test_a_fifo_in_place_of_a_decided_log_does_not_hang_send_and_fails_the_turn(home, brokerd, honcho, configure):
    configure(honcho.url)
    path = write_log(home, "s", turn_lines(1, "hi", "hello"))
    decide.run(load())
    to_fifo(path)
    reports: list = []
    in_time, raised = finishes(lambda: reports.append(send.run(load())), path)
    assert in_time and raised is None, ("send hung on the log", raised)
    assert not honcho.messages and reports[0].failed == 1
    [failed] = [e for e in ledger_events(home) if e["ev"] == "failed"]
    assert failed["item"] == "turn:s:1"
    assert failed["reason"] == f"cannot read the turn back from {path}: is a named pipe (FIFO), not a regular file"


def test_logs_that_are_not_regular_files_are_named_once_and_the_others_decided(home, brokerd, configure, caplog):
    configure(None)
    logs = home / "logs"
    write_log(home, "ok", turn_lines(1, "a", "b"))
    (logs / "adir.jsonl").mkdir()
    os.mkfifo(logs / "afifo.jsonl")
    other = write_log(home, "other", turn_lines(1, "c", "d"))
    (logs / "alink.jsonl").symlink_to(other)  # another session's log, read under this one's labels: refused
    (logs / "dangling.jsonl").symlink_to(logs / "nowhere.jsonl")
    in_time, raised = finishes(lambda: decide.run(load()), logs / "afifo.jsonl")
    assert in_time and raised is None, raised
    assert set(decisions(home)) == {"turn:ok:1", "turn:other:1"}
    said = [m for m in warnings(caplog) if "cannot read" in m]
    assert sorted(said) == sorted(
        f"{logs / name}: cannot read: is {kind}, not a regular file; its turns wait, and it is tried again every 60 s "
        "or as soon as its mode or owner changes" + cites("log-unreadable")
        for name, kind in [
            ("adir.jsonl", "a directory"),
            ("afifo.jsonl", "a named pipe (FIFO)"),
            ("alink.jsonl", "a symbolic link"),
            ("dangling.jsonl", "a symbolic link"),
        ]
    )
    caplog.clear()
    write_log(home, "ok", turn_lines(2, "e", "f"))
    decide.run(load())  # the same files again: not said again
    assert "turn:ok:2" in decisions(home) and not [m for m in warnings(caplog) if "cannot read" in m]


def test_a_log_that_was_a_fifo_for_a_while_is_read_once_it_is_a_file_again(home, brokerd, configure, caplog):
    configure(None)
    path = write_log(home, "s", turn_lines(1, "a", "b"))
    decide.run(load())
    kept = path.read_bytes()
    to_fifo(path)
    in_time, raised = finishes(lambda: decide.run(load()), path)
    assert in_time and raised is None
    path.unlink()
    write_log(home, "s", [])
    path.write_bytes(kept)
    write_log(home, "s", turn_lines(2, "c", "d"))
    decide.run(load())
    assert [e["item"] for e in ledger_events(home) if e["ev"] == "decided"] == ["turn:s:1", "turn:s:2"]


# --- the journal -----------------------------------------------------------------------------


def _journal(home):
    return write_journal(
        home, [{"id": "j-1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "one"}]
    )


def test_a_fifo_in_place_of_the_journal_stops_mirror_with_one_line_naming_it(home, configure):
    configure(None)
    journal = _journal(home)
    mirror.run(load())
    to_fifo(journal)
    in_time, raised = finishes(lambda: mirror.run(load()), journal)
    assert in_time, "mirror hung on the journal"
    assert isinstance(raised, StorageError)
    assert raised.one_line() == (
        f"cannot read the journal {journal}: is a named pipe (FIFO), not a regular file; "
        "nothing is mirrored until it can be"
    )


def test_a_fifo_in_place_of_the_journal_does_not_hang_the_index_refresh_or_undo(home, brokerd, configure, caplog):
    configure(None)
    journal = _journal(home)
    mirror.run(load())
    to_fifo(journal)
    write_log(home, "s", turn_lines(1, "a", "b"))
    in_time, raised = finishes(lambda: decide.run(load()), journal)
    assert in_time and raised is None, raised
    assert (
        f"local index not updated ({journal}: is a named pipe (FIFO), not a regular file); recall may miss "
        "the newest entries"
    ) in warnings(caplog)
    in_time, raised = finishes(lambda: undo.run(load(), "j-1"), journal)
    assert in_time and isinstance(raised, OSError | StorageError), raised


# --- the index's own files -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_a_fifo_among_the_index_files_hangs_neither_a_job_nor_recall(home, brokerd, configure, caplog, suffix):
    configure(None)
    write_log(home, "s", turn_lines(1, "backups nightly", "restic"))
    decide.run(load())  # the index exists
    target = home / "memory" / "bxmem" / f"{index.INDEX_FILE}{suffix}"
    if target.exists():
        target.unlink()
    os.mkfifo(target)
    in_time, raised = finishes(lambda: recall.recall(load(), "backups"), target)
    assert in_time and raised is None, ("recall hung on the index", raised)
    write_log(home, "s", turn_lines(2, "more backups", "yes"))
    in_time, raised = finishes(lambda: decide.run(load()), target)
    assert in_time and raised is None, ("decide hung on the index", raised)
    said = [m for m in warnings(caplog) if "local index" in m]
    assert said and f"{target}: is a named pipe (FIFO), not a regular file" in said[0], said


def test_a_fifo_in_place_of_the_journal_does_not_hang_send_and_fails_the_edit(home, honcho, configure):
    configure(honcho.url)
    journal = write_journal(
        home,
        [
            {
                "id": "e1",
                "ts": "t",
                "session": "s",
                "op": "identity_add",
                "file": "user.md",
                "entry": "Kyle prefers metric units",
            }
        ],
    )
    mirror.run(load())
    to_fifo(journal)
    reports: list = []
    in_time, raised = finishes(lambda: reports.append(send.run(load())), journal)
    assert in_time and raised is None, ("send hung on the journal", raised)
    assert reports[0].failed == 1 and not honcho.conclusions
    [failed] = [e for e in ledger_events(home) if e["ev"] == "failed"]
    assert failed["item"] == "edit:e1"
    assert failed["reason"] == (
        f"cannot read the entry back from the journal: {journal}: is a named pipe (FIFO), not a regular file"
    )
