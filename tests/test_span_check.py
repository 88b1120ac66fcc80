"""Send (and the index) read a decided text back by byte span only once the span
is checked to hold the line decided: a keyed hash of its bytes recorded at
decide time (mirror time for the journal), and the record's type, turn and
speaker. A replaced line fails the item visibly and is never posted."""

from __future__ import annotations

import json
import logging

import pytest
from helpers import bxmem_main, decisions, ledger_events, write_log

from bxmem.commands import decide, index_fold, mirror, sync
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.log import log


def load():
    return config_module.load()


def dumps(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"  # as write_log writes


def same_length(line: bytes, record: dict, field: str = "text") -> bytes:
    """`record` as a line of exactly `line`'s length, by padding `field`."""
    record = dict(record)
    record[field] = record.get(field, "")
    shortfall = len(line) - len(dumps(record))
    assert shortfall >= 0, (line, record)
    record[field] += "x" * shortfall
    new = dumps(record)
    assert len(new) == len(line)
    return new


@pytest.fixture
def decided(home, brokerd, honcho, configure):
    """One clean turn decided (and not sent); returns its log's lines as bytes."""
    configure(honcho.url)
    path = write_log(home, "s", turn_lines(1, "what is the plan for the backups?", "nightly restic snapshots"))
    decide.run(load())
    assert decisions(home)["turn:s:1"]["role"] == "trusted"
    return path, path.read_bytes().splitlines(keepends=True)


def replace_log(path, lines: list[bytes]) -> None:
    """As loopd rewriting a log: a new file (a new inode) in its place."""
    tmp = path.with_suffix(".new")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(path)


def failed_lines(home) -> list[dict]:
    return [e for e in ledger_events(home) if e["ev"] == "failed"]


def test_a_tool_result_put_at_the_user_line_s_span_is_never_posted(decided, home, honcho, caplog):
    """The issue's case: the page text would have been posted as the owner's message."""
    path, lines = decided
    page = {"type": "tool_result", "turn": 1, "label": {"untrusted": True, "class": "public"}, "text": "PAGE"}
    replace_log(path, [same_length(lines[0], page)] + lines[1:])
    log.propagate = True
    caplog.set_level(logging.WARNING, logger="bxmem")
    report = send.run(load())
    assert report.sent == 0 and report.failed == 1
    assert not [m for m in honcho.messages if "PAGE" in m["content"]] and not honcho.messages
    [failed] = failed_lines(home)
    assert failed["item"] == "turn:s:1" and failed["status"] is None
    assert (
        "is not the one decided" in failed["reason"]
        and "the log changed since the turn was decided" in failed["reason"]
    )
    warned = [r.getMessage() for r in caplog.records if "turn:s:1" in r.getMessage()]
    assert len(warned) == 1 and "runbook honcho-send-refused" in warned[0]
    status = sync.status(load(), check=False)
    assert [f["item"] for f in status["failed"]] == ["turn:s:1"]
    assert any(
        line.startswith("failed: turn:s:1 in bm0-trusted: refused by bxmem: not sent: the line at byte 0")
        for line in sync.lines(status)
    )


@pytest.mark.parametrize("which", [0, 2])  # the user line, the final reply
def test_a_line_of_the_same_type_turn_and_length_with_another_text_is_caught(decided, home, honcho, which):
    path, lines = decided
    record = json.loads(lines[which])
    record["text"] = record["text"].replace("s", "5")
    new = dumps(record)
    assert len(new) == len(lines[which]) and new != lines[which]
    replace_log(path, lines[:which] + [new] + lines[which + 1 :])
    assert send.run(load()).failed == 1
    assert not honcho.messages


def test_an_unchanged_log_rewritten_in_place_still_sends(decided, honcho):
    path, lines = decided
    replace_log(path, lines)  # same bytes, new inode
    assert send.run(load()).sent == 1 and len(honcho.messages) == 2


def without_macs(home) -> None:
    """The ledger as the version before line hashes wrote it."""
    ledger = home / "memory" / "honcho.jsonl"
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    for ev in events:
        ev.pop("macs", None)
    ledger.write_text("".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in events))
    (home / "memory" / "bxmem" / "outbox.marshal").unlink(missing_ok=True)


