"""The fault suite: each way Honcho or brokerd can fail, with its ledger and log outcome."""

from __future__ import annotations

import logging
import marshal
import random
from itertools import pairwise

import pytest
from freezegun import freeze_time
from helpers import decisions, ledger_events, write_log

from bxmem.commands import decide
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.formats.timestamps import format_time
from bxmem.honcho import api as honcho_module
from bxmem.honcho.api import settle_wait_s
from bxmem.start.marshal_seal import unseal


def load():
    return config_module.load()


@pytest.fixture
def one_turn(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    return home


def evs(home, kind):
    return [e for e in ledger_events(home) if e["ev"] == kind]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_an_outage_the_item_waits_and_goes_once(one_turn, honcho, status):
    honcho.inject("status", match=r"/messages$", status=status)
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage == f"honcho add messages in bm0-trusted: HTTP {status}"
    assert not evs(one_turn, "failed") and not evs(one_turn, "sent")
    # In doubt (a 5xx may come from a proxy while the server goes on): neither
    # looked up nor sent again until the server cannot be working on it any more.
    asked = len(honcho.requests)
    assert send.run(load(), clock=lambda: 1e6 + 8).held == 1  # 8 s: past the first backoff
    assert len(honcho.requests) == asked
    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    assert len(honcho.messages) == 2 and len(evs(one_turn, "sent")) == 1


@pytest.mark.parametrize("status", [400, 404, 409, 413, 422])
def test_4xx_fails_the_item_with_its_status(one_turn, honcho, status):
    honcho.inject("status", match=r"/messages$", status=status)
    send.run(load())
    failed = evs(one_turn, "failed")
    assert [(f["item"], f["status"]) for f in failed] == [("turn:s:1", status)]
    assert not honcho.messages


@pytest.mark.parametrize("route", [r"POST /v3/workspaces$", r"/peers$", r"/sessions$"])
def test_a_409_on_create_means_it_exists(one_turn, honcho, route):
    """Seed 000 section 5.7: a 409 on a create means "exists", which is what was asked
    for. Honcho 3.0.12 answers 200 for an existing workspace, peer or session; a proxy
    or another server may answer 409 instead. The turn goes; nothing is failed."""
    honcho.inject("store-then-status", match=route, status=409)
    report = send.run(load())
    assert report.sent == 1 and not report.failed and not report.outage
    assert not evs(one_turn, "failed")
    assert [m["metadata"]["part"] for m in honcho.messages] == [0, 1]
    assert any(r.status == 409 for r in honcho.requests)  # the fault did apply
    created = {e["what"] for e in evs(one_turn, "created")}
    assert created == {"workspace", "peer", "session"}


def test_a_409_on_create_of_the_session_for_a_conclusion_means_it_exists(home, honcho, configure):
    from bxmem.commands import mirror
    from bxmem.demo.sample import write_journal

    configure(honcho.url)
    write_journal(
        home,
        [
            {
                "id": "e1",
                "ts": "2026-09-27T10:00:00Z",
                "session": "s1",
                "op": "identity_add",
                "file": "user.md",
                "entry": "likes tea",
            }
        ],
    )
    mirror.run(load())
    honcho.inject("store-then-status", match=r"/sessions$", status=409)
    assert send.run(load()).sent == 1
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["likes tea"]
    assert not evs(home, "failed")


def test_malformed_json_after_storing_is_settled_by_lookup(one_turn, honcho):
    honcho.inject("malformed", match=r"/messages$")
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage and "not JSON" in report.outage
    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    assert len(honcho.messages) == 2  # stored once, found by its metadata, not sent again
    assert evs(one_turn, "sent")[0].get("settled") is True


def test_an_answer_nested_too_deep_is_an_outage_then_settled(one_turn, honcho):
    """5,000 levels of brackets raised RecursionError out of send."""
    honcho.inject("deep", match=r"/messages$")
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage == "honcho add messages in bm0-trusted: the answer was not JSON"
    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    assert len(honcho.messages) == 2 and evs(one_turn, "sent")[0].get("settled") is True


def test_hanging_past_the_read_timeout_is_an_outage_then_settled(one_turn, honcho, monkeypatch):
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)
    honcho.inject("hang", match=r"/messages$", seconds=1.0)
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage == "honcho add messages in bm0-trusted: timed out"
    send.run(load(), clock=lambda: 1e6 + 8 + settle_wait_s())
    # The hung request stored nothing; the lookup finds nothing and it is sent.
    assert [m["metadata"]["part"] for m in honcho.messages] == [0, 1]


