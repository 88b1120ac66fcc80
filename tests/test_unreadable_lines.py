"""A line of a session log that bxmem cannot read or validate taints its session
from that line on: every turn that ends after it is decided nowhere, reason
`log-unreadable`, and the decision names the line (docs/interfaces.md, "Read").

Each case below is one way for a line to be unreadable, written between a
turn's user line and its end, with brokerd saying the session is clean.
"""

from __future__ import annotations

import json

import pytest
from helpers import bxmem_main, decisions, ledger_events, write_log

from bxmem.commands import decide, mirror
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.sources import jsonline

CLEAN = {"untrusted": False, "class": "public"}


def dumps(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def tool_result(**fields) -> bytes:
    return dumps(
        {
            "type": "tool_result",
            "turn": 2,
            "ts": "2026-09-27T10:02:00Z",
            "id": "c1",
            "label": CLEAN,
            "text": "<page>",
            **fields,
        }
    )


def without(line: bytes, key: str) -> bytes:
    record = json.loads(line)
    del record[key]
    return dumps(record)


USER = dumps({"type": "user", "turn": 2, "ts": "2026-09-27T10:02:00Z", "speaker": "kyle", "text": "hi"})
REPLY = dumps({"type": "assistant", "turn": 2, "ts": "2026-09-27T10:02:00Z", "final": True, "text": "ok"})
END = dumps({"type": "turn_end", "turn": 2, "ts": "2026-09-27T10:02:00Z", "status": "completed"})


def deep(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    args = open_ * depth + close * depth
    return b'{"type":"tool_call","turn":2,"ts":"t","id":"c1","tool":"fetch","args":' + args + b"}"


# (why bxmem gives, the line)
UNREADABLE = {
    "not-utf8": ("not valid UTF-8", tool_result(text="x").replace(b'"x"', b'"\xff\xfe"')),
    "raw-surrogate": ("not valid UTF-8", tool_result(text="x").replace(b'"x"', b'"\xed\xa0\x80"')),
    "overlong-utf8": ("not valid UTF-8", tool_result(text="x").replace(b'"x"', b'"\xc0\xaf"')),
    "nul-bytes": ("not valid JSON", b"\x00\x00\x00\x00"),
    "not-json": ("not valid JSON", b'{"type":"tool_result","turn":2,'),
    "trailing-garbage": ("not valid JSON", tool_result() + b" x"),
    "two-objects": ("not valid JSON", tool_result() + tool_result()),
    "torn": ("not valid JSON", tool_result()[:37] + REPLY),
    "array": ("not a JSON object", b'["tool_result",2]'),
    "string": ("not a JSON object", b'"tool_result"'),
    "number": ("not a JSON object", b"2"),
    "null": ("not a JSON object", b"null"),
    "deep-array-args": (f"nested deeper than {jsonline.MAX_DEPTH} levels", deep(1500)),
    "deep-object-args": (f"nested deeper than {jsonline.MAX_DEPTH} levels", deep(1200, b'{"a":', b"}")),
    "deep-just-over": (
        f"nested deeper than {jsonline.MAX_DEPTH} levels",
        deep(jsonline.MAX_DEPTH),
    ),  # the record is one more
    "duplicate-key": (
        "a key appears twice in one object",
        tool_result(label={"untrusted": True, "class": "public"})[:-1] + b',"label":' + dumps(CLEAN) + b"}",
    ),
    "duplicate-nested-key": (
        "a key appears twice in one object",
        tool_result(label=CLEAN).replace(b'"untrusted":false', b'"untrusted":true,"untrusted":false'),
    ),
    "no-type": ("field 'type' is missing or not a string", without(tool_result(), "type")),
    "type-number": ("field 'type' is missing or not a string", tool_result(type=5)),
    "type-null": ("field 'type' is missing or not a string", tool_result(type=None)),
    "type-list": ("field 'type' is missing or not a string", tool_result(type=["tool_result"])),
    "turn-string": ("field 'turn' is not a positive integer", tool_result(turn="2")),
    "turn-zero": ("field 'turn' is not a positive integer", tool_result(turn=0)),
    "turn-negative": ("field 'turn' is not a positive integer", tool_result(turn=-2)),
    "turn-float": ("field 'turn' is not a positive integer", tool_result(turn=2.0)),
    "turn-bool": ("field 'turn' is not a positive integer", tool_result(turn=True)),
    "turn-null": ("field 'turn' is not a positive integer", tool_result(turn=None)),
    "turn-huge": ("field 'turn' is not a positive integer", tool_result(turn=2**64)),
    "turn-missing": ("field 'turn' is not a positive integer", without(tool_result(), "turn")),
    "tool-call-turn-string": (
        "field 'turn' is not a positive integer",
        dumps({"type": "tool_call", "turn": "2", "id": "c1", "tool": "fetch", "args": {}}),
    ),
    "label-missing": ("field 'label' is not a readable label", without(tool_result(), "label")),
    "label-null": ("field 'label' is not a readable label", tool_result(label=None)),
    "label-string": ("field 'label' is not a readable label", tool_result(label="clean")),
    "label-list": ("field 'label' is not a readable label", tool_result(label=[False, "public"])),
    "label-untrusted-string": (
        "field 'label' is not a readable label",
        tool_result(label={"untrusted": "false", "class": "public"}),
    ),
    "label-untrusted-missing": ("field 'label' is not a readable label", tool_result(label={"class": "public"})),
    "label-class-missing": ("field 'label' is not a readable label", tool_result(label={"untrusted": False})),
    "label-class-unknown": (
        "field 'label' is not a readable label",
        tool_result(label={"untrusted": False, "class": "internal"}),
    ),
    "label-class-number": (
        "field 'label' is not a readable label",
        tool_result(label={"untrusted": False, "class": 1}),
    ),
    "user-text-number": ("field 'text' is not a string", USER.replace(b'"text":"hi"', b'"text":5')),
    "user-text-missing": ("field 'text' is not a string", without(USER, "text")),
    "user-speaker-number": (
        "field 'speaker' is not a string or null",
        USER.replace(b'"speaker":"kyle"', b'"speaker":7'),
    ),
    "user-ts-number": ("field 'ts' is not a string or null", USER.replace(b'"ts":"2026-09-27T10:02:00Z"', b'"ts":1')),
    "assistant-final-string": ("field 'final' is not true or false", REPLY.replace(b'"final":true', b'"final":"true"')),
    "assistant-final-missing": ("field 'final' is not true or false", without(REPLY, "final")),
    "assistant-text-list": ("field 'text' is not a string", REPLY.replace(b'"text":"ok"', b'"text":["ok"]')),
    "turn-end-status-number": ("field 'status' is not a string", END.replace(b'"status":"completed"', b'"status":1')),
    "turn-end-status-missing": ("field 'status' is not a string", without(END, "status")),
}


@pytest.fixture
def clean_session(home, brokerd, configure):
    configure("http://127.0.0.1:9")  # decide never calls Honcho
    return home


def write_raw(home, session: str, lines: list[bytes]):
    path = home / "logs" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(b"".join(line + b"\n" for line in lines))
    return path


def turn_bytes(n: int, text: str = "q", reply: str = "a") -> list[bytes]:
    return [dumps(line) for line in turn_lines(n, text, reply)]


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_unreadable_line_taints_its_turn_and_every_later_one(clean_session, case, caplog):
    why, bad = UNREADABLE[case]
    before = turn_bytes(1)
    path = write_raw(clean_session, "s", before + [USER, bad, REPLY, END] + turn_bytes(3))
    bad_line = len(before) + 2
    report = decide.run(config_module.load())
    got = decisions(clean_session)
    assert got["turn:s:1"]["role"] == "trusted"  # ended before the line: decided as it was
    for item in ("turn:s:2", "turn:s:3"):
        assert (got[item]["role"], got[item]["reason"]) == (None, "log-unreadable"), item
        assert got[item]["unreadable"] == {"line": bad_line, "why": why}
        assert got[item]["class"] == "secret" and "log" in got[item]["untrusted_by"]
    assert report.skipped_lines == 1
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith(f"{path}:{bad_line}: {why}; ") and "untrusted and secret" in m for m in warned), warned


def test_the_issue_s_case_a_label_line_whose_turn_is_a_string(clean_session):
    """The reproduction: a tool result labelled untrusted and secret, its turn a
    string, between the speaker's line and a reply holding a password."""
    lines = turn_lines(1, "what's the vault password?", "it is hunter2")
    bad = dumps({"type": "tool_result", "turn": "1", "label": {"untrusted": True, "class": "secret"}, "text": "..."})
    write_raw(clean_session, "s", [dumps(lines[0]), bad] + [dumps(line) for line in lines[1:]])
    decide.run(config_module.load())
    assert decisions(clean_session)["turn:s:1"]["reason"] == "log-unreadable"


def test_deep_nesting_does_not_stop_other_sessions(clean_session):
    """2 KB of brackets, 1,000+ levels: RecursionError used to stop every session."""
    write_raw(
        clean_session,
        "a",
        [USER.replace(b'"turn":2', b'"turn":1'), deep(1100).replace(b'"turn":2', b'"turn":1')] + turn_bytes(1)[1:],
    )
    write_log(clean_session, "b", turn_lines(1, "fine", "yes"))
    result = bxmem_main("decide", "--json")
    assert result.returncode == 0, result.stderr
    got = decisions(clean_session)
    assert got["turn:a:1"]["reason"] == "log-unreadable" and got["turn:b:1"]["role"] == "trusted"


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"mystery","turn":"x","label":5}',  # an unknown string type: ignored, whatever its fields
        b'{"type":"reasoning","text":["a"]}',
        b"   ",  # blank: nothing at all
        dumps({"type": "user", "turn": 2, "ts": None, "speaker": None, "text": "hi", "new_field": {"x": [1, 2]}}),
        dumps({"type": "tool_result", "turn": 2, "label": {"untrusted": False, "class": "private", "source": "local"}}),
        deep(jsonline.MAX_DEPTH - 1),  # deep, but at the bound (the record's own object is a level)
        dumps({"type": "user", "turn": 2, "speaker": "kyle", "text": "lone \ud800 surrogate, escaped"}),
    ],
)
def test_what_stays_readable(clean_session, line):
    """Unknown types and unknown fields are the contract's to ignore; JSON's own
    escapes (a lone surrogate among them) are readable text."""
    write_raw(clean_session, "s", [USER, line, REPLY, END])
    report = decide.run(config_module.load())
    got = decisions(clean_session)["turn:s:2"]
    assert got["reason"] != "log-unreadable" and "unreadable" not in got
    assert report.skipped_lines == 0


