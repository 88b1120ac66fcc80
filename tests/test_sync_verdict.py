"""`bxmem sync` opens with one verdict line: all clear, what waits on Honcho or brokerd,
or what needs attention first (sync.URGENCY); `outbox list` never says "nothing is
stuck" while Honcho is down, but the outage and what waits behind it."""

from __future__ import annotations

import json
import time

import pytest
from helpers import bxmem_inprocess, bxmem_main, write_log
from runbook_lines import cites

from bxmem.commands import decide, sync
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines


def load():
    return config_module.load()


def both() -> tuple[int, dict, list[str]]:
    report = bxmem_inprocess("sync", "--json")
    text = bxmem_inprocess("sync")
    assert report.returncode == text.returncode
    return report.returncode, json.loads(report.stdout), text.stdout.splitlines()


def test_all_clear_says_what_answered(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    send.run(load())
    code, report, lines = both()
    assert code == 0 and report["verdict"] == {
        "state": "clear",
        "runbook": None,
        "line": "all clear: nothing needs attention (brokerd and Honcho answered just now)",
    }
    assert lines[0] == report["verdict"]["line"]
    assert lines[1:] == sync.lines(report)[1:] or lines[1] == f"Honcho: {honcho.url}"  # the rest as before


def test_the_rest_of_the_output_is_unchanged_after_the_verdict(home, configure):
    configure("http://127.0.0.1:9")
    report = sync.status(load(), check=False)
    assert sync.lines(report)[0] == report["verdict"]["line"]
    assert sync.lines(report)[1:3] == ["Honcho: http://127.0.0.1:9", "Honcho now: not checked: sync ran without checks"]
    assert "verdict" in report and set(report) - {"verdict"} == {  # and the schema's version (bxmem schema sync)
        "schema",
        "mode",
        "honcho_url",
        "workspaces",
        "held",
        "reused",
        "failed",
        "keys_refused",
        "outage",
        "broker",
        "logs_unreadable",
        "log_lines_out_of_order",
        "decided_nowhere",
        "decided_local_only",
        "checks",
        "keys",
        "sent_items",
        "last_sent",
        "in_doubt",
        "dropped_items",
        "audit",
        "ledger_malformed_lines",
        "ledger_repeated_decisions",
        "attention",
        "warnings",
        "future_times",
        "artifacts",
    }


def test_pending_items_on_their_way_are_still_all_clear(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "more", "ok"))
    decide.run(load())
    code, _report, lines = both()
    assert (
        code == 0
        and lines[0]
        == "all clear: nothing needs attention, 2 item(s) on their way (brokerd and Honcho answered just now)"
    )


def test_a_short_outage_is_waiting_not_attention(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    honcho.stop()
    assert bxmem_main("send").returncode == 3
    code, report, lines = both()
    assert (
        code == 0 and report["verdict"]["state"] == "waiting" and report["verdict"]["runbook"] == "honcho-unreachable"
    )
    assert lines[0].startswith("nothing needs attention yet; waiting: Honcho unreachable since ")
    assert ", next try at " in lines[0] and lines[0].endswith("; 1 item(s) wait")


def test_the_most_urgent_comes_first_whatever_order_they_were_found_in(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    write_log(home, "t", turn_lines(1, "fetch", "ok", results=[{"untrusted": True, "class": "public"}]))
    decide.run(load())
    honcho.inject("status", match=r"bm0-untrusted/sessions/[^/]+/messages$", status=422)
    send.run(load())
    code, _report, lines = both()
    assert code == 4 and lines[0] == (
        "needs attention: 1 failed item(s): bxmem outbox resend or drop them once the cause "
        "is fixed" + cites("honcho-send-refused")
    )
    write_log(home, "s", turn_lines(2, "more", "ok"))
    decide.run(load())
    honcho.stop()
    assert bxmem_main("send").returncode == 3
    later = sync.status(load(), now=time.time() + 700, check=False)
    # A long outage stops every send: it comes before a failed item, which was found first.
    assert later["attention"][0].startswith("1 failed item(s)")
    assert later["verdict"]["line"] == (
        "needs attention (2 things, the most urgent first): Honcho unreachable for over "
        "10 minutes" + cites("honcho-unreachable")
    )
    assert later["verdict"]["runbook"] == "honcho-unreachable"


def test_every_attention_kind_has_its_place_in_the_order():
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(sync.status)))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "need"]
    kinds = {call.args[0].value for call in calls if isinstance(call.args[0], ast.Constant)} | {"reused"}
    assert len(calls) >= 6 and kinds == set(sync.URGENCY)


@pytest.mark.parametrize("state", ["clear", "waiting", "attention"])
def test_the_verdict_is_the_first_line_on_a_terminal_too(home, configure, state):
    import io

    from rich.console import Console

    from bxmem.cli import output

    configure("http://127.0.0.1:9")
    report = sync.status(load(), check=False)
    report["verdict"] = {"state": state, "line": f"{state} [red]line[/red]", "runbook": None}
    buffer = io.StringIO()
    output.render_sync(report, Console(file=buffer, force_terminal=True, color_system=None, width=400))
    assert buffer.getvalue().splitlines()[0] == f"{state} [red]line[/red]"


# --- outbox list during an outage ---------------------------------------------------------------


def test_outbox_list_names_the_outage_and_what_waits_behind_it(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "more", "ok"))
    write_log(home, "t", turn_lines(1, "fetch", "ok", results=[{"untrusted": True, "class": "public"}]))
    decide.run(load())
    assert bxmem_inprocess("outbox", "list").stdout == "nothing is stuck: every item in the outbox is on its way\n"
    honcho.stop()
    assert bxmem_main("send").returncode == 3
    listed = bxmem_inprocess("outbox", "list")
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and "nothing is stuck" not in listed.stdout
    assert lines[0].startswith("outage: Honcho unreachable since ")
    assert "; next try at " in lines[0] and lines[0].endswith(
        "3 item(s) wait behind it (bm0-trusted 2, bm0-untrusted 1), and go by themselves once Honcho answers"
        + cites("honcho-unreachable")
    )
    assert lines[1:] == ["nothing else is stuck: no item failed, is held or is in doubt"]
    document = json.loads(bxmem_inprocess("outbox", "list", "--json").stdout)
    assert document["items"] == [] and document["outage"]["waiting"] == 3
    assert document["outage"]["waiting_by_workspace"] == {"bm0-trusted": 2, "bm0-untrusted": 1}
    every = bxmem_inprocess("outbox", "list", "--all").stdout.splitlines()
    assert every[0] == lines[0] and len(every) == 4
    assert all(
        "waits for Honcho, unreachable since " in line and line.endswith("; goes by itself once Honcho answers")
        for line in every[1:]
    )


def test_outbox_list_without_an_outage_has_none(home, configure):
    configure("http://127.0.0.1:9")
    document = json.loads(bxmem_inprocess("outbox", "list", "--json").stdout)
    assert document == {"schema": "bxmem.outbox/1", "action": "list", "items": [], "outage": None}
