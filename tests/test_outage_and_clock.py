"""Operating in an outage and after it, and what a wrong clock can do (issue 28,
items 2 and 7): send's exit status does not depend on the terminal, `send --now`
skips the backoff and nothing else, a new URL or key ends the backoff, a refused
key leaves nothing in doubt, and no stored time keeps a job waiting past its
own bound whatever the clock did."""

from __future__ import annotations

import json
import marshal
import os
import time
from pathlib import Path

import pytest
from freezegun import freeze_time
from helpers import bxmem_main, ledger_events, register_secret, write_log

from bxmem.commands import decide
from bxmem.commands import sync as sync_module
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.honcho.api import settle_wait_s
from bxmem.start.idle import idle_exit, is_idle
from bxmem.start.lean_argv import parse
from bxmem.start.marshal_seal import unseal

DAY = 86400.0


def load():
    return config_module.load()


def checkpoint(home: Path) -> dict:
    return marshal.loads(unseal((home / "memory" / "bxmem" / "outbox.marshal").read_bytes()))


@pytest.fixture
def in_an_outage(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    assert bxmem_main("decide").returncode == 0
    honcho.stop()
    first = bxmem_main("send")
    assert first.returncode == 3 and "Honcho unreachable" in first.stderr
    return home


def test_send_in_a_backoff_exits_the_same_on_a_terminal_off_it_and_with_json(in_an_outage, monkeypatch):
    off_terminal = bxmem_main("send")  # the timer's way: the idle path answers
    with_json = bxmem_main("send", "--json")
    monkeypatch.setattr(os, "isatty", lambda fd: True)  # a person watching: the real job runs
    at_terminal = bxmem_main("send")
    assert (off_terminal.returncode, with_json.returncode, at_terminal.returncode) == (3, 3, 3)
    assert json.loads(with_json.stdout)["waiting_until"]


def test_send_now_tries_at_once(in_an_outage, honcho):
    honcho.start()
    waiting = bxmem_main("send")
    assert waiting.returncode == 3 and not honcho.messages  # the backoff holds the timer's runs
    now = bxmem_main("send", "--now")
    assert now.returncode == 0, now.stderr
    assert [m["content"] for m in honcho.messages] == ["hello", "hi"]
    assert "backoff" not in checkpoint(in_an_outage) or checkpoint(in_an_outage)["backoff"] is None
    assert not is_idle(parse(["bxmem", "send", "--now"]))  # never answered by the idle path


def test_send_now_never_skips_the_in_doubt_wait_and_never_doubles(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "more", "yes"))
    decide.run(load())
    honcho.inject("store-then-drop", match=r"/messages$")
    assert send.run(load()).outage  # stored, the answer lost: in doubt, and an outage
    stored = len(honcho.messages)
    again = bxmem_main("send", "--now", "--json")
    report = json.loads(again.stdout)
    assert again.returncode == 3 and report["in_doubt"] and report["sent"] == 0
    assert len(honcho.messages) == stored  # nothing posted before the lookup may be made
    later = time.time() + settle_wait_s() + 1
    assert send.run(load(), clock=lambda: later, now=True).sent == 2
    assert len(honcho.messages) == stored


def test_a_new_url_ends_the_backoff(in_an_outage, honcho, configure):
    configure("http://127.0.0.1:9")  # the owner first had it wrong...
    assert bxmem_main("send").returncode == 3
    honcho.start()
    configure(honcho.url)  # ...and fixes it: the next timer run tries at once
    result = bxmem_main("send")
    assert result.returncode == 0, result.stderr
    assert "[honcho] url changed" in result.stderr
    assert len(honcho.messages) == 2


def test_a_new_key_file_ends_the_backoff(home, brokerd, honcho, configure, tmp_path):
    key = tmp_path / "t.key"
    key.write_text(register_secret("trusted-key-a1b2c3d4") + "\n")
    os.chmod(key, 0o600)
    configure(honcho.url, extra=f'\n[secrets.honcho_trusted]\nfile = "{key}"\n')
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    bxmem_main("decide")
    honcho.stop()
    assert bxmem_main("send").returncode == 3
    honcho.start()
    assert bxmem_main("send").returncode == 3 and not honcho.messages  # still waiting it out
    key.write_text(register_secret("trusted-key-e5f6a7b8") + "\n")
    result = bxmem_main("send")
    assert result.returncode == 0 and "a key file changed" in result.stderr, result.stderr
    assert len(honcho.messages) == 2


def test_a_refused_key_leaves_nothing_in_doubt(home, brokerd, honcho, configure, tmp_path):
    """A 401 stores nothing: the item goes as soon as the key is fixed, not 95 s later."""
    good, wrong = register_secret("trusted-key-9f8e7d6c"), register_secret("not-the-key-0a1b2c3d")
    honcho.keys["bm0-trusted"] = good
    key = tmp_path / "t.key"
    key.write_text(good + "\n")
    os.chmod(key, 0o600)
    configure(honcho.url, extra=f'\n[secrets.honcho_trusted]\nfile = "{key}"\n')
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    bxmem_main("decide")
    assert bxmem_main("send").returncode == 0  # the workspace is set up with the right key
    write_log(home, "s", turn_lines(2, "more", "yes"))
    bxmem_main("decide")
    key.write_text(wrong + "\n")
    refused = bxmem_main("send", "--json")
    assert json.loads(refused.stdout)["stopped"] == ["bm0-trusted"] and json.loads(refused.stdout)["in_doubt"] == []
    assert [e["ev"] for e in ledger_events(home)][-3:] == ["attempt", "unsent", "key_refused"]
    key.write_text(good + "\n")
    fixed = bxmem_main("send", "--json")
    assert fixed.returncode == 0 and json.loads(fixed.stdout)["sent"] == 1, fixed.stdout
    assert len(honcho.messages) == 4


# --- the clock -------------------------------------------------------------------------------


def test_a_clock_a_day_ahead_during_the_outage_then_corrected_waits_at_most_ten_minutes(
    home, brokerd, honcho, configure
):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    honcho.stop()
    real = time.time()
    with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(real + DAY)), tick=True):
        assert send.run(load()).outage
        assert send.run(load()).waiting_until  # a minute later, on that clock: still waiting
    honcho.start()
    # Corrected: the stored next try is a day away, which is no believable wait.
    assert not is_idle(parse(["bxmem", "send"]))  # the summary was written in what is now the future
    status = sync_module.status(load(), check=False)
    assert any("lie in the future" in line and "clock-wrong" in line for line in status["attention"])
    assert 0 <= status["outage"]["next_try_in_s"] <= 600
    report = send.run(load())
    assert report.sent == 1, report
    assert sync_module.status(load(), check=False)["outage"] is None


def test_sync_flags_times_in_the_future_and_no_outage_age_goes_negative(in_an_outage, honcho):
    box = checkpoint(in_an_outage)
    with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - DAY)), tick=True):
        status = sync_module.status(load(), check=False)
        result = bxmem_main("sync", "--json")
    assert status["outage"]["for_s"] is None  # unknown: its start lies ahead of the clock, not -86,400 s ago
    assert 0 <= status["outage"]["next_try_in_s"] <= 600
    assert {f["what"] for f in status["future_times"]} >= {"the outage's start", "decide's last run"}
    assert result.returncode == 4
    assert box["backoff"]["until"] > time.time() - 60


def test_idle_answers_the_last_real_runs_status(in_an_outage):
    assert idle_exit(parse(["bxmem", "send"])) == 3
