"""Turn numbers that repeat or go backwards (docs/interfaces.md, "Turn numbers").

loopd numbers a session's turns from 1, one after another. A user, assistant
or turn_end line naming a turn that has already ended in the log is skipped:
the turn was decided from its first end and is never decided again (nothing
doubled, nothing moved towards trusted), and the lines are counted and said
once a run, naming the first. A tool result's label counts whatever its turn.
"""

from __future__ import annotations

import json
import logging

import pytest
from helpers import bxmem_inprocess, decisions, ledger_events, write_log

from bxmem.commands import decide, sync
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines


@pytest.fixture
def clean(home, brokerd, configure):
    configure("http://127.0.0.1:9")  # decide never calls Honcho
    return home


def run() -> decide.DecideReport:
    return decide.run(config_module.load())


def said(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "has already ended" in r.getMessage()
    ]


def decided_items(home) -> list[str]:
    return [e["item"] for e in ledger_events(home) if e["ev"] == "decided"]


def test_a_repeated_turn_is_skipped_counted_and_said_once(clean, caplog):
    path = write_log(clean, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "again", "yes"))
    write_log(clean, "s", turn_lines(2, "forged", "different") + turn_lines(3, "next", "ok"))
    report = run()
    assert decided_items(clean) == ["turn:s:1", "turn:s:2", "turn:s:3"]
    assert report.out_of_order_lines == 4 and report.skipped_lines == 0 and report.exit_code == 0
    assert said(caplog) == [
        f"{path}:9: turn 2 has already ended (a repeated or backwards turn number); line skipped, "
        "the turn is not decided again (4 such lines in this read)"
    ]
    turn_1 = sum(len(json.dumps(line)) + 1 for line in turn_lines(1, "hello", "hi"))
    assert decisions(clean)["turn:s:2"]["user"] == [
        [turn_1, len(json.dumps(turn_lines(2, "again", "yes")[0])) + 1]
    ]  # the first copy, newline and all


def test_backwards_to_a_turn_decided_in_an_earlier_run(clean, caplog):
    write_log(clean, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d"))
    run()
    write_log(clean, "s", turn_lines(1, "a", "b")[-1:])  # a turn_end of turn 1, again
    write_log(clean, "s", turn_lines(3, "e", "f"))
    report = run()
    assert report.out_of_order_lines == 1 and decided_items(clean) == ["turn:s:1", "turn:s:2", "turn:s:3"]
    assert len(said(caplog)) == 1
    status = sync.status(config_module.load(), check=False)
    assert status["log_lines_out_of_order"] == 1
    assert (
        "logs: 1 line(s) naming a turn that had already ended skipped (a repeated or backwards turn number)"
        in sync.lines(status)
    )


def test_a_turn_that_never_ended_is_decided_whatever_its_number(clean, caplog):
    """Out of numeric order but not a repeat: nothing decided it yet, so it is decided once."""
    write_log(clean, "s", turn_lines(1, "a", "b") + turn_lines(3, "c", "d") + turn_lines(2, "e", "f"))
    report = run()
    assert decided_items(clean) == ["turn:s:1", "turn:s:3", "turn:s:2"]
    assert report.out_of_order_lines == 0 and not said(caplog)


def test_a_tool_result_of_a_turn_that_has_ended_still_taints(clean):
    """Counted by its turn number (tests/test_log_order.py): turn 1, still to be decided, and turn 2."""
    lines = turn_lines(1, "a", "b")
    tainted = turn_lines(1, "a", "b", results=[{"untrusted": True, "class": "public"}])
    write_log(clean, "s", lines + [line for line in tainted if line["type"] == "tool_result"] + turn_lines(2, "c", "d"))
    run()
    got = decisions(clean)
    assert got["turn:s:1"]["role"] == "untrusted" and got["turn:s:2"]["role"] == "untrusted"


def test_reading_a_log_again_from_its_start_is_not_a_repeat(clean, caplog):
    """A lost decide.json, or a log replaced: its decided turns come round again, in order,
    and are known from the ledger; nothing is said about turn numbers."""
    path = write_log(clean, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d"))
    run()
    (clean / "memory" / "bxmem" / "decide.json").unlink()
    write_log(clean, "s", turn_lines(3, "e", "f"))
    assert run().out_of_order_lines == 0
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data + b"".join(json.dumps(line).encode() + b"\n" for line in turn_lines(4, "g", "h")))
    report = run()
    assert report.out_of_order_lines == 0 and not said(caplog)
    assert decided_items(clean) == ["turn:s:1", "turn:s:2", "turn:s:3", "turn:s:4"]


def test_the_count_is_in_decide_json_output(clean):
    write_log(clean, "s", turn_lines(1, "a", "b") + turn_lines(1, "a", "b"))
    result = bxmem_inprocess("decide", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["out_of_order_lines"] == 4
