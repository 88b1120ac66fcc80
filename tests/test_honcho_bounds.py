"""What a Honcho server sends, and how long it takes, is bounded: an answer past
its route's cap is refused unread, a trickling answer ends at its request's
deadline, and send, audit, recall, ask and sync each end within their own.

Each test says what it checks by outcome (the kind of failure, how much of the
answer was read, that the command ended); the wall-clock checks are hang guards
with wide margins, not speed targets (those live in bench/)."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
from helpers import bxmem_inprocess, ledger_events, write_log
from hostile_honcho import Attack, arm, disarm

from bxmem.commands import audit, decide, recall
from bxmem.commands.send import job as send
from bxmem.commands.send import runner as send_runner
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.honcho import api as honcho_module
from bxmem.honcho.client import Unavailable, WorkspaceClient
from bxmem.honcho.http import cap_messages


def load():
    return config_module.load()


@pytest.fixture
def short(monkeypatch):
    """Timeouts a test can wait for: a read may take 1 s, a request 0.5 + 2 x 1 = 2.5 s."""
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 1.0)
    monkeypatch.setattr(honcho_module, "CONNECT_TIMEOUT", 0.5)
    return 0.5 + 2 * 1.0


def _list(honcho) -> tuple[Unavailable, float]:
    started = time.monotonic()
    with WorkspaceClient(honcho.url, "bm0-trusted", None) as client, pytest.raises(Unavailable) as caught:
        list(client.list_messages("s"))
    return caught.value, time.monotonic() - started


@pytest.mark.parametrize("mode", ["huge", "huge-chunked"])
def test_an_answer_past_its_cap_is_refused_and_not_read_on(honcho, mode):
    attack = Attack(mode, r"/messages/list$")
    arm(honcho, attack)
    tracemalloc.start()
    try:
        error, _ = _list(honcho)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cap = cap_messages(honcho_module.PAGE_SIZE)
    assert error.kind == f"the answer was larger than {cap:,} bytes, and not read on"
    assert peak < 2 * cap + (8 << 20), peak  # the buffer grows once past the cap, no further
    if mode == "huge":  # announced: refused before a byte of the body is read
        assert attack.written < 16 << 20
    assert attack.written < 800_000_000


def test_a_compressed_answer_is_refused_before_it_is_inflated(honcho):
    arm(honcho, Attack("gzip", r"/messages/list$"))
    tracemalloc.start()
    try:
        error, _ = _list(honcho)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.kind == "the answer came compressed, which bxmem does not ask for"
    assert peak < 8 << 20
    assert all(r.headers.get("accept-encoding") == "identity" for r in honcho.requests)


@pytest.mark.parametrize("mode", ["malformed", "deep"])
def test_an_answer_that_is_not_json_is_an_outage(honcho, mode):
    arm(honcho, Attack(mode, r"/messages/list$"))
    error, _ = _list(honcho)
    assert error.kind == "the answer was not JSON"


@pytest.mark.parametrize("mode", ["trickle-body", "trickle-headers", "hang"])
def test_a_trickling_answer_ends_at_its_request_deadline(honcho, short, mode):
    attack = Attack(mode, r"/messages/list$")
    arm(honcho, attack)
    error, took = _list(honcho)
    assert error.kind == "timed out"
    assert attack.written < 100_000  # never read to its end: the trickle would take hours
    assert took < short + 2.0, took  # a hang guard: each byte came well inside the 1 s read timeout


def test_the_deadline_is_each_threads_own(honcho, short):
    """send posts on one connection while it opens sessions on another: a slow
    answer on one thread never cuts the other thread's request."""
    import threading

    arm(honcho, Attack("trickle-body", r"/messages/list$"))
    outcome: dict[str, object] = {}

    def slow() -> None:
        try:
            _list(honcho)
        except BaseException as exc:
            outcome["slow"] = exc

    thread = threading.Thread(target=slow)
    thread.start()
    with WorkspaceClient(honcho.url, "bm0-trusted", None) as client:
        for _ in range(5):
            client.create_peer("p", False)
            time.sleep(0.3)
    thread.join()
    assert "slow" not in outcome and ("bm0-trusted", "p") in honcho.peers


# --- whole commands -------------------------------------------------------------------------