@pytest.fixture
def late_store(home, brokerd, honcho, configure, monkeypatch):
    """Turn s:1's request is accepted and stored only when the test releases it,
    long after the client's read timeout. s:2 and o:3 are decided after it."""
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)  # the client gives up quickly...
    monkeypatch.setattr(honcho_module, "CONNECT_TIMEOUT", 30.0)  # ...and waits 30.9 s to look
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "first", "one"))
    decide.run(load())
    honcho.inject("late", match=r"/sessions/s/messages$")
    assert send.run(load(), clock=lambda: 1e6).outage == "honcho add messages in bm0-trusted: timed out"
    write_log(home, "s", turn_lines(2, "second", "two"))
    write_log(home, "o", turn_lines(3, "other", "three"))
    decide.run(load())
    return home


def parts_of(honcho, session):
    return [(m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in honcho.messages_in("bm0-trusted", session)]


def test_a_request_stored_late_is_looked_up_only_once_honcho_is_done_with_it(late_store, honcho):
    """Seed 002 section 12.2, with the window narrowed: the in-doubt turn waits,
    its session's later turn waits behind it, another session goes on."""
    asked = len(honcho.requests)
    report = send.run(load(), clock=lambda: 1e6 + 10)
    assert report.held == 2
    # Said in the report (send's output and --json), with when it will be looked up.
    assert [(d["items"], d["lookup_at"], d["waiting_behind"]) for d in report.in_doubt] == [
        (["turn:s:1"], format_time(1e6 + settle_wait_s()), 1)
    ]
    # Only held items are left: the idle fast path sleeps until they may be looked up.
    summary = marshal.loads(unseal((late_store / "memory" / "bxmem" / "idle-send.marshal").read_bytes()))
    assert summary["wake_at"] == 1e6 + settle_wait_s()
    assert parts_of(honcho, "o") == [("turn:o:3", 0), ("turn:o:3", 1)]
    assert not [r for r in honcho.requests[asked:] if "/sessions/s/" in r.path]  # no lookup, no post
    assert honcho.release_late() == 1  # the server stores it now, after its client gave up
    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    assert parts_of(honcho, "s") == [("turn:s:1", 0), ("turn:s:1", 1), ("turn:s:2", 0), ("turn:s:2", 1)]
    assert [e.get("settled") for e in evs(late_store, "sent") if e["item"] == "turn:s:1"] == [True]


def test_a_duplicate_that_still_gets_through_is_reported_by_audit(late_store, honcho):
    """A server slower than the wait stores the request after the lookup: the item is
    sent twice, which bxmem cannot see when sending, and `audit` reports."""
    from bxmem.commands import audit

    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    assert honcho.release_late() == 1
    assert parts_of(honcho, "s").count(("turn:s:1", 0)) == 2
    found = [(d["kind"], d["item"], d["part"]) for d in audit.audit(load()).discrepancies]
    assert found == [("duplicate", "turn:s:1", 0), ("duplicate", "turn:s:1", 1)]


@pytest.fixture
def late_conclusion(home, honcho, configure, monkeypatch):
    """Edit e1's conclusion is stored only when the test releases it; e2 removes it."""
    from bxmem.commands import mirror
    from bxmem.demo.sample import write_journal

    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)
    monkeypatch.setattr(honcho_module, "CONNECT_TIMEOUT", 30.0)
    configure(honcho.url)
    entry = {"ts": "2026-09-27T10:00:00Z", "session": "s1", "file": "user.md", "entry": "likes tea"}
    write_journal(home, [{"id": "e1", "op": "identity_add", **entry}])
    mirror.run(load())
    honcho.inject("late", match=r"/conclusions$")
    assert send.run(load(), clock=lambda: 1e6).outage == "honcho create conclusions in bm0-trusted: timed out"
    return lambda: (write_journal(home, [{"id": "e2", "op": "identity_remove", **entry}]), mirror.run(load()))


