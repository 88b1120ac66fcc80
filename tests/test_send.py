"""`bxmem send` against the fake Honcho: no loss, no duplicate, in order, to the right workspace."""

from __future__ import annotations

import json
import marshal
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from helpers import ROOT, bxmem_main, decisions, ledger_events, write_log

from bxmem.commands import decide
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo import sample
from bxmem.demo.sample import turn_lines
from bxmem.honcho.api import settle_wait_s
from bxmem.start.marshal_seal import unseal


def load():
    return config_module.load()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def items_in(fake, ws: str) -> Counter:
    return Counter((m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in fake.messages_in(ws))


@pytest.fixture
def sample_home(home, brokerd, honcho, configure):
    sample.write_home(home)
    brokerd.states.update(sample.broker_states())
    configure(honcho.url)
    return home


def test_sample_sessions_land_where_the_table_says(sample_home, honcho):
    assert bxmem_main("decide").returncode == 0
    result = bxmem_main("send", "--json")
    assert result.returncode == 0, result.stderr
    trusted = {m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-trusted")}
    untrusted = {m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-untrusted")}
    assert trusted == {"turn:s-clean:1", "turn:s-clean:2", "turn:s-team:1", "turn:s-team:2"}
    assert untrusted == {"turn:s-fetched:1", "turn:s-late:1"}
    assert set(honcho.workspaces) == {"bm0-trusted", "bm0-untrusted"}  # nothing anywhere else
    for ws in ("bm0-trusted", "bm0-untrusted"):
        assert all(n == 1 for n in items_in(honcho, ws).values())


def test_each_turn_is_speaker_then_agent_with_metadata(sample_home, honcho):
    bxmem_main("decide")
    bxmem_main("send")
    messages = honcho.messages_in("bm0-trusted", "s-clean")
    assert [(m["peer_id"], m["content"]) for m in messages] == [
        ("kyle", "what did we decide about the backups?"),
        ("boxmaker0", "we decided nightly restic snapshots"),
        ("kyle", "and where do they go?"),
        ("boxmaker0", "to the NAS, then offsite weekly"),
    ]
    meta = messages[1]["metadata"]
    import hashlib

    digest = hashlib.sha256(b"we decided nightly restic snapshots").hexdigest()
    assert meta == {
        "bxmem_item": "turn:s-clean:1",
        "part": 1,
        "parts": 2,
        "role": "agent",
        "bx_session": "s-clean",
        "turn": 1,
        "bxmem_agent": "boxmaker0",
        "bxmem_sha256": digest,
    }
    assert messages[0]["created_at"] == "2026-09-27T10:01:00Z"


def test_peers_and_sessions(sample_home, honcho):
    bxmem_main("decide")
    bxmem_main("send")
    assert honcho.peers[("bm0-trusted", "boxmaker0")]["configuration"] == {"observe_me": False}
    assert honcho.peers[("bm0-trusted", "kyle")]["configuration"] == {"observe_me": True}
    assert honcho.peers[("bm0-trusted", "ana_Dot_lima")]["configuration"] == {"observe_me": True}
    first = honcho.sessions[("bm0-trusted", "s-team")]
    second = honcho.sessions[("bm0-trusted", "s-team-2")]
    assert first["peers"]["boxmaker0"]["observe_me"] is False
    assert set(first["peers"]) == {"boxmaker0", "ana_Dot_lima"}
    assert set(second["peers"]) == {"boxmaker0", "ana_Dot_lima", "kyle"}  # every peer so far
    assert [m["peer_id"] for m in honcho.messages_in("bm0-trusted", "s-team-2")] == ["kyle", "boxmaker0"]


def test_workspace_configuration_is_set_explicitly_and_read_back(sample_home, honcho):
    bxmem_main("decide")
    bxmem_main("send")
    config = honcho.workspaces["bm0-trusted"]["configuration"]
    assert config["reasoning"] == {"enabled": True} and config["dream"] == {"enabled": True}
    puts = [r for r in honcho.requests if r.method == "PUT" and r.path == "/v3/workspaces/bm0-trusted"]
    assert len(puts) == 1
    reads = [r for r in honcho.requests if r.method == "POST" and r.path == "/v3/workspaces"]
    assert {r.body["id"] for r in reads} == {"bm0-trusted", "bm0-untrusted"}


def test_a_restart_sends_nothing_twice(sample_home, honcho):
    bxmem_main("decide")
    bxmem_main("send")
    before = len(honcho.messages)
    (sample_home / "memory" / "bxmem" / "outbox.marshal").unlink()  # lose the checkpoint
    (sample_home / "memory" / "bxmem" / "idle-send.marshal").unlink()
    again = bxmem_main("send", "--json")
    assert json.loads(again.stdout)["sent"] == 0
    assert len(honcho.messages) == before


def test_consecutive_turns_of_a_session_go_in_one_request(home, brokerd, honcho, configure):
    configure(honcho.url)
    lines = []
    for n in range(1, 31):
        lines += turn_lines(n, f"q{n}", f"a{n}")
    write_log(home, "busy", lines)
    decide.run(load())
    report = send.run(load())
    posts = [r for r in honcho.requests if r.path.endswith("/messages")]
    assert report.sent == 30 and len(posts) == 1 and len(posts[0].body["messages"]) == 60
    assert [m["content"] for m in honcho.messages_in("bm0-trusted")][:4] == ["q1", "a1", "q2", "a2"]


def test_one_batch_per_run(home, brokerd, honcho, configure):
    configure(honcho.url, batch=2)
    for s in ("a", "b", "c"):
        write_log(home, s, turn_lines(1, "hi", "hello"))
    decide.run(load())
    assert send.run(load()).sent == 2
    assert send.run(load()).sent == 1
    assert send.run(load()).sent == 0


def test_long_text_is_split_in_order(home, brokerd, honcho, configure):
    configure(honcho.url)
    text = "".join(chr(ord("a") + i % 26) for i in range(60_001))
    write_log(home, "long", turn_lines(1, text, "ok"))
    decide.run(load())
    send.run(load())
    messages = honcho.messages_in("bm0-trusted")
    assert [len(m["content"]) for m in messages] == [25_000, 25_000, 10_001, 2]
    assert "".join(m["content"] for m in messages[:3]) == text
    assert [m["metadata"]["part"] for m in messages] == [0, 1, 2, 3]


def test_text_is_neutralised_on_the_way_out(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "evil\u202eeulav\u200b text", "reply\x1b[31m red"))
    decide.run(load())
    send.run(load())
    assert [m["content"] for m in honcho.messages_in("bm0-trusted")] == ["evileulav text", "reply[31m red"]


def test_outage_waits_doubles_logs_once_and_drains_in_order(home, brokerd, honcho, configure, caplog):
    configure(honcho.url)
    for n, s in enumerate(("a", "b", "c")):
        write_log(home, s, turn_lines(n + 1, f"text {s}", f"reply {s}"))
    decide.run(load())
    honcho.stop()
    clock = Clock()
    import logging

    caplog.set_level(logging.INFO, logger="bxmem")
    from bxmem.log import log

    log.propagate = True
    report = send.run(load(), clock=clock)
    assert report.outage and report.sent == 0
    delays = []
    for _ in range(9):
        box = marshal.loads(unseal((home / "memory" / "bxmem" / "outbox.marshal").read_bytes()))
        delays.append(box["backoff"]["delay"])
        assert send.run(load(), clock=clock).waiting_until  # before the retry time: no request
        clock.now = box["backoff"]["until"]
        send.run(load(), clock=clock)
    assert delays == [5, 10, 20, 40, 80, 160, 320, 600, 600]
    unreachable = [r for r in caplog.records if "honcho-unreachable" in r.getMessage()]
    assert len(unreachable) == 1
    honcho.start()
    clock.now += 601
    report = send.run(load(), clock=clock)
    assert report.sent == 3
    assert len([r for r in caplog.records if "answers again" in r.getMessage()]) == 1
    order = [m["metadata"]["bxmem_item"] for m in honcho.messages if m["peer_id"] != "boxmaker0"]
    assert order == ["turn:a:1", "turn:b:2", "turn:c:3"]


def test_a_refused_item_is_failed_and_the_rest_go_on(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "a", turn_lines(1, "first", "one"))
    write_log(home, "bad", turn_lines(2, "the-secret-words-of-bad", "two"))
    write_log(home, "c", turn_lines(3, "third", "three"))
    decide.run(load())
    honcho.inject("status", match=r"sessions/bad/messages$", status=422, times=5)
    result = bxmem_main("send", "--json")
    assert json.loads(result.stdout)["failed"] == 1
    assert "turn:bad:2 not sent to bm0-trusted: HTTP 422" in result.stderr
    assert "honcho-send-refused" in result.stderr
    assert "the-secret-words-of-bad" not in result.stderr
    assert {m["metadata"]["bxmem_item"] for m in honcho.messages} == {"turn:a:1", "turn:c:3"}
    failed = [e for e in ledger_events(home) if e["ev"] == "failed"]
    assert [(e["item"], e["status"]) for e in failed] == [("turn:bad:2", 422)]


def test_a_lost_answer_after_the_batch_was_stored_makes_no_duplicate(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "more", "yes"))
    decide.run(load())
    honcho.inject("store-then-drop", match=r"/messages$")
    clock = Clock()
    assert send.run(load(), clock=clock).outage
    assert len(honcho.messages) == 4  # Honcho has them; the ledger does not say so yet
    clock.now += settle_wait_s()
    report = send.run(load(), clock=clock)
    assert report.sent == 2 and report.requests == 0  # settled by lookup, nothing re-sent
    assert len(honcho.messages) == 4
    assert all(e.get("settled") for e in ledger_events(home) if e["ev"] == "sent")


def test_a_partly_stored_item_sends_only_the_missing_parts(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "x" * 30_000, "reply"))
    decide.run(load())
    # The first attempt stores the whole item but the answer is lost; then we
    # pretend Honcho lost the last part, as a partial failure would.
    honcho.inject("store-then-drop", match=r"/messages$")
    clock = Clock()
    send.run(load(), clock=clock)
    with honcho.lock:
        honcho.messages.pop()
    clock.now += settle_wait_s()
    send.run(load(), clock=clock)
    parts = sorted(m["metadata"]["part"] for m in honcho.messages)
    assert parts == [0, 1, 2]
    sent = [e for e in ledger_events(home) if e["ev"] == "sent"]
    assert len(sent) == 1 and len(sent[0]["ids"]) == 3