def test_a_line_after_the_turn_end_taints_only_later_turns(clean_session):
    write_raw(clean_session, "s", [USER, REPLY, END, tool_result(turn="2")] + turn_bytes(3))
    decide.run(config_module.load())
    got = decisions(clean_session)
    assert got["turn:s:2"]["role"] == "trusted"
    assert got["turn:s:3"]["reason"] == "log-unreadable"


def test_a_line_before_the_turn_s_first_line_taints_it(clean_session):
    write_raw(clean_session, "s", turn_bytes(1) + [b"{oops", USER, REPLY, END])
    decide.run(config_module.load())
    got = decisions(clean_session)
    assert (got["turn:s:1"]["role"], got["turn:s:2"]["reason"]) == ("trusted", "log-unreadable")


def test_a_turn_still_open_when_the_line_arrives_is_tainted(clean_session):
    write_raw(clean_session, "s", [USER])
    decide.run(config_module.load())
    write_raw(clean_session, "s", [b"\xff"])
    decide.run(config_module.load())
    assert not decisions(clean_session)
    write_raw(clean_session, "s", [REPLY, END])
    decide.run(config_module.load())
    assert decisions(clean_session)["turn:s:2"]["unreadable"] == {"line": 2, "why": "not valid UTF-8"}


def test_a_late_decision_takes_the_taint_of_a_line_read_since(clean_session, brokerd):
    """brokerd down: the finished turn waits; meanwhile an unreadable line is
    logged; the late decision takes the log's labels as of then (never towards trusted)."""
    brokerd.stop()
    write_raw(clean_session, "s", [USER, REPLY, END])
    assert decide.run(config_module.load()).undecided == 1
    write_raw(clean_session, "s", [b"[1,"])
    brokerd.start()
    decide.run(config_module.load())
    got = decisions(clean_session)["turn:s:2"]
    assert (got["reason"], got["unreadable"]) == ("log-unreadable", {"line": 4, "why": "not valid JSON"})


