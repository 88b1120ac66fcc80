"""`bxmem send --json` reports the true pending count, or null and why (issue 12, item 9)."""

from __future__ import annotations

import json

from helpers import bxmem_main, write_log

from bxmem.demo.sample import turn_lines


def send_json(**kwargs) -> dict:
    result = bxmem_main("send", "--json", **kwargs)
    assert result.returncode in (0, 3), result.stderr
    return json.loads(result.stdout)


def test_items_waiting_out_a_backoff_are_counted(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d") + turn_lines(3, "e", "f"))
    assert bxmem_main("decide").returncode == 0
    honcho.stop()
    first = send_json()
    assert first["outage"] and first["pending"] == 3 and first["pending_not_counted"] is None
    waiting = send_json()  # within the backoff: this run sends nothing
    assert waiting["waiting_until"] and waiting["sent"] == 0
    assert waiting["pending"] == 3 and waiting["pending_not_counted"] is None
    sync = json.loads(bxmem_main("sync", "--json").stdout)
    assert sync["workspaces"]["bm0-trusted"]["pending_turns"] == waiting["pending"]


def test_a_count_not_made_is_null_with_the_reason(home):
    local = send_json()
    assert local["local_only"] and local["pending"] is None
    assert "local-only" in local["pending_not_counted"]


def test_after_a_full_send_nothing_is_pending(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "a", "b"))
    bxmem_main("decide")
    done = send_json()
    assert (done["sent"], done["pending"], done["pending_not_counted"]) == (1, 0, None)