@pytest.fixture
def two_turns(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello there", "hi") + turn_lines(2, "and again", "yes"))
    write_log(home, "t", turn_lines(1, "another session", "ok"))
    decide.run(load())
    return home


def test_send_ends_by_its_run_deadline_however_slowly_honcho_answers(two_turns, honcho, monkeypatch):
    """Every request trickles: send still ends, by its run deadline, with everything kept."""
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 1.0)
    monkeypatch.setattr(honcho_module, "CONNECT_TIMEOUT", 60.0)  # a request alone could run 62 s...
    monkeypatch.setattr(send_runner, "RUN_DEADLINE_S", 3.0)  # ...the run ends by 3 s
    arm(honcho, Attack("trickle-body", r"/messages$"))
    started = time.monotonic()
    report = send.run(load(), clock=lambda: 1e6)
    took = time.monotonic() - started
    assert (
        report.outage and report.outage.endswith(": timed out: the command's deadline has passed") and report.sent == 0
    )
    assert took < 3.0 + 3.0, took
    assert {e["ev"] for e in ledger_events(two_turns)} >= {"attempt"} and not [
        e for e in ledger_events(two_turns) if e["ev"] in ("sent", "failed")
    ]
    disarm(honcho)
    monkeypatch.setattr(honcho_module, "CONNECT_TIMEOUT", 0.5)
    for _ in range(3):  # after the in-doubt wait, looked up, then sent: nothing lost, nothing doubled
        send.run(load(), clock=lambda: 1e6 + 1000)
    assert len([e for e in ledger_events(two_turns) if e["ev"] == "sent"]) == 3
    assert len(honcho.messages_in("bm0-trusted")) == 6


def test_send_starts_no_request_once_its_deadline_has_passed(honcho):
    with WorkspaceClient(honcho.url, "bm0-trusted", None, ends_by=0.0) as client, pytest.raises(Unavailable) as caught:
        client.create_peer("p", False)
    assert caught.value.unsent and caught.value.kind == "not sent: the command's deadline has passed"
    assert honcho.requests == []


def test_audit_ends_by_its_deadline_on_a_server_that_pages_without_end(home, brokerd, honcho, configure, monkeypatch):
    configure(honcho.url)
    monkeypatch.setattr(audit, "DEADLINE_S", 2.0)
    arm(
        honcho,
        Attack(
            "typed",
            r"/sessions/list$",
            body={"items": [{"id": "s"}], "total": 10**9, "page": 1, "size": 100, "pages": 10**7},
        ),
    )
    started = time.monotonic()
    result = bxmem_inprocess("audit")
    assert result.returncode == 7
    # The request the deadline met was cut, or the next one never started.
    assert result.stderr in (
        "bxmem: error: audit incomplete: honcho list sessions in bm0-trusted: not sent: the command's "
        "deadline has passed\n",
        "bxmem: error: audit incomplete: honcho list sessions in bm0-trusted: "
        "timed out: the command's deadline has passed\n",
    )
    assert time.monotonic() - started < 2.0 + 3.0


def test_audit_ends_at_its_deadline_on_a_trickling_answer(home, brokerd, honcho, configure, monkeypatch, short):
    configure(honcho.url)
    monkeypatch.setattr(audit, "DEADLINE_S", 1.5)
    arm(honcho, Attack("trickle-body", r"/sessions/list$"))
    result = bxmem_inprocess("audit")
    assert result.returncode == 7 and result.stderr.endswith(": timed out: the command's deadline has passed\n")


def test_recall_and_ask_end_at_their_deadlines_with_the_connection_closed(
    home, brokerd, honcho, configure, monkeypatch
):
    configure(honcho.url)
    monkeypatch.setattr(recall, "HONCHO_TIMEOUT_S", 1.0)
    attack = Attack("trickle-body", r"/search$|/chat$|/peers/list$")
    arm(honcho, attack)
    result = bxmem_inprocess("recall", "--json", "backups")
    assert {u["source"]: u["reason"] for u in json.loads(result.stdout)["unavailable"]}[
        "fleet"
    ] == "no answer within 1 s"
    assert attack.ended.wait(2.0)  # the source's connection was closed at its deadline, not left reading
    attack.ended.clear()
    asked = bxmem_inprocess("ask", "--json", "--deadline", "2", "where are the backups?")
    (unavailable,) = json.loads(asked.stdout)["unavailable"]  # cut by the chat's deadline, or by the command's
    assert unavailable["reason"] in ("no answer within 2 s", "timed out")
    assert attack.ended.wait(2.0)
    assert attack.written < 100


def test_sync_ends_at_its_health_deadline_on_a_trickling_health_check(home, honcho, configure, monkeypatch):
    from bxmem.commands import live_checks

    configure(honcho.url)
    monkeypatch.setattr(live_checks, "HONCHO_TIMEOUT_S", 1.0)
    attack = Attack("trickle-headers", r"/health$")
    arm(honcho, attack)
    result = bxmem_inprocess("sync")
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("Honcho now")]
    assert "not answering: no answer within 1 s" in line
    assert attack.ended.wait(2.0)  # the check's connection was closed, not left reading
