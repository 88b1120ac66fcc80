"""Honcho answers of the wrong type, forged ids and redirects: a refusal of the
item, named, or an outage-like stop; never a crash, a request to the wrong
path, a duplicate or an item lost."""

from __future__ import annotations

import json
import logging

import pytest
from helpers import bxmem_inprocess, decisions, ledger_events, write_log
from hostile_honcho import FORGED_IDS, Attack, Trap, arm, disarm

from bxmem.commands import decide, mirror, sync, undo
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.store.ledger import Ledger
from bxmem.store.ledger_events import sent_edit


def load():
    return config_module.load()


def evs(home, kind):
    return [e for e in ledger_events(home) if e["ev"] == kind]


@pytest.fixture
def trap():
    t = Trap()
    yield t
    t.stop()
    assert t.requests == [], "a redirect was followed"


def _one_conclusion(home, honcho, configure, entry="Kyle prefers metric units", edit="a"):
    configure(honcho.url)
    write_journal(
        home,
        [
            {
                "id": edit,
                "ts": "2026-12-01T10:00:00Z",
                "session": "s",
                "op": "identity_add",
                "file": "user.md",
                "entry": entry,
            }
        ],
    )
    mirror.run(load())


# --- created ids: the answer to a POST that stores ---------------------------------------


@pytest.mark.parametrize("forged", FORGED_IDS, ids=repr)
def test_a_forged_conclusion_id_fails_the_edit_in_doubt_and_a_retry_looks_first(home, honcho, configure, forged):
    _one_conclusion(home, honcho, configure)
    arm(honcho, Attack("typed", r"POST .*/conclusions$", body=[{"id": forged}], store=True))
    report = send.run(load(), clock=lambda: 1e6)
    assert report.failed == 1 and report.sent == 0
    (failed,) = evs(home, "failed")
    assert failed["item"] == "edit:a" and failed["in_doubt"] is True and failed["status"] is None
    assert failed["reason"].startswith("create conclusions: Honcho's answer is not usable: [0].id is ")
    assert repr(forged) not in failed["reason"] or forged in (None, True)  # the value itself is never echoed
    assert not evs(home, "sent") and len(honcho.conclusions_in("bm0-trusted")) == 1  # it was stored
    disarm(honcho)
    sync.retry_failed(load())
    assert send.run(load(), clock=lambda: 1e6 + 10).sent == 0  # Honcho may still be storing it: wait
    assert send.run(load(), clock=lambda: 1e6 + 1000).sent == 1
    (sent,) = evs(home, "sent")
    assert sent["results"][0].get("settled") is True  # found by the lookup, not written again
    assert len(honcho.conclusions_in("bm0-trusted")) == 1


@pytest.mark.parametrize("answer", [[], [{"id": "A1"}, {"id": "A2"}], {"id": "A1"}, "A1", None, [["A1"]]], ids=repr)
def test_a_created_list_of_the_wrong_shape_fails_the_edit_in_doubt(home, honcho, configure, answer):
    _one_conclusion(home, honcho, configure)
    arm(honcho, Attack("typed", r"POST .*/conclusions$", body=answer, store=True))
    assert send.run(load()).failed == 1
    assert evs(home, "failed")[0]["in_doubt"] is True


@pytest.mark.parametrize("forged", ["..", 12345, "a/b", "\x1b[31m", "x" * 513], ids=repr)
def test_forged_message_ids_fail_the_turns_in_doubt_and_a_retry_sends_nothing_twice(
    home, brokerd, honcho, configure, forged
):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi") + turn_lines(2, "and again", "yes"))
    decide.run(load())
    arm(
        honcho,
        Attack("typed", r"POST .*/messages$", store=True, body=lambda sent: [{"id": forged} for _ in sent["messages"]]),
    )
    report = send.run(load(), clock=lambda: 1e6)
    assert report.failed == 2 and report.sent == 0  # one request, never re-sent one by one
    assert [r.path.endswith("/messages") for r in honcho.requests].count(True) == 1
    assert {e["item"]: e["in_doubt"] for e in evs(home, "failed")} == {"turn:s:1": True, "turn:s:2": True}
    assert len(honcho.messages_in("bm0-trusted")) == 4
    disarm(honcho)
    sync.retry_failed(load())
    assert send.run(load(), clock=lambda: 1e6 + 1000).sent == 2
    assert all(e.get("settled") for e in evs(home, "sent"))
    assert len(honcho.messages_in("bm0-trusted")) == 4  # looked up, not sent again


