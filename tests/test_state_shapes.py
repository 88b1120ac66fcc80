"""A state file of the wrong shape is rebuilt, not used (docs/interfaces.md,
"Bad local input"): decide.json, mirror.json, the outbox checkpoint and the
config cache are each checked whole on load (formats/shapes.py); what does not fit
is said once, naming the file, and rebuilt from the ledger, the logs and the
journal. The result is the one a deleted file gives (tests/test_state_cache.py):
nothing lost, nothing sent twice, the right conclusion removed.

Each state file also takes the place of a FIFO (which would hang a job that
opened it blocking), a symbolic link, a directory, garbage and deep nesting.
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import signal

import pytest
from helpers import bxmem_inprocess, decisions, write_log
from runbook_lines import cites

from bxmem.commands import decide, mirror, sync
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.start.idle import is_idle
from bxmem.start.lean_argv import parse
from bxmem.start.marshal_seal import seal, unseal
from bxmem.store.state_json import write_json


def load():
    return config_module.load()


def edit(n: str, op: str, entry: str) -> dict:
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": "s1", "op": op, "file": "user.md", "entry": entry}


@pytest.fixture
def added(home, brokerd, honcho, configure):
    """Two entries added and sent, a turn decided and sent: every state file written."""
    configure(honcho.url)
    write_log(home, "s1", turn_lines(1, "hello", "hi"))
    decide.run(load())
    write_journal(home, [edit("a1", "identity_add", "alpha"), edit("a2", "identity_add", "beta")])
    mirror.run(load())
    send.run(load())
    return home / "memory" / "bxmem"


def read(path):
    if path.suffix == ".json":
        value = json.loads(path.read_bytes())
        del value["seal"]
        return value
    return marshal.loads(unseal(path.read_bytes()))


def write(path, value):
    """As bxmem writes it, sealed (a bxmem that wrote another shape): the shape is what is checked."""
    if path.suffix == ".json":
        write_json(path, value)
    else:
        path.write_bytes(seal(marshal.dumps(value)))


def changed(name, change):
    def corrupt(state_dir):
        path = state_dir / name
        value = read(path)
        change(value)
        write(path, value)

    return corrupt


def first(mapping):
    return mapping[next(iter(mapping))]


# Wrong shapes, each a file bxmem could have read without noticing.
WRONG = {
    "decide.json": {
        "a number where a cursor belongs": lambda v: v["logs"].update(s1=5),
        "a cursor without offset": lambda v: v["logs"]["s1"].pop("offset"),
        "decided turns out of order": lambda v: v["logs"]["s1"].update(decided=[[3, 3], [1, 1]]),
        "a decided range of three": lambda v: v["logs"]["s1"].update(decided=[[1, 1, 1]]),
        "an offset as a string": lambda v: v["logs"]["s1"].update(offset="12"),
        "undecided a list": lambda v: v.update(undecided=[]),
        "a waiting turn without its labels": lambda v: v.update(undecided={"s1": [{"turn": 2}]}),
        "a class nobody has": lambda v: v["logs"]["s1"].update({"class": "internal"}),
    },
    "mirror.json": {
        "no cursor": lambda v: v.pop("cursor"),
        "live a list": lambda v: v.update(live=[]),
        "an action without do": lambda v: first(v["edits"])["actions"][0].pop("do"),
        "an unconclude naming nothing": lambda v: first(v["edits"]).update(actions=[{"do": "unconclude"}]),
        "a negative offset": lambda v: v["cursor"].update(offset=-1),
    },
    "outbox.marshal": {
        "pending a list": lambda v: v.update(pending=[]),
        "a pending record of five": lambda v: v.update(pending={"turn:s1:9": (0, "w", "s1", "turn", None)}),
        "known turns not ranges": lambda v: v.update(known_turns={"s1": [[2, 1]]}),
        "a backoff without its end": lambda v: v.update(backoff={"since": "t", "delay": 5.0}),
        "a conclusion without its id": lambda v: first(v["conclusions"]).pop("id"),
        "a set as a list": lambda v: v.update(known_other=sorted(v["known_other"])),
    },
    "config.marshal": {
        "honcho a list": lambda v: v["data"].update(honcho=[]),
        "a read source with a field too many": lambda v: v["data"]["honcho"].update(
            read=[{"agent": "a", "workspace": "w", "trust": "trusted", "trust_class": "private", "x": "y"}]
        ),
        "no batch": lambda v: v["data"].pop("batch"),
    },
}
CASES = [(name, why, changed(name, change)) for name, cases in WRONG.items() for why, change in cases.items()]


def _fifo(path):
    path.unlink()
    os.mkfifo(path, 0o600)


def _link(path):
    other = path.with_name("elsewhere")
    other.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(other)


KINDS = {
    "a FIFO": _fifo,
    "a symbolic link": _link,
    "garbage": lambda path: path.write_bytes(os.urandom(64)),
    "empty": lambda path: path.write_bytes(b""),
    "nested 100,000 deep": lambda path: path.write_bytes(
        b"[" * 100_000 + b"]" * 100_000 if path.suffix == ".json" else b"[\x01\x00\x00\x00" * 100_000 + b"N"
    ),
}
STATE_FILES = list(WRONG)
CASES += [
    (name, kind, lambda state_dir, name=name, make=make: make(state_dir / name))
    for name in STATE_FILES
    for kind, make in KINDS.items()
]


class Hung(BaseException):
    """Not an OSError (TimeoutError is one, and bxmem rightly catches those): nothing catches it."""


@pytest.fixture
def no_hang():
    """A job that opens a FIFO blocking never returns: fail the test instead."""

    def alarm(*_args):
        raise Hung("a job hung on a state file")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def cycle(home):
    """A remove and a new turn, carried through every job and sync."""
    write_journal(home, [edit("r1", "identity_remove", "alpha")])
    write_log(home, "s1", turn_lines(2, "again", "yes"))
    assert decide.run(load()).exit_code == 0
    assert mirror.run(load()).exit_code == 0
    for _ in range(3):
        send.run(load())
    return sync.status(load(), check=False)


@pytest.mark.parametrize(("name", "why", "corrupt"), CASES, ids=[f"{n}: {w}" for n, w, _c in CASES])
def test_a_state_file_bxmem_cannot_use_is_rebuilt(added, home, honcho, no_hang, caplog, name, why, corrupt):
    corrupt(added)
    status = cycle(home)
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["beta"]
    assert decisions(home)["edit:r1"]["actions"][0]["of"] == "edit:a1#0"
    turns = [m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-trusted")]
    assert turns.count("turn:s1:1") == 2 and turns.count("turn:s1:2") == 2  # two parts each, once
    assert not status["failed"] and not status["held"]
    path = added / name
    said = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.getMessage().startswith(f"{path}: ")
    ]
    assert len(said) == 1, said  # once, naming the file; then rebuilt
    assert "rebuilt" in said[0] or "validated again" in said[0], said


@pytest.mark.parametrize("name", STATE_FILES)
def test_a_directory_in_a_state_file_s_place_is_one_line(added, home, name):
    path = added / name
    path.unlink()
    path.mkdir()
    job = {"decide.json": "decide", "mirror.json": "mirror", "outbox.marshal": "send", "config.marshal": "sync"}[name]
    result = bxmem_inprocess(job)
    if name == "config.marshal":  # a cache that cannot be written is only a slower start
        assert result.returncode in (0, 4), result.stderr
        return
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == f"bxmem: error: cannot write {path}: Is a directory"


@pytest.mark.parametrize("job", ["decide", "mirror", "send"])
@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "a summary of another shape"])
def test_an_idle_summary_bxmem_cannot_use_makes_the_job_run(added, job, kind, no_hang):
    summary = added / f"idle-{job}.marshal"
    assert is_idle(parse(["bxmem", job]))
    summary.unlink()
    if kind == "a FIFO":
        os.mkfifo(summary, 0o600)
    elif kind == "a directory":
        summary.mkdir()
    else:
        summary.write_bytes(seal(marshal.dumps({"version": 2, "watch": {"x": 1}, "config": None})))
    assert not is_idle(parse(["bxmem", job]))
    if kind != "a directory":
        assert bxmem_inprocess(job).returncode == 0
        assert is_idle(parse(["bxmem", job]))


def test_the_config_file_as_a_fifo_is_one_line(config_file, no_hang):
    config_file.unlink()
    os.mkfifo(config_file, 0o600)
    assert not is_idle(parse(["bxmem", "decide"]))
    result = bxmem_inprocess("config", "check")
    assert result.returncode == 78
    assert (
        result.stderr
        == f"bxmem: error: {config_file}: is a named pipe (FIFO), not a regular file{cites('honcho-config-invalid')}\n"
    )


KEY_CASES = {
    "longer than a key": lambda path: path.write_bytes(os.urandom(100)),
    "a FIFO": _fifo,
    "a symbolic link": _link,
    "empty": lambda path: path.write_bytes(b""),
}


@pytest.mark.parametrize("kind", KEY_CASES)
def test_an_entry_key_bxmem_did_not_write_is_replaced(added, home, honcho, no_hang, caplog, kind):
    """Before: over 64 bytes crashed every job (BLAKE2b's longest key), a FIFO hung
    them, and an empty file was taken for a key of nothing."""
    path = added / "entry.key"
    KEY_CASES[kind](path)
    status = cycle(home)
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["beta"] and not status["failed"]
    assert path.is_file() and not path.is_symlink() and len(path.read_bytes()) == 32
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"{path}: ")]
    assert len(said) == 1 and "replaced with a new key" in said[0], said


@pytest.mark.parametrize(
    "damage", ["UPDATE meta SET value = 'x' WHERE key = 'ledger_offset'", "UPDATE edit_spans SET off = -5"]
)
def test_an_index_with_damaged_offsets_is_rebuilt_not_warned_about_on_every_run(added, home, caplog, damage):
    import sqlite3

    from bxmem.commands import index_fold

    db = sqlite3.connect(added / "index.sqlite3")
    db.execute(damage)
    db.commit()
    db.close()
    write_journal(home, [{"id": "u1", "ts": "t", "session": "owner", "op": "undo", "target": "a1"}])
    with open(home / "memory" / "honcho.jsonl", "ab") as f:
        f.write(b"\n")  # the ledger grew: the index catches up
    for _ in range(3):
        index_fold.refresh(load().paths)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and "moved aside" in said[0] and "rebuilt" in said[0], said
    assert (added / "index.sqlite3.corrupt").exists()
