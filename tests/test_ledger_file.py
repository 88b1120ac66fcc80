"""The ledger is a regular file, never reached through a link, and its name is
durable before anything is appended to it (store.open_ledger, store.make_dirs)."""

from __future__ import annotations

import os
import signal

import pytest
from helpers import bxmem_inprocess, write_log

from bxmem.commands import decide
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines

REFUSED = "is a symbolic link; bxmem keeps its ledger in a regular file and never reads or writes it through a link"


@pytest.fixture
def logged(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    (home / "memory").mkdir()
    return home


@pytest.mark.parametrize("target", ["a file elsewhere", "nothing"])
@pytest.mark.parametrize("command", ["decide", "mirror", "send", "sync", "index"])
def test_a_ledger_that_is_a_symbolic_link_is_refused(logged, tmp_path, target, command):
    elsewhere = tmp_path / "elsewhere.jsonl"
    if target == "a file elsewhere":
        elsewhere.write_bytes(b"")
    ledger = logged / "memory" / "honcho.jsonl"
    ledger.symlink_to(elsewhere)
    result = bxmem_inprocess(*(["index", "rebuild"] if command == "index" else [command]))
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == f"bxmem: error: {ledger} {REFUSED} (replace the link with the file itself)"
    assert ledger.is_symlink()
    assert not elsewhere.exists() or elsewhere.read_bytes() == b""  # nothing written through it, nothing made


class Hung(BaseException):
    """Not an OSError (TimeoutError is one, and bxmem rightly catches those): nothing catches it."""


NOT_REGULAR = {
    "a FIFO": (lambda path: os.mkfifo(path, 0o600), "is a named pipe (FIFO), not a regular file"),
    "a directory": (lambda path: path.mkdir(), "is a directory, not a regular file"),
}


@pytest.mark.parametrize("kind", NOT_REGULAR)
@pytest.mark.parametrize("command", ["decide", "mirror", "send", "sync", "index"])
def test_a_ledger_that_is_not_a_regular_file_is_refused_without_hanging(logged, kind, command):
    """Before: a FIFO hung every job on its open, a directory was a traceback."""
    ledger = logged / "memory" / "honcho.jsonl"
    make, what = NOT_REGULAR[kind]
    make(ledger)

    def alarm(*_args):
        raise Hung("hung on the ledger")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(30)
    try:
        result = bxmem_inprocess(*(["index", "rebuild"] if command == "index" else [command]))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == f"bxmem: error: {ledger} {what}; bxmem keeps its ledger in a regular file"
    assert "Traceback" not in result.stderr
    assert not ledger.is_file()  # nothing made in its place


def fsynced(monkeypatch) -> list[str]:
    """The path of every descriptor fsynced, in order."""
    seen: list[str] = []
    real = os.fsync

    def recording(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return seen


def test_a_new_ledger_and_its_folders_are_made_durable_before_the_first_append(home, brokerd, configure, monkeypatch):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    seen = fsynced(monkeypatch)
    decide.run(config_module.load())
    memory, ledger, state = str(home / "memory"), str(home / "memory" / "honcho.jsonl"), str(home / "memory" / "bxmem")
    assert str(home) in seen and memory in seen
    assert (
        seen.index(str(home)) < seen.index(memory) < seen.index(ledger)
    )  # memory/ in the home, then the ledger in memory/
    key_written = next(i for i, path in enumerate(seen) if path.startswith(state + "/.entry.key."))
    assert state in seen[key_written + 1 :]  # entry.key, linked into place, then its name fsynced in its folder


def test_the_directory_is_fsynced_once_not_on_every_append(home, brokerd, configure, monkeypatch):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    decide.run(config_module.load())
    seen = fsynced(monkeypatch)
    write_log(home, "s", turn_lines(2, "c", "d"))
    decide.run(config_module.load())
    assert str(home / "memory") not in seen  # the ledger existed: only the state folder's renames


def test_a_state_file_holding_a_lone_surrogate_is_written_and_read_back(tmp_path):
    """A ledger line whose workspace holds a lone surrogate escape is written to
    workspace-roles.json and read back (never a UnicodeEncodeError in the job that saves it;
    tests/test_hands_and_clock_properties.py draws such lines)."""
    from bxmem.formats.shapes import anything
    from bxmem.store.state_json import load_json, write_json

    value = {"ws": "\ud800bm0-trusted", "n": 1}
    write_json(tmp_path / "state.json", value)
    assert load_json(tmp_path / "state.json", anything) == (value, None)
