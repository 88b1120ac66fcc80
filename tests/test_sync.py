"""`bxmem sync` tells the truth in each state the runbook covers."""

from __future__ import annotations

import json
import os

from helpers import bxmem_inprocess, bxmem_main, write_log

from bxmem.commands import decide, mirror, sync
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal


def load():
    return config_module.load()


def status(**kwargs):
    result = bxmem_inprocess("sync", "--json", **kwargs)
    return result.returncode, json.loads(result.stdout), result


def test_all_sent_needs_no_attention(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "k", "v", speaker=None))
    decide.run(load())
    send.run(load())
    code, report, _ = status()
    assert code == 0 and report["attention"] == []
    assert report["sent_items"] == 1 and report["decided_nowhere"] == {"no-speaker": 1}
    assert report["workspaces"]["bm0-trusted"]["pending_turns"] == 0
    plain = bxmem_inprocess("sync")
    assert (
        plain.returncode == 0
        and "outbox bm0-trusted (trusted): 0 turn(s)" in plain.stdout
        and "hello" not in plain.stdout
    )


def test_pending_and_outage_then_a_long_outage_needs_attention(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    write_journal(
        home,
        [{"id": "e1", "ts": "2026-09-27T10:00:00Z", "session": "s", "op": "note", "trust": "trusted", "entry": "x"}],
    )
    decide.run(load())
    mirror.run(load())
    honcho.stop()
    assert bxmem_main("send").returncode == 3
    code, report, _ = status()
    ws = report["workspaces"]["bm0-trusted"]
    assert (ws["pending_turns"], ws["pending_edits"], ws["oldest_pending"]) == (1, 1, "turn:s:1")
    assert report["outage"]["since"] and code == 0  # a short outage is not yet the owner's problem
    later = sync.status(load(), now=__import__("time").time() + 700)
    assert any("honcho-unreachable" in line for line in later["attention"])


def test_failed_items_are_listed_and_retry_sends_them_once(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    honcho.inject("status", match=r"/messages$", status=422)
    send.run(load())
    code, report, result = status()
    assert code == 4 and [(f["item"], f["status"]) for f in report["failed"]] == [("turn:s:1", 422)]
    assert "hello" not in result.stdout
    retry = bxmem_inprocess("sync", "--retry-failed")
    assert "re-queued 1 failed item(s)" in retry.stdout
    send.run(load())
    send.run(load())
    assert len(honcho.messages_in("bm0-trusted")) == 2
    assert status()[0] == 0


def test_an_edit_refused_half_way_is_retried_without_doubling(home, honcho, configure):
    configure(honcho.url)
    write_journal(
        home, [{"id": "a", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "old"}]
    )
    mirror.run(load())
    send.run(load())  # edit a
    write_journal(
        home,
        [
            {
                "id": "b",
                "ts": "t",
                "session": "s",
                "op": "identity_replace",
                "file": "user.md",
                "old": "old",
                "entry": "new",
            }
        ],
    )
    mirror.run(load())
    honcho.inject("status", match=r"/conclusions$", status=422)
    send.run(load())  # edit b: the delete happens, the create is refused
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == []
    sync.retry_failed(load())
    send.run(load())
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["new"]


def test_a_refused_key_needs_attention(home, brokerd, honcho, configure, tmp_path):
    key = tmp_path / "k"
    key.write_text("wrong\n")
    os.chmod(key, 0o600)
    honcho.keys["bm0-trusted"] = "right"
    configure(honcho.url, extra=f'[secrets.honcho_trusted]\nfile = "{key}"\n')
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    send.run(load())
    code, report, result = status()
    assert code == 4 and report["keys_refused"][0]["workspace"] == "bm0-trusted"
    assert report["workspaces"]["bm0-trusted"]["key_refused_since"]
    assert "wrong" not in result.stdout + result.stderr


def test_brokerd_unavailable_needs_attention(home, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    bxmem_main("decide")
    code, report, _ = status()
    assert code == 4 and report["broker"]["undecided_turns"] == 1 and report["broker"]["unavailable_since"]


def test_invalid_config_is_exit_78(config_file):
    config_file.write_text("[honcho]\nurl = 1\n")
    result = bxmem_inprocess("sync")
    assert result.returncode == 78 and "honcho-config-invalid" in result.stderr
