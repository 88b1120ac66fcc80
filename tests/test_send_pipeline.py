"""A drain keeps Honcho busy: the next group's session is opened on a second
connection while the previous group's messages are posted. These tests hold
that overlap to the same outcomes as the one-request-at-a-time path."""

from __future__ import annotations

import time
from collections import Counter

from helpers import ledger_events, write_log

from bxmem.commands import decide
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.honcho.api import settle_wait_s


def load():
    return config_module.load()


def three_sessions(home, turns: int = 2) -> None:
    for name in ("s1", "s2", "s3"):
        lines = []
        for n in range(1, turns + 1):
            lines += turn_lines(n, f"{name} q{n}", f"{name} a{n}")
        write_log(home, name, lines)
    decide.run(load())


def sent_once(fake, ws: str = "bm0-trusted") -> bool:
    counts = Counter((m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in fake.messages_in(ws))
    return bool(counts) and set(counts.values()) == {1}


def created_sessions(home) -> Counter:
    return Counter(e["id"] for e in ledger_events(home) if e["ev"] == "created" and e.get("what") == "session")


def test_the_next_session_is_opened_while_the_previous_group_is_posted(home, brokerd, honcho, configure):
    configure(honcho.url)
    three_sessions(home)
    honcho.latency = 0.3  # long enough that the two requests cannot miss each other
    report = send.run(load())
    assert report.sent == 6 and report.requests == 3
    assert honcho.max_in_flight == 2
    order = [(r.method, r.path.rsplit("/", 2)[-2:], (r.body or {}).get("id")) for r in honcho.requests]
    for name in ("s1", "s2", "s3"):
        created = order.index(("POST", ["bm0-trusted", "sessions"], name))
        posted = order.index(("POST", [name, "messages"], None))
        assert created < posted  # every session exists before its messages arrive
    assert sent_once(honcho)
    assert created_sessions(home) == Counter({"s1": 1, "s2": 1, "s3": 1})
    for name in ("s1", "s2", "s3"):  # opened ahead or not, the same peers and flags
        assert honcho.sessions[("bm0-trusted", name)]["peers"] == {
            "boxmaker0": {"observe_me": False, "observe_others": False},
            "kyle": {"observe_me": True, "observe_others": False},
        }


def test_an_outage_met_opening_ahead_is_an_outage_and_loses_nothing(home, brokerd, honcho, configure):
    configure(honcho.url)
    three_sessions(home)
    # The first session is opened in line; the second, ahead of its turn, meets a 503.
    honcho.inject("status", match=r"/sessions$", status=503, after=1)
    report = send.run(load(), clock=lambda: 1e6)
    assert report.outage == "honcho create session in bm0-trusted: HTTP 503"
    assert report.sent == 2  # s1's turns went; nothing of s2 was attempted
    assert not [e for e in ledger_events(home) if e["ev"] == "attempt" and e["session"] != "s1"]
    assert created_sessions(home) == Counter({"s1": 1})
    report = send.run(load(), clock=lambda: 1e6 + 8)  # past the first backoff (5 to 7.5 s)
    assert report.sent == 4 and report.pending == 0
    assert sent_once(honcho) and len(honcho.messages) == 12
    assert created_sessions(home) == Counter({"s1": 1, "s2": 1, "s3": 1})


def test_a_session_refused_ahead_fails_every_turn_it_would_hold(home, brokerd, honcho, configure):
    configure(honcho.url)
    three_sessions(home, turns=3)
    honcho.inject("status", match=r"/sessions$", status=422, after=1)
    report = send.run(load())
    failed = [(e["item"], e["status"]) for e in ledger_events(home) if e["ev"] == "failed"]
    assert failed == [(f"turn:s2:{n}", 422) for n in (1, 2, 3)]
    assert report.sent == 6 and report.pending == 0  # s1 and s3 went on
    assert {m["session_id"] for m in honcho.messages} == {"s1", "s3"}
    assert sent_once(honcho)


def test_a_run_stopped_with_a_session_opened_ahead_but_unrecorded_opens_it_again(home, brokerd, honcho, configure):
    """The creates made ahead are recorded only when their group is sent. A run
    that ends first (here: s2's messages meet an outage after s3's session was
    opened) leaves Honcho holding a session the ledger does not; the next run
    opens it again, which Honcho answers with the existing one, and sends once."""
    configure(honcho.url)
    three_sessions(home)
    honcho.latency = 0.2
    honcho.inject("status", match=r"/s2/messages$", status=503)

    def s3_opened() -> bool:
        return any(
            r.method == "POST"
            and r.path.endswith("/sessions")
            and isinstance(r.body, dict)
            and r.body.get("id") == "s3"
            for r in list(honcho.requests)
        )

    def s2_fails_once_s3_is_being_opened(_handler, method, path, *_rest) -> bool:
        # s2's 503 is answered only once s3's create, made ahead, has reached the server: on a
        # fast disk the run could otherwise meet the 503 before its thread sends the create.
        deadline = time.monotonic() + 10
        while method == "POST" and path.endswith("/s2/messages") and not s3_opened() and time.monotonic() < deadline:
            time.sleep(0.005)
        return False

    honcho.attack = s2_fails_once_s3_is_being_opened
    send.run(load(), clock=lambda: 1e6)
    # The 503 comes at once; s3's create, abandoned by the run, is still being answered.
    deadline = time.monotonic() + 10
    while honcho.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("bm0-trusted", "s3") in honcho.sessions
    assert "s3" not in created_sessions(home)
    send.run(load(), clock=lambda: 1e6 + settle_wait_s())  # s2's 503 left it in doubt
    assert sent_once(honcho) and len(honcho.messages) == 12
    assert created_sessions(home) == Counter({"s1": 1, "s2": 1, "s3": 1})
    assert len(honcho.sessions) == 3


def test_a_group_costs_one_ledger_append(home, brokerd, honcho, configure, monkeypatch):
    configure(honcho.url)
    three_sessions(home)
    send.run(load())  # sets up the workspace and sends
    for name in ("s4", "s5", "s6"):
        write_log(home, name, turn_lines(1, "q", "a"))
    decide.run(load())
    appends = []
    real = send.Ledger.append

    def append(self, events):
        appends.append([e["ev"] for e in events])
        return real(self, events)

    monkeypatch.setattr(send.Ledger, "append", append)
    assert send.run(load()).sent == 3
    # created + attempt for each group, the previous group's sent riding along; the last sent at the end.
    assert appends == [
        ["created", "attempt"],
        ["sent", "created", "attempt"],
        ["sent", "created", "attempt"],
        ["sent"],
    ]


def test_nothing_is_opened_ahead_in_a_workspace_not_yet_configured(home, brokerd, honcho, configure):
    """s2's turns fail here (their log was cut short after deciding), so the group
    planned during s1's post is s3's, in the untrusted workspace, which has not
    been configured yet: its session waits for the configuration."""
    configure(honcho.url)
    brokerd.states["s3"] = ("private", True)
    three_sessions(home)
    (home / "logs" / "s2.jsonl").write_text("")
    send.run(load())
    untrusted = [(r.method, r.path) for r in honcho.requests if "/workspaces/bm0-untrusted" in r.path]
    assert untrusted[0] == ("PUT", "/v3/workspaces/bm0-untrusted")
    assert {e["item"] for e in ledger_events(home) if e["ev"] == "failed"} == {"turn:s2:1", "turn:s2:2"}
    assert {m["session_id"] for m in honcho.messages_in("bm0-untrusted")} == {"s3"}
    assert sent_once(honcho) and sent_once(honcho, "bm0-untrusted")


def test_a_run_leaves_no_thread_behind(home, brokerd, honcho, configure):
    import threading

    configure(honcho.url)
    three_sessions(home)
    before = threading.active_count()
    send.run(load())
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before
