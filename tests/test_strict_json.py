"""Every reader of outside input reads JSON as RFC 8259 has it, no more.

Python's json module reads `NaN`, `Infinity` and `-Infinity`; serde_json, which
writes loopd's logs and brokerd's replies, never writes them, and neither does
a JSON server. A line holding one is a line bxmem cannot read: in a log it
taints the session from there (docs/interfaces.md, "A log line bxmem cannot
read"), in the journal it is not mirrored, from brokerd it did not parse, from
Honcho it is not JSON. And only JSON's whitespace (space, tab, CR) makes a line
blank: a line of vertical tabs or form feeds, which bytes.strip() would take for
blank, is unreadable.
"""

from __future__ import annotations

import json
import logging

import pytest
from helpers import decisions
from hostile_honcho import Attack, arm

from bxmem.commands import decide, mirror
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.honcho.client import Unavailable, WorkspaceClient
from bxmem.sources import brokerd as brokerd_module
from bxmem.sources import jsonline

CONSTANTS = [b"NaN", b"Infinity", b"-Infinity"]


def dumps(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


@pytest.mark.parametrize("token", CONSTANTS)
@pytest.mark.parametrize("where", ['{{"score":{}}}', '{{"a":[1,{{"b":[{}]}}]}}', '{{"x":{}, "type":"user"}}'])
def test_json_constants_that_are_not_json_are_unreadable_at_any_depth(token, where):
    line = where.format(token.decode()).encode()
    assert jsonline.parse_object(line) == "not valid JSON (NaN or Infinity)"


@pytest.mark.parametrize("text", [b'{"n":1e400}', b'{"n":-0.0}', b'{"s":"NaN"}', b'{"s":"Infinity"}'])
def test_numbers_and_strings_that_only_look_like_the_constants_still_read(text):
    assert isinstance(jsonline.parse_object(text), dict)


@pytest.mark.parametrize(
    "raw, blank",
    [
        (b"\n", True),
        (b"   \n", True),
        (b"\t\r\n", True),
        (b" \t \r\n", True),
        (b"\x0b\n", False),
        (b"\x0c\n", False),
        (b" \x0c \n", False),
        (b"\x1c\n", False),
        (b"\xc2\xa0\n", False),
    ],
)
def test_only_jsons_whitespace_makes_a_line_blank(raw, blank):
    assert jsonline.is_blank(raw) is blank


@pytest.fixture
def clean(home, brokerd, configure):
    configure("http://127.0.0.1:9")  # decide never calls Honcho
    return home


def write_log(home, lines: list[bytes]) -> None:
    path = home / "logs" / "s.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(x + b"\n" for x in lines))


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"tool_call","turn":1,"id":"c1","tool":"fetch","args":{"x":NaN}}',
        b'{"type":"tool_result","turn":1,"id":"c1","label":{"untrusted":false,"class":"public"},"score":Infinity,"text":"t"}',
        b'{"type":"reasoning","turn":1,"cost":-Infinity}',  # an unknown type, whatever its fields, must still be JSON
        b"\x0c",
        b"\x0b\x0b",
        b" \x0b ",
    ],
)
def test_a_log_line_that_is_not_json_taints_its_turn(clean, line, caplog):
    lines = [dumps(record) for record in turn_lines(1, "q", "a")]
    write_log(clean, [lines[0], line, *lines[1:]])
    report = decide.run(config_module.load())
    got = decisions(clean)["turn:s:1"]
    assert got["reason"] == "log-unreadable" and got["role"] is None and got["unreadable"]["line"] == 2
    assert report.skipped_lines == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith(f"{clean / 'logs' / 's.jsonl'}:2: not valid JSON"), warned


@pytest.mark.parametrize("line", [b"", b"   ", b"\t", b"\r", b" \t\r "])
def test_a_line_of_jsons_whitespace_is_blank_and_taints_nothing(clean, line):
    lines = [dumps(record) for record in turn_lines(1, "q", "a")]
    write_log(clean, [lines[0], line, *lines[1:]])
    report = decide.run(config_module.load())
    assert decisions(clean)["turn:s:1"]["reason"] == "clean" and report.skipped_lines == 0


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":"j-2","ts":"t","session":"s","op":"note","trust":"trusted","entry":"two","w":NaN}',
        b"\x0c",
        b"\x0b",
    ],
)
def test_a_journal_line_that_is_not_json_is_not_mirrored(home, configure, line, caplog):
    configure(None)
    journal = write_journal(
        home, [{"id": "j-1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "one"}]
    )
    with open(journal, "ab") as f:
        f.write(line + b"\n")
        f.write(
            dumps({"id": "j-3", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "three"}) + b"\n"
        )
    report = mirror.run(config_module.load())
    assert set(decisions(home)) == {"edit:j-1", "edit:j-3"} and report.skipped_lines == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith(f"{journal}:2: not valid JSON"), warned


@pytest.mark.parametrize("token", CONSTANTS)
def test_a_brokerd_reply_with_a_constant_did_not_parse(token):
    reply = b'{"SessionStateReply":{"class":"private","untrusted":false,"score":' + token + b"}}\n"
    with pytest.raises(brokerd_module.BrokerUnavailable, match="did not parse"):
        brokerd_module._parse(reply)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_honcho_answer_with_a_constant_is_not_json(honcho, value):
    # json.dumps writes NaN and Infinity as Python reads them: what a careless server would send.
    arm(
        honcho,
        Attack("typed", r"/messages/list$", body={"items": [], "total": value, "page": 1, "size": 50, "pages": 1}),
    )
    with WorkspaceClient(honcho.url, "bm0-trusted", None) as client, pytest.raises(Unavailable) as caught:
        list(client.list_messages("s"))
    assert caught.value.kind == "the answer was not JSON"
