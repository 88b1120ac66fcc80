"""Every run says what holds it up (send, sync, decide), in text and in --json
(ISO 8601 times, never epoch floats), while the journal hears of each lasting
state once, when it starts or changes and when it ends."""

from __future__ import annotations

import json
import re

from helpers import bxmem_inprocess, bxmem_main, honcho_config, ledger_events, write_log
from runbook_lines import cites

from bxmem.commands import decide, sync
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.formats.timestamps import format_time
from bxmem.honcho import api as honcho_module
from bxmem.honcho.api import settle_wait_s
from bxmem.store.outbox import Outbox

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def load():
    return config_module.load()


def floats(value, where="$") -> list[str]:
    """Every float in a JSON document (a time as an epoch float is one)."""
    if isinstance(value, float):
        return [where]
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in floats(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [f for i, v in enumerate(value) for f in floats(v, f"{where}[{i}]")]
    return []


def test_every_run_during_an_outage_says_since_when_and_the_next_try(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d"))
    decide.run(load())
    honcho.stop()
    first = bxmem_inprocess("send", "--json")
    report = json.loads(first.stdout)
    assert first.returncode == 3 and report["schema"] == "bxmem.send/2" and report["outage"]["this_run"] is True
    since = report["outage"]["since"]
    # The second run waits out the backoff: before, it printed nothing, and --json had "outage": null
    # and an epoch float for waiting_until.
    second = bxmem_inprocess("send", "--json")
    waiting = json.loads(second.stdout)
    assert second.returncode == 3 and waiting["sent"] == 0 and waiting["pending"] == 2
    assert waiting["outage"]["since"] == since and waiting["outage"]["this_run"] is False
    assert ISO.match(waiting["outage"]["next_try_at"]) and waiting["waiting_until"] == waiting["outage"]["next_try_at"]
    assert "connection failed" in waiting["outage"]["error"]
    assert floats(waiting) == []
    text = bxmem_inprocess("send")
    assert text.returncode == 3
    [line] = text.stderr.strip().splitlines()
    assert re.fullmatch(
        rf"bxmem send: Honcho unreachable since {re.escape(since)} \(honcho .* connection failed \(ConnectError\)\); "
        r"next try at \S+Z \(in \d+ s\); 2 item\(s\) wait" + re.escape(cites("honcho-unreachable")),
        line,
    ), line
    assert bxmem_inprocess("-q", "send").stderr == ""  # the units' journal heard of it once, at its start
    status = sync.status(load(), check=False)
    assert (
        status["outage"]["next_try_at"] == waiting["outage"]["next_try_at"]
        and "connection failed" in status["outage"]["error"]
    )
    assert any(
        line.startswith(f"Honcho as send recorded: unreachable since {since} (")
        and f"next try at {waiting['outage']['next_try_at']}" in line
        for line in sync.lines(status)
    )


def test_an_item_in_doubt_and_the_turns_behind_it_show_in_send_and_sync(home, brokerd, honcho, configure, monkeypatch):
    """Before: neither send nor sync said anything of them ("2 turn(s) pending", "sent: 0")."""
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "first", "one"))
    decide.run(load())
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)
    honcho.inject("late", match=r"/sessions/s/messages$")  # stored only after the client gave up
    send.run(load(), clock=lambda: 1e6)
    honcho.release_late()
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 30.0)  # the wait for the lookup as deployed: 95 s
    write_log(home, "s", turn_lines(2, "second", "two"))
    decide.run(load())
    lookup = format_time(1e6 + settle_wait_s())
    report = send.run(load(), clock=lambda: 1e6 + 10)  # past the backoff, before the lookup
    assert report.exit_code == 3 and report.sent == 0
    [doubt] = report.as_json()["in_doubt"]
    assert doubt == {
        "workspace": "bm0-trusted",
        "session": "s",
        "hsession": "s",
        "kind": "turn",
        "items": ["turn:s:1"],
        "attempted_at": format_time(1e6),
        "lookup_at": lookup,
        "waiting_behind": 1,
    }
    assert any(
        line.startswith(
            "in doubt: 1 turn(s) of session s in bm0-trusted (first turn:s:1), sent at "
            f"{format_time(1e6)} with no answer; looked up in Honcho at {lookup}"
        )
        and "1 later item(s) wait behind them" + cites("honcho-in-doubt") in line
        for line in report.summary()
    )
    status = sync.status(load(), now=1e6 + 10, check=False)
    ws = status["workspaces"]["bm0-trusted"]
    assert (ws["pending_turns"], ws["in_doubt"], ws["waiting_behind"]) == (2, 1, 1)
    assert status["in_doubt"] == [doubt]
    text = sync.lines(status)
    assert (
        "outbox bm0-trusted (trusted): 2 turn(s) and 0 edit(s) pending (1 in doubt, 1 waiting behind them), 0 failed; "
        "oldest turn:s:1 (" in "\n".join(text)
    )
    assert sum(1 for line in text if line.startswith("in doubt: ")) == 1
    # once looked up: found in Honcho, recorded sent, and the one behind it goes
    done = send.run(load(), clock=lambda: 1e6 + settle_wait_s() + 1)
    assert done.sent == 2 and done.in_doubt == [] and done.exit_code == 0
    assert sync.status(load(), check=False)["sent_items"] == 2