def test_a_conclusion_stored_late_is_found_and_its_remove_waits_for_it(late_conclusion, honcho, home):
    late_conclusion()  # e2, the remove, is decided while e1 is in doubt
    asked = len(honcho.requests)
    assert send.run(load(), clock=lambda: 1e6 + 10).held == 2
    assert not [r for r in honcho.requests[asked:] if "/conclusions" in r.path]
    assert honcho.release_late() == 1
    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    # e1 found by its text and recorded; e2 deleted that one. Before, e2 deleted a
    # second copy and the late one stayed in Honcho after the owner removed it.
    assert honcho.conclusions_in("bm0-trusted") == []
    assert [r["settled"] for e in evs(home, "sent") if e["item"] == "edit:e1" for r in e["results"]] == [True]


def test_a_duplicate_conclusion_that_still_gets_through_is_reported_by_audit(late_conclusion, honcho):
    from bxmem.commands import audit

    send.run(load(), clock=lambda: 1e6 + settle_wait_s())
    assert honcho.release_late() == 1
    copies = honcho.conclusions_in("bm0-trusted")
    assert [c["content"] for c in copies] == ["likes tea", "likes tea"]
    found = [(d["kind"], d["conclusion"], d["of"]) for d in audit.audit(load()).discrepancies]
    # The one recorded is the one created after the lookup; the late one is the copy.
    assert found == [("duplicate-conclusion", copies[1]["id"], copies[0]["id"])]


def test_a_connection_never_made_owes_no_lookup(one_turn, honcho):
    """Refused at connect: nothing reached Honcho, so the turn is not in doubt and
    goes at the next try, without waiting or looking up."""
    send.run(load())
    write_log(one_turn, "s", turn_lines(2, "again", "yes"))
    decide.run(load())
    honcho.stop()
    assert send.run(load(), clock=lambda: 1e6).outage
    assert [e["items"] for e in evs(one_turn, "unsent")] == [["turn:s:2"]]
    honcho.start()
    report = send.run(load(), clock=lambda: 1e6 + 8)
    assert report.sent == 1 and not report.held
    assert not [r for r in honcho.requests if r.path.endswith("/messages/list")]
    assert len(honcho.messages) == 4


def test_a_long_outage_backs_off_to_ten_minutes_and_logs_twice(one_turn, honcho, caplog):
    from bxmem.log import log

    log.propagate = True
    caplog.set_level(logging.INFO, logger="bxmem")
    honcho.stop()
    tries, rng = [], random.Random(5)
    with freeze_time("2026-11-30 10:00:00") as frozen:
        for minute in range(200):  # over 3 simulated hours, a timer run every 60 s
            if send.run(load(), rng=rng).outage:
                tries.append(minute * 60)
            frozen.tick(60)
        honcho.start()
        for _ in range(11):
            send.run(load(), rng=rng)
            frozen.tick(60)
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if "honcho-unreachable" in line]) == 1
    assert len([line for line in lines if "answers again" in line]) == 1
    # The wait grows from 5 s (seen at 60 s ticks) to about 10 minutes, never more,
    # with jitter: between 5 and 10 minutes (plus a tick) once it reaches the top.
    gaps = [b - a for a, b in pairwise(tries)]
    assert max(gaps) <= 600 + 60 and all(g >= 300 for g in gaps[-10:]), gaps
    assert len(set(gaps[-10:])) > 1, gaps
    assert len(honcho.messages) == 2


def test_brokerd_late_then_on_time(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    brokerd.late_once.add("s")
    brokerd.late_delay = 1.0
    assert decide.run(load(), broker_timeout=0.3).undecided == 1
    assert decide.run(load()).undecided == 0
    assert decisions(home)["turn:s:1"]["role"] == "trusted"


def test_brokerd_from_another_user_is_not_trusted(home, brokerd, configure, monkeypatch):
    from bxmem.sources import brokerd as brokerd_source

    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    monkeypatch.setattr(brokerd_source, "_peer_uid", lambda sock: 4242)
    report = decide.run(load())
    assert report.broker_problem is not None
    assert report.undecided == 1 and "not running as this user" in report.broker_problem