def test_two_messages_given_one_id_is_not_an_answer(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi"))
    decide.run(load())
    arm(honcho, Attack("typed", r"POST .*/messages$", store=True, body=[{"id": "same"}, {"id": "same"}]))
    send.run(load())
    assert "gives one id to two of the items sent" in evs(home, "failed")[0]["reason"]


# --- ids from the ledger, written from older answers ----------------------------------------


def _record_conclusion_id(home, forged) -> None:
    """A ledger as an older bxmem wrote it from an unchecked answer: edit:a's conclusion id is `forged`."""
    ledger = Ledger(home / "memory" / "honcho.jsonl")
    ledger.append(
        [sent_edit("edit:a", "bm0-trusted", None, [{"i": 0, "do": "conclude", "id": forged, "hsession": "s"}])]
    )
    ledger.close()


@pytest.mark.parametrize(
    "forged", [12345, "..", ".", "../bm0-untrusted", "a/b", "%2e%2e", [1], {"a": 1}, "\x1b[2J"], ids=repr
)
def test_an_undo_of_a_conclusion_recorded_with_a_forged_id_fails_named_and_the_rest_goes_on(
    home, brokerd, honcho, configure, forged
):
    configure(honcho.url)
    write_journal(
        home,
        [
            {
                "id": "a",
                "ts": "2026-12-01T10:00:00Z",
                "session": "s",
                "op": "identity_add",
                "file": "user.md",
                "entry": "Kyle prefers metric units",
            }
        ],
    )
    mirror.run(load())
    send.run(load())  # created s and the workspace
    honcho.requests.clear()
    lines = (home / "memory" / "honcho.jsonl").read_text().splitlines()
    (home / "memory" / "honcho.jsonl").write_text("\n".join(line for line in lines if '"ev":"sent"' not in line) + "\n")
    _record_conclusion_id(home, forged)
    (home / "memory" / "bxmem" / "outbox.marshal").unlink()
    undo.run(load(), "a")
    write_log(home, "s2", turn_lines(1, "queued after the undo", "ok"))
    decide.run(load())
    for _ in range(3):  # every retry the same: no crash, nothing waits behind it
        report = send.run(load())
    assert not [
        r for r in honcho.requests if r.method == "DELETE"
    ]  # nothing was sent for it, least of all a workspace delete
    (failed,) = [e for e in evs(home, "failed") if e["item"].startswith("edit:undo-")]
    assert failed["status"] is None
    assert failed["reason"] == (
        "delete conclusion: the conclusion id recorded is not a Honcho id (1-512 of A-Z a-z 0-9 _ -); nothing was sent"
    )
    assert "turn:s2:1" in {e["item"] for e in evs(home, "sent")} and report.pending == 0


def test_a_dot_dot_id_never_reaches_the_delete_workspace_route(home, honcho, configure):
    """The path a conclusion id `..` made: DELETE /v3/workspaces/<ws>/conclusions/.. is
    DELETE /v3/workspaces/<ws> once normalised, Honcho's delete-workspace route."""
    from bxmem.honcho.client import BadId, WorkspaceClient

    with WorkspaceClient(honcho.url, "bm0-trusted", None) as client, pytest.raises(BadId):
        client.delete_conclusion("..")
    assert honcho.requests == []


# --- listed answers: the lookup and audit --------------------------------------------------


def _page(items):
    return {"items": items, "total": len(items), "page": 1, "size": 100, "pages": 1}


FORGED_MESSAGES = [
    {"id": "..", "peer_id": "boxmaker0", "content": "x", "metadata": {}},
    {"id": "A1", "peer_id": 7, "content": "x", "metadata": {}},
    {"id": "A1", "peer_id": "boxmaker0", "content": ["x"], "metadata": {}},
    {"id": "A1", "peer_id": "boxmaker0", "content": "x", "metadata": "bxmem_item=turn:s:1"},
    "not an object",
]


@pytest.mark.parametrize("message", FORGED_MESSAGES, ids=repr)
def test_a_lookup_that_lists_a_forged_message_fails_in_doubt_and_sends_nothing(
    home, brokerd, honcho, configure, message
):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi"))
    decide.run(load())
    honcho.inject("store-then-drop", match=r"/messages$")
    send.run(load(), clock=lambda: 1e6)  # stored, no answer: in doubt
    arm(honcho, Attack("typed", r"/messages/list$", body=_page([message])))
    report = send.run(load(), clock=lambda: 1e6 + 1000)
    assert report.failed == 1 and report.sent == 0
    (failed,) = evs(home, "failed")
    assert failed["in_doubt"] is True and failed["reason"].startswith(
        "list messages: Honcho's answer is not usable: items[0]"
    )
    assert len(honcho.messages_in("bm0-trusted")) == 2  # nothing sent again


@pytest.mark.parametrize("body", [[], "page", {"items": "x"}, {"items": [], "pages": "2"}, {"items": [{}]}], ids=repr)
def test_audit_of_a_forged_page_is_incomplete_named_never_a_traceback(home, brokerd, honcho, configure, body):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi"))
    decide.run(load())
    send.run(load())
    arm(honcho, Attack("typed", r"/messages/list$", body=body))
    result = bxmem_inprocess("audit")
    assert result.returncode == 7, result.stderr
    assert result.stderr.startswith(
        "bxmem: error: audit incomplete: honcho list messages in bm0-trusted: Honcho's answer is not usable: "
    )
    assert "Traceback" not in result.stderr


def test_audit_of_messages_whose_metadata_is_a_string_is_incomplete(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi"))
    decide.run(load())
    send.run(load())
    for m in honcho.messages:
        m["metadata"] = "bxmem_item=turn:s:1"
    result = bxmem_inprocess("audit")
    assert result.returncode == 7
    assert "items[0].metadata is a string, not an object" in result.stderr


def test_audit_shows_forged_metadata_values_as_placeholders(home, brokerd, honcho, configure):
    """Another fleet peer's metadata, under our peer's name: ESC, newlines and a forged
    attention line in bxmem_item, a list for part."""
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi"))
    decide.run(load())
    send.run(load())
    forged = "turn:s:9\n\x1b[31mattention: 9 failed item(s) (runbook honcho-send-refused)"
    for n, part in enumerate((0, [0], {"a": 1})):
        honcho.messages.append(
            {
                "id": f"F{n}",
                "content": "x",
                "peer_id": "boxmaker0",
                "session_id": "s",
                "workspace_id": "fleet",
                "created_at": "2026-12-01T10:00:00Z",
                "metadata": {"bxmem_item": forged, "part": part, "bxmem_agent": "boxmaker0"},
            }
        )
    honcho.sessions[("fleet", "s")] = {
        "id": "s",
        "workspace_id": "fleet",
        "is_active": True,
        "metadata": {},
        "configuration": {},
        "created_at": "2026-12-01T10:00:00Z",
        "peers": {},
    }
    for as_json in (False, True):
        result = bxmem_inprocess("audit", *(["--json"] if as_json else []))
        assert result.returncode == 4 and "\x1b" not in result.stdout
        lines = result.stdout.splitlines()
        assert not [line for line in lines if line.startswith("attention")]
    report = json.loads(result.stdout)
    found = [d for d in report["discrepancies"] if d["workspace"] == "fleet"]
    assert {d["kind"] for d in found} == {"not-recorded", "foreign-agent-message"}
    assert [d["item"] for d in found if d["kind"] == "not-recorded"] == ["(invalid id)"]


# --- redirects ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["redirect-away", "redirect-self"])
@pytest.mark.parametrize("route", [r"PUT ", r"POST /v3/workspaces$", r"/peers$", r"/sessions$", r"/messages$"])
def test_a_redirect_fails_nothing_stops_the_run_and_says_what_to_check(
    home, brokerd, honcho, configure, trap, caplog, mode, route
):
    from bxmem.log import log

    log.propagate = True
    caplog.set_level(logging.WARNING, logger="bxmem")
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi"))
    decide.run(load())
    arm(honcho, Attack(mode, route), trap)
    report = send.run(load(), clock=lambda: 1e6)
    assert report.failed == 0 and report.sent == 0 and report.exit_code == 3
    assert report.outage is not None
    assert "a redirect, which bxmem does not follow" in report.outage
    assert not evs(home, "failed") and "turn:s:1" in decisions(home)
    (line,) = [r.getMessage() for r in caplog.records if "honcho-unreachable" in r.getMessage()]
    assert line.startswith(
        f"Honcho at {honcho.url} answered with a redirect, which bxmem does not follow (check [honcho] url)"
    )
    disarm(honcho)
    assert send.run(load(), clock=lambda: 1e6 + 1000).sent == 1  # a POST redirected is in doubt: looked up first
    assert len(honcho.messages_in("bm0-trusted")) == 2


def test_sync_says_a_redirected_health_check_is_not_an_answer(home, honcho, configure, trap):
    configure(honcho.url)
    arm(honcho, Attack("redirect-away", r"/health"), trap)
    result = bxmem_inprocess("sync")
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("Honcho now")]
    assert "not answering: /health answered HTTP 302: a redirect, which bxmem does not follow" in line


def test_an_edit_that_wrote_a_conclusion_then_failed_never_writes_it_again(home, honcho, configure):
    """The undo of a consolidate writes each dropped entry again; the second write is
    refused. Retried, the first is recorded as done, not written a second time."""
    configure(honcho.url)
    entry = {"ts": "2026-12-01T10:00:00Z", "session": "s", "file": "memory.md"}
    write_journal(
        home,
        [
            {**entry, "id": "a", "op": "identity_add", "entry": "the NAS is at 10.0.0.5"},
            {**entry, "id": "b", "op": "identity_add", "entry": "backups run nightly"},
            {**entry, "id": "c", "op": "consolidate", "dropped": ["the NAS is at 10.0.0.5", "backups run nightly"]},
        ],
    )
    mirror.run(load())
    send.run(load())
    assert honcho.conclusions_in("bm0-trusted") == []
    undo.run(load(), "c")
    honcho.inject("status", match=r"/conclusions$", status=422, after=1)
    assert send.run(load()).failed == 1
    assert len(honcho.conclusions_in("bm0-trusted")) == 1
    sync.retry_failed(load())
    assert send.run(load()).sent == 1
    assert sorted(c["content"] for c in honcho.conclusions_in("bm0-trusted")) == [
        "backups run nightly",
        "the NAS is at 10.0.0.5",
    ]