def test_the_taint_survives_a_lost_state_file(clean_session):
    write_raw(clean_session, "s", turn_bytes(1) + [b"not json"])
    decide.run(config_module.load())
    (clean_session / "memory" / "bxmem" / "decide.json").unlink()
    write_raw(clean_session, "s", turn_bytes(2))
    decide.run(config_module.load())
    got = decisions(clean_session)
    assert got["turn:s:1"]["role"] == "trusted" and got["turn:s:2"]["reason"] == "log-unreadable"
    assert got["turn:s:2"]["unreadable"]["line"] == 5


def test_the_taint_survives_a_replaced_log(clean_session):
    path = write_raw(clean_session, "s", turn_bytes(1) + [b"not json"])
    decide.run(config_module.load())
    path.unlink()
    write_raw(clean_session, "s", turn_bytes(2))  # a new file, read from its start
    decide.run(config_module.load())
    assert decisions(clean_session)["turn:s:2"]["reason"] == "log-unreadable"


def test_a_huge_line_is_unreadable_and_read_in_bounded_pieces(clean_session, monkeypatch):
    monkeypatch.setattr(jsonline, "MAX_LINE_BYTES", 4096)
    huge = tool_result(text="x" * 10_000)
    write_raw(clean_session, "s", [USER, huge, REPLY, END])
    report = decide.run(config_module.load())
    got = decisions(clean_session)["turn:s:2"]
    assert got["unreadable"] == {"line": 2, "why": "longer than 4,096 bytes"}
    assert report.skipped_lines == 1