def test_local_only_send_sends_nothing_and_says_so(home):
    result = bxmem_main("send")
    assert result.returncode == 0
    assert "local-only" in result.stderr


def test_second_send_at_once_exits_zero_saying_so(home, honcho, configure):
    configure(honcho.url)
    from bxmem.store.files import JobLock

    (home / "memory").mkdir(parents=True)
    lock = JobLock(home / "memory" / "honcho.jsonl", "send")
    assert lock.acquire()
    try:
        result = bxmem_main("send")
    finally:
        lock.release()
    assert result.returncode == 0 and "another send is running" in result.stderr


@pytest.mark.slow  # twelve kill -9 trials, each a real subprocess
@pytest.mark.parametrize("trial", range(12))
def test_kill_9_at_any_moment_loses_and_doubles_nothing(home, brokerd, honcho, configure, trial):
    """SIGKILL `bxmem send` at a random moment, then run it to completion: every
    decided turn is in Honcho once, in the workspace its decision named. The runs
    that finish are timed past the in-doubt wait, as the timers would reach it."""
    rng = random.Random(trial)
    configure(honcho.url, batch=7)
    honcho.latency = 0.01
    for s in range(6):
        lines = []
        for n in range(1, 6):
            lines += turn_lines(
                n,
                f"s{s} q{n}",
                f"s{s} a{n}",
                results=[{"untrusted": True, "class": "public"}] if (s == 2 and n == 3) else None,
            )
        write_log(home, f"sess{s}", lines)
    decide.run(load())
    env = {**os.environ}
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-m", "bxmem", "send"], env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    later = time.time() + settle_wait_s()
    for _ in range(20):
        if send.run(load(), clock=lambda later=later: later).pending == 0:
            break
        later += 601  # past any backoff
    expected = {item: d["ws"] for item, d in decisions(home).items() if d["ws"]}
    got: Counter[tuple[str, int, str]] = Counter()
    for m in honcho.messages:
        got[(m["metadata"]["bxmem_item"], m["metadata"]["part"], m["workspace_id"])] += 1
    assert all(n == 1 for n in got.values()), [k for k, n in got.items() if n > 1]
    assert {(item, ws) for item, _part, ws in got} == set(expected.items())


def test_send_json_is_an_object_even_when_local_only(home):
    result = bxmem_main("send", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["local_only"] is True


def test_a_send_before_the_ledger_exists_is_not_taken_for_a_replaced_ledger(home, brokerd, honcho, configure, caplog):
    """The checkpoint of a send that ran before any decision holds no ledger inode;
    the next run used to warn that the ledger was replaced and rebuild."""
    import logging

    from bxmem.log import log

    log.propagate = True
    caplog.set_level(logging.INFO, logger="bxmem")
    configure(honcho.url)
    send.run(load())
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    assert send.run(load()).sent == 1
    assert not [r for r in caplog.records if "replaced or truncated" in r.getMessage()]