def test_sync_counts_each_item_sent_once(home, configure):
    """The fold counted `sent` lines, so a second line for one item counted it twice."""
    from bxmem.store.ledger import Ledger
    from bxmem.store.ledger_events import decided_turn, sent_turn

    configure("http://127.0.0.1:9")
    ledger = Ledger(home / "memory" / "honcho.jsonl")
    (home / "memory").mkdir(exist_ok=True)
    decision = decided_turn(
        session="s",
        turn=1,
        role="trusted",
        ws="bm0-trusted",
        reason="clean",
        peer="kyle",
        trust_class="private",
        untrusted_by=[],
        secret_rule=None,
        log="s.jsonl",
        user=[[0, 10]],
        reply=[10, 20],
        at=None,
    )
    ledger.append(
        [
            decision,
            sent_turn("turn:s:1", "bm0-trusted", "trusted", "s", ["m1", "m2"]),
            sent_turn("turn:s:1", "bm0-trusted", "trusted", "s", ["m1", "m2"], settled=True),
        ]
    )
    assert Outbox.load(home / "memory" / "bxmem", ledger).sent_count == 1


def test_held_items_are_said_once_to_the_journal_and_their_end_too(home, brokerd, honcho, config_file):
    """send_report.log_held warned on every run that did work while items were held."""
    config_file.write_text(honcho_config(honcho.url))
    write_log(home, "s", turn_lines(1, "a", "b"))
    decide.run(load())
    renamed = honcho_config(honcho.url).replace('trusted = "bm0-trusted"', 'trusted = "bm0-home"')
    config_file.write_text(renamed)
    first = bxmem_inprocess("-q", "send")
    assert first.returncode == 4 and first.stderr.count("warning: 1 item(s) held that would write to bm0-trusted") == 1
    write_log(home, "o", turn_lines(1, "c", "d"))  # real work for the next run: a turn that goes
    decide.run(load())
    again = bxmem_inprocess("-q", "send")
    assert again.returncode == 4 and again.stderr == ""  # still held: nothing new to say
    by_hand = bxmem_inprocess("send")  # the command's own output says it every run
    assert by_hand.returncode == 4 and by_hand.stderr.startswith(
        "bxmem send: held: 1 item(s) held that would write to bm0-trusted"
    )
    held = json.loads(bxmem_inprocess("send", "--json").stdout)["held_by_config"]
    assert [(g["workspace"], g["reason"], g["oldest"]) for g in held] == [("bm0-trusted", "not-configured", "turn:s:1")]
    assert ISO.match(held[0]["oldest_at"])
    config_file.write_text(honcho_config(honcho.url))  # put back: the held item goes
    back = bxmem_inprocess("-q", "send")
    assert back.returncode == 0
    assert back.stderr.strip().splitlines() == [
        "bxmem send: notice: nothing is held any more that would write to bm0-trusted as trusted (not-configured)"
    ]


def test_items_in_doubt_are_said_once_to_the_journal(home, brokerd, honcho, configure, monkeypatch):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "first", "one"))
    decide.run(load())
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)
    honcho.inject("late", match=r"/sessions/s/messages$")
    import io
    import logging

    from bxmem.log import log, setup

    stream = io.StringIO()
    setup("send", quiet=True)
    handler = log.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    send.run(load(), clock=lambda: 1e6)
    honcho.release_late()
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 30.0)
    send.run(load(), clock=lambda: 1e6 + 10)
    send.run(load(), clock=lambda: 1e6 + 20)
    said = [line for line in stream.getvalue().splitlines() if "in doubt" in line]
    assert len(said) == 1 and said[0].startswith("bxmem send: warning: in doubt: 1 turn(s) of session s in bm0-trusted")
    send.run(load(), clock=lambda: 1e6 + settle_wait_s() + 1)
    assert stream.getvalue().splitlines()[-1] == (
        f"bxmem send: notice: the items in doubt since {format_time(1e6)} (session s in bm0-trusted) are settled"
    )
    log.setLevel(logging.NOTSET)


def test_every_decide_that_exits_3_says_why(home, configure, brokerd):
    """Before: after its first warning, decide exited 3 with nothing said, even with -v."""
    configure("http://127.0.0.1:9")
    brokerd.stop()
    write_log(home, "s", turn_lines(1, "a", "b"))
    first = bxmem_main("decide")
    assert first.returncode == 3 and first.stderr.count("brokerd cannot answer") == 1  # the warning alone
    for args in (("decide",), ("-v", "decide")):
        again = bxmem_main(*args)
        assert again.returncode == 3
        lines = [line for line in again.stderr.splitlines() if "wait undecided" in line]
        assert len(lines) == 1 and lines[0].startswith(
            "bxmem decide: 1 turn(s) wait undecided: brokerd cannot answer since "
        )
        assert cites("broker-state-unavailable") in lines[0]
    assert bxmem_main("-q", "decide").stderr == ""  # the timer's journal: said once, at the start
    report = json.loads(bxmem_main("decide", "--json").stdout)
    assert report["undecided"] == 1 and ISO.match(report["broker_unavailable_since"])
    assert len(report["why_degraded"]) == 1 and report["why_degraded"][0].startswith("1 turn(s) wait undecided")
    brokerd.start()
    done = json.loads(bxmem_main("decide", "--json").stdout)
    assert done["why_degraded"] == [] and done["broker_unavailable_since"] is None
    assert [e["item"] for e in ledger_events(home) if e["ev"] == "decided"] == ["turn:s:1"]
