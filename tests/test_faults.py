"""The fault suite: each way Honcho or brokerd can fail, with its ledger and log outcome."""

from __future__ import annotations

import logging

import pytest
from conftest import decisions, ledger_events, write_log
from freezegun import freeze_time

from bxmem import config as config_module
from bxmem import decide, honcho as honcho_module, send
from bxmem.demo.sample import turn_lines


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
    send.run(load(), clock=lambda: 1e6 + 6)
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
    from bxmem import mirror
    from bxmem.demo.sample import write_journal

    configure(honcho.url)
    write_journal(home, [{"id": "e1", "ts": "2026-09-27T10:00:00Z", "session": "s1", "op": "identity_add",
                          "file": "user.md", "entry": "likes tea"}])
    mirror.run(load())
    honcho.inject("store-then-status", match=r"/sessions$", status=409)
    assert send.run(load()).sent == 1
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["likes tea"]
    assert not evs(home, "failed")


def test_malformed_json_after_storing_is_settled_by_lookup(one_turn, honcho):
    honcho.inject("malformed", match=r"/messages$")
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage and "not JSON" in report.outage
    send.run(load(), clock=lambda: 1e6 + 6)
    assert len(honcho.messages) == 2  # stored once, found by its metadata, not sent again
    assert evs(one_turn, "sent")[0].get("settled") is True


def test_hanging_past_the_read_timeout_is_an_outage_then_settled(one_turn, honcho, monkeypatch):
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)
    honcho.inject("hang", match=r"/messages$", seconds=1.0)
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage == "honcho add messages in bm0-trusted: timed out"
    send.run(load(), clock=lambda: 1e6 + 6)
    # The hung request was stored after the client gave up; the next run finds it.
    assert [m["metadata"]["part"] for m in honcho.messages] == [0, 1]


def test_a_long_outage_backs_off_to_ten_minutes_and_logs_twice(one_turn, honcho, caplog):
    from bxmem.log import log

    log.propagate = True
    caplog.set_level(logging.INFO, logger="bxmem")
    honcho.stop()
    tries = []
    with freeze_time("2026-11-30 10:00:00") as frozen:
        for minute in range(200):  # over 3 simulated hours, a timer run every 60 s
            if send.run(load()).outage:
                tries.append(minute * 60)
            frozen.tick(60)
        honcho.start()
        for _ in range(11):
            send.run(load())
            frozen.tick(60)
    lines = [r.getMessage() for r in caplog.records]
    assert len([l for l in lines if "honcho-unreachable" in l]) == 1
    assert len([l for l in lines if "answers again" in l]) == 1
    # The wait doubles from 5 s (seen at 60 s ticks) and settles at 10 minutes.
    gaps = [b - a for a, b in zip(tries, tries[1:])]
    assert gaps == sorted(gaps) and max(gaps) == 600 and gaps[-10:] == [600] * 10, gaps
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
    assert report.undecided == 1 and "not running as this user" in report.broker_problem