def test_a_huge_line_still_being_written_is_skipped_across_runs(clean_session, monkeypatch):
    monkeypatch.setattr(jsonline, "MAX_LINE_BYTES", 4096)
    path = write_raw(clean_session, "s", [USER])
    with open(path, "ab") as f:
        f.write(tool_result(text="x" * 6000)[:5000])  # past the bound, no newline yet
    assert decide.run(config_module.load()).skipped_lines == 1
    with open(path, "ab") as f:
        f.write(b"y" * 9000)
    assert decide.run(config_module.load()).skipped_lines == 0  # the same line: counted once
    with open(path, "ab") as f:
        f.write(b'"}\n' + REPLY + b"\n" + END + b"\n")
    decide.run(config_module.load())
    got = decisions(clean_session)["turn:s:2"]
    assert got["unreadable"] == {"line": 2, "why": "longer than 4,096 bytes"}


def test_the_default_line_bound_reads_a_megabyte_turn():
    assert jsonline.MAX_LINE_BYTES == 8 << 20  # 8 MiB: a 1,000,000-character message is read (test_bad_inputs)


# --- the journal: an unreadable edit line is not mirrored, counted, reported, never fatal ---


def test_an_unreadable_journal_line_stops_nothing(home, caplog):
    path = write_journal(
        home, [{"id": "e1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "one"}]
    )
    with open(path, "ab") as f:
        f.write(b'{"id":"e2","op":"note","x":' + b"[" * 3000 + b"]" * 3000 + b"}\n")
        f.write(b'{"id":"e3","op":"note","op":"identity_add"}\n')
        f.write(b"\xff\n")
    write_journal(home, [{"id": "e4", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "four"}])
    report = mirror.run(config_module.load())
    got = decisions(home)
    assert set(got) == {"edit:e1", "edit:e4"}
    assert report.skipped_lines == 3
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [m.split(": ", 2)[1].split(";")[0] for m in warned] == [
        f"nested deeper than {jsonline.MAX_DEPTH} levels",
        "a key appears twice in one object",
        "not valid UTF-8",
    ]
    assert all(m.startswith(f"{path}:") and "not mirrored" in m for m in warned)


def test_brokerd_nested_too_deep_did_not_parse(clean_session, brokerd):
    write_raw(clean_session, "s", [USER, REPLY, END])
    brokerd.raw_reply = b"[" * 4000 + b"\n"
    report = decide.run(config_module.load())
    assert report.undecided == 1 and report.broker_problem == "the reply did not parse"


def test_a_read_error_part_way_keeps_the_turns_that_ended_before_it(clean_session, monkeypatch):
    """The cursor moves line by line: an I/O error on line 6 keeps turn 1, read
    before it, and the next run reads on from there, deciding nothing twice."""
    import errno

    from bxmem.sources import loopd

    write_raw(clean_session, "s", turn_bytes(1) + turn_bytes(2))
    real = loopd.complete_lines

    def fails_on_the_sixth(*args, **kwargs):
        for n, line in enumerate(real(*args, **kwargs), 1):
            if n == 6:
                raise OSError(errno.EIO, "Input/output error")
            yield line

    monkeypatch.setattr(loopd, "complete_lines", fails_on_the_sixth)
    monkeypatch.setattr(decide, "RETRY_UNREADABLE_S", 0.0)  # tried again on the next run
    report = decide.run(config_module.load())
    assert set(decisions(clean_session)) == {"turn:s:1"} and report.logs_unreadable == 1
    monkeypatch.setattr(loopd, "complete_lines", real)
    decide.run(config_module.load())
    assert [e["item"] for e in ledger_events(clean_session) if e["ev"] == "decided"] == ["turn:s:1", "turn:s:2"]
