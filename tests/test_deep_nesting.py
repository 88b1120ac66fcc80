"""Deeply nested input, at every reader bxmem has: about 2 KB of brackets
1,100 levels deep (what a tool call's arguments can hold, and past Python's
recursion limit), and 100,000 levels. Each is one line or one file bxmem cannot
read: skipped, counted and reported, or rebuilt, never a traceback, and never
the end of anything else (docs/interfaces.md, "Bad local input").
"""

from __future__ import annotations

import json
import logging

import pytest
from helpers import bxmem_inprocess, decisions, write_log
from runbook_lines import cites

from bxmem.commands import decide, index_fold, mirror, sync
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.start.idle import is_idle
from bxmem.start.lean_argv import parse
from bxmem.store.ledger import Ledger

DEPTHS = {"2KB": 1_100, "100k": 100_000}


def brackets(depth: int) -> str:
    return "[" * depth + "]" * depth


def marshalled_lists(depth: int) -> bytes:
    """marshal's bytes for a list holding a list ... `depth` deep: marshal.dumps
    itself refuses past 2,000 levels, a file on disk need not. Sealed, as bxmem seals what it
    writes, so it is marshal's own depth limit that is met, not the seal."""
    from bxmem.start.marshal_seal import seal

    return seal(b"[\x01\x00\x00\x00" * depth + b"N")


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture
def decided_home(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    write_journal(home, [{"id": "e1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "one"}])
    decide.run(config_module.load())
    mirror.run(config_module.load())
    send.run(config_module.load())
    return home


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_a_log_line(home, brokerd, configure, depth, caplog):
    configure("http://127.0.0.1:9")
    bad = write_log(home, "bad", turn_lines(1, "q", "a")[:1])
    with open(bad, "a") as f:
        f.write('{"type":"tool_call","turn":1,"ts":"t","id":"c1","tool":"fetch","args":' + brackets(depth) + "}\n")
    write_log(home, "bad", turn_lines(1, "q", "a")[1:])
    write_log(home, "clean", turn_lines(1, "fine", "yes"))
    report = decide.run(config_module.load())
    got = decisions(home)
    assert got["turn:bad:1"]["reason"] == "log-unreadable" and got["turn:clean:1"]["role"] == "trusted"
    assert report.skipped_lines == 1 and report.exit_code == 0
    assert [m for m in warnings(caplog) if "bad.jsonl:2: nested deeper than 256 levels" in m]


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_a_journal_line_loses_neither_the_edits_before_it_nor_after(home, depth, caplog):
    path = write_journal(
        home, [{"id": "e1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "one"}]
    )
    with open(path, "a") as f:
        f.write('{"id":"e2","op":"note","x":' + brackets(depth) + "}\n")
    write_journal(home, [{"id": "e3", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "three"}])
    report = mirror.run(config_module.load())
    assert set(decisions(home)) == {"edit:e1", "edit:e3"} and report.skipped_lines == 1
    assert [m for m in warnings(caplog) if m.startswith(f"{path}:2: nested deeper than 256 levels")]
    caplog.clear()
    assert mirror.run(config_module.load()).skipped_lines == 0  # said once
    index_fold.refresh(config_module.load().paths)
    assert not warnings(caplog)  # the index skips it too, without a word on every run
    assert bxmem_inprocess("undo", "e2").returncode == 5  # no such edit: the line is none


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_a_brokerd_reply(home, brokerd, configure, depth):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "q", "a"))
    brokerd.raw_reply = brackets(depth).encode() + b"\n"
    report = decide.run(config_module.load())
    # Within brokerd's 4 KiB reply bound the depth is what refuses it; past it, the length.
    assert report.broker_problem == (
        "the reply did not parse" if len(brokerd.raw_reply) <= 4096 else "the reply is too long"
    )
    assert report.undecided == 1 and report.exit_code == 3 and not decisions(home)


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_a_ledger_line(decided_home, brokerd, depth, caplog):
    ledger = decided_home / "memory" / "honcho.jsonl"
    at = ledger.stat().st_size
    with open(ledger, "a") as f:
        f.write('{"v":1,"ev":"decided","x":' + brackets(depth) + "}\n")
    write_log(decided_home, "s", turn_lines(2, "again", "yes"))
    decide.run(config_module.load())
    report = send.run(config_module.load())
    assert report.sent == 1 and report.exit_code == 0
    assert [m for m in warnings(caplog) if f"malformed line at byte {at} skipped (nested too deep; not folded)" in m]
    caplog.clear()
    assert send.run(config_module.load()).exit_code == 0
    index_fold.refresh(config_module.load().paths)
    assert not warnings(caplog)  # counted once, never again
    status = sync.status(config_module.load(), check=False)
    assert status["ledger_malformed_lines"] == 1
    events = Ledger(ledger).read_from(0).events
    assert sorted(e["item"] for e in events if e["ev"] == "decided") == ["edit:e1", "turn:s:1", "turn:s:2"]


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_decide_json(decided_home, depth, caplog):
    state = decided_home / "memory" / "bxmem" / "decide.json"
    state.write_text('{"v":2,"logs":' + brackets(depth) + "}")
    status = sync.status(config_module.load(), check=False)
    assert [w for w in status["warnings"] if w.startswith(f"{state}: ")]
    write_log(decided_home, "s", turn_lines(2, "again", "yes"))
    report = decide.run(config_module.load())
    assert dict(report.decided) == {"trusted/clean": 1}  # turn 2 only: turn 1 is known from the ledger
    assert [m for m in warnings(caplog) if m.startswith(f"{state}: ") and "rebuilt" in m]
    assert json.loads(state.read_text())["logs"]["s"]["decided"] == [[1, 2]]


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_mirror_json(decided_home, depth, caplog):
    state = decided_home / "memory" / "bxmem" / "mirror.json"
    state.write_text('{"cursor":' + brackets(depth) + "}")
    write_journal(
        decided_home, [{"id": "e2", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "two"}]
    )
    report = mirror.run(config_module.load())
    assert dict(report.decided) == {"trusted/trusted-note": 1}
    assert [m for m in warnings(caplog) if m.startswith(f"{state}: ") and "rebuilt" in m]
    state.write_text('{"edits":' + brackets(depth) + "}")
    assert bxmem_inprocess("undo", "e1").returncode == 0


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_the_outbox_checkpoint(decided_home, brokerd, depth, caplog):
    checkpoint = decided_home / "memory" / "bxmem" / "outbox.marshal"
    checkpoint.write_bytes(marshalled_lists(depth))
    assert sync.status(config_module.load(), check=False)["sent_items"] == 2  # rebuilt from the ledger
    checkpoint.write_bytes(marshalled_lists(depth))
    write_log(decided_home, "s", turn_lines(2, "again", "yes"))
    decide.run(config_module.load())
    assert send.run(config_module.load()).sent == 1  # turn 2; nothing sent twice
    assert [m for m in warnings(caplog) if m.startswith(f"{checkpoint}: ") and "rebuilt from the ledger" in m]


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_the_config_cache_is_a_miss(decided_home, depth):
    cache = decided_home / "memory" / "bxmem" / "config.marshal"
    cache.write_bytes(marshalled_lists(depth))
    honcho = config_module.load().honcho
    assert honcho is not None and honcho.trusted == "bm0-trusted"
    assert cache.read_bytes() != marshalled_lists(depth)  # validated again and cached again


@pytest.mark.parametrize("job", ["decide", "mirror", "send"])
@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_an_idle_summary_makes_the_job_run(decided_home, job, depth):
    summary = decided_home / "memory" / "bxmem" / f"idle-{job}.marshal"
    assert is_idle(parse(["bxmem", job]))
    summary.write_bytes(marshalled_lists(depth))
    assert not is_idle(parse(["bxmem", job]))  # any doubt: the job runs, and writes it again
    assert bxmem_inprocess(job).returncode == 0
    assert is_idle(parse(["bxmem", job]))


@pytest.mark.parametrize("depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_the_config_file(config_file, depth):
    config_file.write_text("[paths]\nx = " + brackets(depth) + "\n")
    result = bxmem_inprocess("config", "check")
    assert result.returncode == 78
    assert result.stderr == (
        f"bxmem: error: {config_file}: not valid TOML: arrays or tables nested too deep to read"
        f"{cites('honcho-config-invalid')}\n"
    )
    config_file.write_text("[paths]\nx = " + "{a = " * depth + "1" + "}" * depth + "\n")
    assert bxmem_inprocess("decide").returncode == 78
