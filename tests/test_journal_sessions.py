"""Journal edits whose session is not a valid Honcho session id (a space, non-ASCII,
600 characters, empty, absent): decided at mirror time to a session bxmem derives,
and sent; never failing at send, where `outbox resend` could not help (issue 28, item 6)."""

from __future__ import annotations

import json

import pytest
from helpers import decisions, ledger_events

from bxmem.commands import mirror
from bxmem.commands.mirror import SESSIONLESS
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import write_journal
from bxmem.sources.loopd import session_id_problem

BAD = {"space": "my session", "non-ascii": "sessão", "long": "s" * 600, "empty": "", "none": None, "number": 7}


def load():
    return config_module.load()


@pytest.mark.parametrize("case", list(BAD))
def test_an_edit_with_a_session_honcho_refuses_still_reaches_where_it_was_decided(home, honcho, configure, case):
    configure(honcho.url)
    record: dict[str, object] = {
        "id": "j-1",
        "ts": "2026-09-27T10:00:00Z",
        "op": "identity_add",
        "file": "user.md",
        "entry": "Kyle prefers tea",
    }
    note: dict[str, object] = {
        "id": "j-2",
        "ts": "2026-09-27T10:01:00Z",
        "op": "note",
        "trust": "untrusted",
        "entry": "a page said so",
    }
    if case != "none":
        record["session"] = note["session"] = BAD[case]
    write_journal(home, [record, note])
    mirror.run(load())
    decided = decisions(home)
    for item in ("edit:j-1", "edit:j-2"):
        session = decided[item]["session"]
        assert isinstance(session, str) and session_id_problem(session) is None and session.startswith(SESSIONLESS)
        bad = BAD[case]
        if isinstance(bad, str) and bad:
            assert bad not in json.dumps(decided[item])  # the name itself is kept out of the ledger
    for _ in range(3):
        send.run(load())
    assert not [e for e in ledger_events(home) if e["ev"] == "failed"]
    [conclusion] = honcho.conclusions.values()
    assert conclusion["content"] == "Kyle prefers tea" and conclusion["workspace_id"] == "bm0-trusted"
    assert conclusion["session_id"].startswith(SESSIONLESS)
    assert [m["content"] for m in honcho.messages_in("fleet")] == ["a page said so"]


def test_two_invalid_sessions_stay_apart_and_a_valid_one_is_kept(home, honcho, configure):
    configure(honcho.url)
    write_journal(
        home,
        [
            {"id": "j-1", "ts": "t", "session": "one session", "op": "identity_add", "file": "user.md", "entry": "a"},
            {
                "id": "j-2",
                "ts": "t",
                "session": "another session",
                "op": "identity_add",
                "file": "user.md",
                "entry": "b",
            },
            {"id": "j-3", "ts": "t", "session": "s-ok", "op": "identity_add", "file": "user.md", "entry": "c"},
        ],
    )
    mirror.run(load())
    sessions = {item: ev["session"] for item, ev in decisions(home).items()}
    assert sessions["edit:j-1"] != sessions["edit:j-2"] and sessions["edit:j-3"] == "s-ok"
