"""Bad inputs: each gets a clear line and a defined outcome, and nothing is lost."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import pytest
from helpers import bxmem_main, decisions, examples, ledger_events, write_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.errors import StorageError
from bxmem.sources.loopd import session_id_problem


def load():
    return config_module.load()


@pytest.fixture
def live(home, brokerd, honcho, configure):
    configure(honcho.url)
    return home


@pytest.mark.parametrize("length, parts", [(25_000, 1), (25_001, 2), (1_000_000, 40)])
def test_long_texts_are_split_exactly(live, honcho, length, parts):
    write_log(live, "s", turn_lines(1, "y" * length, "ok"))
    decide.run(load())
    send.run(load())
    speaker = [m for m in honcho.messages if m["peer_id"] == "kyle"]
    assert len(speaker) == parts and sum(len(m["content"]) for m in speaker) == length


def test_nul_lone_surrogates_bidi_and_zero_width_survive_the_whole_path(live, honcho):
    nasty = "a\u0000b \ud800 c\u202e d\u200b e"
    write_log(live, "s", turn_lines(1, nasty, "reply \udfff"))
    write_journal(
        live, [{"id": "n1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "note \ud83d"}]
    )
    result = bxmem_main("decide")
    assert result.returncode == 0, result.stderr
    assert bxmem_main("mirror").returncode == 0
    assert bxmem_main("send").returncode == 0
    assert [m["content"] for m in honcho.messages] == ["ab \ufffd c d e", "reply \ufffd"]
    assert [c["content"] for c in honcho.conclusions.values()] == ["note \ufffd"]
    found = bxmem_main("recall", "reply", "--json")
    assert found.returncode == 0 and "\ufffd" in json.loads(found.stdout)["hits"][0]["text"]


def test_raw_nul_and_control_bytes_in_a_line_are_one_skipped_line(live):
    path = live / "logs" / "s.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    good = turn_lines(1, "a", "b")
    with open(path, "wb") as f:
        f.write(b'{"type":"user","turn":1,"text":"x\x00y"}\n')
        for line in good:
            f.write(json.dumps(line).encode() + b"\n")
    result = bxmem_main("decide", "--json")
    assert json.loads(result.stdout)["skipped_lines"] == 1 and f"{path}:1: not valid JSON" in result.stderr
    # An unreadable line taints its session from there on: the turn it falls in goes nowhere.
    assert (decisions(live)["turn:s:1"]["role"], decisions(live)["turn:s:1"]["reason"]) == (None, "log-unreadable")


@pytest.mark.parametrize("name", ["a.b", "a b", "x" * 501, "", "über", "a/b"])
def test_session_ids_that_cannot_be_honcho_ids(name):
    assert session_id_problem(name)


def test_corrupt_ledger_lines_in_the_middle_are_skipped_and_counted(live, honcho):
    write_log(live, "s", turn_lines(1, "a", "b"))
    decide.run(load())
    with open(live / "memory" / "honcho.jsonl", "ab") as f:
        f.write(b"{broken\n\xff\xfe\n")
    write_log(live, "s", turn_lines(2, "c", "d"))
    decide.run(load())
    report = send.run(load())
    assert report.sent == 2
    status = json.loads(bxmem_main("sync", "--json").stdout)
    assert status["ledger_malformed_lines"] == 2


def test_a_full_disk_loses_nothing(live, honcho, monkeypatch):
    write_log(live, "s", turn_lines(1, "a", "b"))
    real_write = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StorageError, match="No space left on device"):
        decide.run(load())
    monkeypatch.setattr(os, "write", real_write)
    decide.run(load())
    assert [e["item"] for e in ledger_events(live) if e["ev"] == "decided"] == ["turn:s:1"]


def test_a_read_only_home_is_one_clear_line(live, monkeypatch):
    write_log(live, "s", turn_lines(1, "a", "b"))
    (live / "memory").mkdir()
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(StorageError, match="Read-only file system"):
        decide.run(load())


lines = st.binary(max_size=300).filter(lambda b: b"\n" not in b)


@pytest.mark.slow  # 150 examples, each a run of every job
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log_lines=st.lists(lines, max_size=6), journal_lines=st.lists(lines, max_size=6))
def test_any_bytes_in_a_log_or_journal_never_crash_a_job(configure, log_lines, journal_lines):
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "logs").mkdir()
        (home / "memory").mkdir()
        valid = b"".join(json.dumps(line).encode() + b"\n" for line in turn_lines(1, "a", "b"))
        (home / "logs" / "s.jsonl").write_bytes(b"\n".join(log_lines) + b"\n" + valid)
        (home / "memory" / "journal.jsonl").write_bytes(b"\n".join(journal_lines) + b"\n")
        config = config_module.load(home=home)
        with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
            decide.run(config)
        mirror.run(config)
        assert any(e.get("item") == "turn:s:1" for e in ledger_events(home))


def test_every_file_bxmem_makes_is_private(live, honcho):
    write_log(live, "s", turn_lines(1, "a", "b"))
    write_journal(live, [{"id": "p1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "x"}])
    for job in ("decide", "mirror", "send", "sync"):
        bxmem_main(job)
    state = live / "memory" / "bxmem"
    assert state.stat().st_mode & 0o777 == 0o700
    made = [state / name for name in os.listdir(state)] + [live / "memory" / "honcho.jsonl"]
    assert len(made) > 8
    for path in made:
        assert path.stat().st_mode & 0o777 == 0o600, path