@pytest.mark.parametrize(
    "change, sent",
    [
        ("none", 1),
        ("tool_result", 0),
        ("another turn", 0),
        ("another speaker", 0),
        ("not final", 0),
    ],
)
def test_a_decision_without_hmacs_has_its_type_turn_and_speaker_checked(decided, home, honcho, change, sent, caplog):
    """Old ledger lines, or a key deleted since: what needs no key is still checked."""
    path, lines = decided
    user, reply = json.loads(lines[0]), json.loads(lines[2])
    if change == "tool_result":
        lines[0] = same_length(
            lines[0], {"type": "tool_result", "turn": 1, "label": {"untrusted": True, "class": "public"}}
        )
    elif change == "another turn":
        lines[0] = same_length(lines[0], {**user, "turn": 2, "text": ""})
    elif change == "another speaker":
        lines[0] = same_length(lines[0], {**user, "speaker": "mallory", "text": ""})
    elif change == "not final":
        lines[2] = same_length(lines[2], {**reply, "final": False, "text": ""})
    replace_log(path, lines)
    without_macs(home)
    log.propagate = True
    caplog.set_level(logging.INFO, logger="bxmem")
    report = send.run(load())
    assert (report.sent, report.failed) == (sent, 1 - sent)
    assert len(honcho.messages) == 2 * sent
    assert any(r.getMessage().startswith("1 turn(s) read back without their line hashes") for r in caplog.records)


def test_a_deleted_entry_key_falls_back_to_the_checks_that_need_none(decided, home, honcho):
    path, lines = decided
    (home / "memory" / "bxmem" / "entry.key").unlink()
    write_journal(home, [{"id": "e1", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "x"}])
    mirror.run(load())  # makes a new key
    lines[0] = same_length(
        lines[0], {"type": "tool_result", "turn": 1, "label": {"untrusted": True, "class": "public"}}
    )
    replace_log(path, lines)
    report = send.run(load())
    assert report.failed == 1 and not [m for m in honcho.messages if m["metadata"].get("bxmem_item") == "turn:s:1"]


def test_the_journal_read_back_is_checked_too(home, honcho, configure):
    configure(honcho.url)
    path = write_journal(
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
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"metric units", b"imperial!!!!"))  # same length, another entry
    assert len(path.read_bytes()) == len(raw)
    report = send.run(load())
    assert report.failed == 1 and not honcho.conclusions
    [failed] = failed_lines(home)
    assert failed["item"] == "edit:e1" and "is not the one decided" in failed["reason"]


def test_the_index_does_not_take_a_replaced_line_under_the_old_labels(decided, home, caplog):
    path, lines = decided
    record = json.loads(lines[0])
    record["text"] = record["text"].replace("backups", "zebrafish")
    replace_log(path, [dumps(record)] + lines[1:])
    log.propagate = True
    caplog.set_level(logging.WARNING, logger="bxmem")
    applied, warning = index_fold.update(load().paths, rebuild=True)
    assert (applied, warning) == (0, None)  # the one turn, not taken
    hits = bxmem_main("recall", "zebrafish", "--json")
    assert json.loads(hits.stdout)["hits"] == []
    assert any("1 decided turn(s) not indexed: their log changed" in r.getMessage() for r in caplog.records)


def test_a_decision_from_before_peer_ids_kept_dots_still_matches_its_speaker(home, brokerd, honcho, configure):
    """Old decisions named `ana.lima` `ana_lima`: the same speaker, not a changed line."""
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi", speaker="ana.lima"))
    decide.run(load())
    without_macs(home)
    ledger = home / "memory" / "honcho.jsonl"
    ledger.write_text(ledger.read_text().replace('"peer":"ana_Dot_lima"', '"peer":"ana_lima"'))
    assert '"peer":"ana_lima"' in ledger.read_text()
    report = send.run(load())
    assert (report.sent, report.failed) == (1, 0)
    assert [m["peer_id"] for m in honcho.messages] == ["ana_lima", "boxmaker0"]
