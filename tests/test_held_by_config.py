"""A decision's workspace and role hold at send time: a changed configuration
holds items (never sends them elsewhere), and nothing is ever written to a
workspace that is not one of this agent's three write workspaces."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from helpers import bxmem_inprocess, bxmem_main, honcho_config, ledger_events, register_secret, write_log

from bxmem.commands import audit as audit_module
from bxmem.commands import decide, mirror, sync, undo
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.trust.write_policy import (
    BEHIND_HELD_EDIT,
    NOT_CONFIGURED,
    PEER_IS_THE_AGENT,
    PEER_LIKE_THE_OWNER,
    PEER_NOT_A_NAME,
    READ_SOURCE,
    ROLE_CHANGED,
    ROLE_UNKNOWN,
    WORKSPACE_REUSED,
    Now,
    check_write,
    hold_pending,
    roles_of,
    writes_of,
)

UNTRUSTED = [{"untrusted": True, "class": "public"}]


def load():
    return config_module.load()


def note(n: str, trust: str, entry: str, op: str = "note", session: str = "s1") -> dict:
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": session, "op": op, "trust": trust, "entry": entry}


def add(n: str, entry: str) -> dict:
    return {
        "id": n,
        "ts": "2026-09-27T10:00:00Z",
        "session": "s1",
        "op": "identity_add",
        "file": "user.md",
        "entry": entry,
    }


def remove(n: str, entry: str) -> dict:
    return {**add(n, entry), "op": "identity_remove"}


def touched(honcho, ws: str) -> list[str]:
    """Every request that named `ws`: in its path, or as the id it creates."""
    out = []
    for r in honcho.requests:
        if (
            r.path.startswith(f"/v3/workspaces/{ws}/")
            or r.path == f"/v3/workspaces/{ws}"
            or (r.path == "/v3/workspaces" and isinstance(r.body, dict) and r.body.get("id") == ws)
        ):
            out.append(f"{r.method} {r.path}")
    return out


def swapped(url: str, tmp_path, read_key: str = "read-key-for-old-trusted-5d1c") -> str:
    """The owner's mistake: the old untrusted workspace made trusted, and the old
    trusted one listed as another agent's read source, with a read key."""
    key = tmp_path / "read.key"
    key.write_text(register_secret(read_key) + "\n")
    os.chmod(key, 0o600)
    return (
        f'[honcho]\nurl = "{url}"\nagent = "boxmaker0"\nowner = "kyle"\n'
        'trusted = "bm0-untrusted"\nuntrusted = "bm0-untrusted-2"\nfleet = "fleet"\n'
        '[[honcho.read]]\nagent = "boxmaker9"\nworkspace = "bm0-trusted"\n'
        f'[secrets.honcho_read_boxmaker9]\nfile = "{key}"\n'
    )


# --- the rule, as a table -------------------------------------------------------------

ROLES = roles_of([("trusted", "t"), ("untrusted", "u"), ("fleet", "f"), ("read:other", "r")])
NOW = Now(ROLES, {}, "boxmaker0", "kyle")


@pytest.mark.parametrize(
    ("ws", "role", "reason"),
    [
        ("t", "trusted", None),
        ("u", "untrusted", None),
        ("f", "fleet", None),
        ("r", "trusted", READ_SOURCE),
        ("r", "untrusted", READ_SOURCE),
        ("r", None, READ_SOURCE),
        ("gone", "trusted", NOT_CONFIGURED),
        (None, "trusted", NOT_CONFIGURED),
        (42, "trusted", NOT_CONFIGURED),
        ("t", "untrusted", ROLE_CHANGED),
        ("u", "trusted", ROLE_CHANGED),
        ("f", "trusted", ROLE_CHANGED),
        ("t", "fleet", ROLE_CHANGED),
        ("t", None, ROLE_UNKNOWN),
        ("t", "read:other", ROLE_UNKNOWN),
        ("u", "", ROLE_UNKNOWN),
        ("f", ["fleet"], ROLE_UNKNOWN),
    ],
)
def test_the_rule_row_by_row(ws, role, reason):
    held = check_write(ws, role, ROLES)
    assert (held.reason if held else None) == reason
    if held:
        assert held.explain() and (held.workspace == ws if isinstance(ws, str) else held.workspace is None)


def test_an_edit_is_held_by_what_it_deletes_and_edits_naming_it_wait_behind_it():
    conclusions = {"edit:a#0": {"ws": "r", "id": "c1"}, "edit:b#0": {"ws": "t", "id": "c2"}}
    fleet = {"edit:n#0": {"ws": "old-fleet", "ids": ["m"]}}
    decisions: dict[str, dict[str, Any]] = {
        "edit:x": {"kind": "edit", "ws": "t", "role": "trusted", "actions": [{"do": "unconclude", "of": "edit:b#0"}]},
        "edit:y": {"kind": "edit", "ws": "t", "role": "trusted", "actions": [{"do": "unconclude", "of": "edit:a#0"}]},
        "edit:z": {"kind": "edit", "ws": "t", "role": "trusted", "actions": [{"do": "conclude"}]},
        "edit:u": {
            "kind": "edit",
            "ws": "t",
            "role": "trusted",
            "target": "edit:y",
            "actions": [{"do": "reconclude", "of": "edit:a#0", "undoes": "edit:y#0"}],
        },
        "edit:v": {"kind": "edit", "ws": "t", "role": "trusted", "target": "edit:u", "actions": []},
        "edit:w": {"kind": "edit", "ws": "f", "role": "fleet", "actions": [{"do": "retract", "of": "edit:n#0"}]},
    }
    assert writes_of(decisions["edit:y"], conclusions, fleet) == [("t", "trusted"), ("r", "trusted")]
    assert writes_of(decisions["edit:w"], conclusions, fleet) == [("f", "fleet"), ("old-fleet", "fleet")]
    pending = [
        ("edit:x", "t", "trusted", "edit", None),
        ("turn:s:1", "u", "untrusted", "turn", "ana"),
        ("edit:y", "t", "trusted", "edit", None),
        ("turn:s:2", "t", "trusted", "turn", "ana"),
        ("edit:z", "t", "trusted", "edit", None),
        ("edit:u", "t", "trusted", "edit", None),
        ("edit:v", "t", "trusted", "edit", None),
    ]
    holds = hold_pending(pending, NOW, decisions.__getitem__, conclusions, fleet)
    # y deletes a conclusion in a read source; u undoes y (and writes in the read source
    # too); v undoes u. x and z name nothing held: they go.
    assert {k: v.reason for k, v in holds.held.items()} == {
        "edit:y": READ_SOURCE,
        "edit:u": READ_SOURCE,
        "edit:v": BEHIND_HELD_EDIT,
    }
    alone = hold_pending([("edit:w", "f", "fleet", "edit", None)], NOW, decisions.__getitem__, conclusions, fleet)
    assert alone.held["edit:w"].reason == NOT_CONFIGURED and alone.held["edit:w"].workspace == "old-fleet"


def test_the_runbook_explains_every_held_reason():
    from helpers import ROOT

    text = (ROOT / "runbook" / "honcho-held-by-config.md").read_text()
    for reason in (
        READ_SOURCE,
        NOT_CONFIGURED,
        ROLE_CHANGED,
        ROLE_UNKNOWN,
        BEHIND_HELD_EDIT,
        WORKSPACE_REUSED,
        PEER_IS_THE_AGENT,
        PEER_LIKE_THE_OWNER,
        PEER_NOT_A_NAME,
    ):
        assert f"| `{reason}` |" in text, reason


# --- the owner's mistake, end to end --------------------------------------------------


@pytest.fixture
def waiting(home, brokerd, honcho, configure):
    """A clean turn, an untrusted turn, a trusted note and an untrusted note, decided
    under the first configuration and not yet sent."""
    configure(honcho.url)
    write_log(home, "s-clean", turn_lines(1, "the owner's words", "a clean reply"))
    write_log(home, "s-web", turn_lines(1, "read that page", "the page says", results=UNTRUSTED))
    write_journal(home, [note("n1", "trusted", "a trusted note"), note("n2", "untrusted", "an untrusted note")])
    decide.run(load())
    mirror.run(load())
    return home


def test_a_swapped_configuration_sends_nothing_anywhere_it_was_not_decided_for(waiting, honcho, config_file, tmp_path):
    config_file.write_text(swapped(honcho.url, tmp_path))
    result = bxmem_inprocess("send", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 4, result.stderr

    # Nothing at all reached the read source (no setup, no message, no conclusion,
    # with any key), and the untrusted turn is not in what is now the trusted workspace.
    assert touched(honcho, "bm0-trusted") == []
    assert honcho.messages_in("bm0-untrusted") == [] and honcho.conclusions_in("bm0-untrusted") == []
    assert not any("read-key-for-old-trusted" in json.dumps(r.headers) for r in honcho.requests)
    # What may still go, went: the untrusted note is in the fleet, which is still the fleet.
    assert [m["metadata"]["bxmem_item"] for m in honcho.messages_in("fleet")] == ["edit:n2"]

    held = {
        (g["workspace"], g["role"], g["now"], g["reason"], g["turns"], g["edits"]) for g in report["held_by_config"]
    }
    assert held == {
        ("bm0-trusted", "trusted", "read:boxmaker9", READ_SOURCE, 1, 1),
        ("bm0-untrusted", "untrusted", "trusted", ROLE_CHANGED, 1, 0),
    }
    assert "runbook honcho-held-by-config" in result.stderr and "the owner's words" not in result.stderr
    kinds = {e["ev"] for e in ledger_events(waiting)} - {"decided", "created"}
    assert kinds <= {"attempt", "sent"}  # held: nothing failed, nothing cancelled

    code, status = sync_json()
    assert code == 4
    assert {(g["workspace"], g["role"], g["reason"], g["turns"] + g["edits"]) for g in status["held"]} == {
        ("bm0-trusted", "trusted", READ_SOURCE, 2),
        ("bm0-untrusted", "untrusted", ROLE_CHANGED, 1),
    }
    assert set(status["workspaces"]) == {"bm0-untrusted", "bm0-untrusted-2", "fleet"}
    assert all(ws["pending_turns"] == ws["pending_edits"] == 0 for ws in status["workspaces"].values())
    assert len([a for a in status["attention"] if "honcho-held-by-config" in a]) == 2
    text = bxmem_inprocess("sync").stdout.splitlines()
    assert (
        "held: 1 turn(s) and 0 edit(s) that would write to bm0-untrusted as untrusted (role-changed): bm0-untrusted "
        "is now this agent's trusted workspace, not its untrusted one; oldest turn:s-web:1"
    ) in [t.rsplit(" (", 1)[0] for t in text]
    assert any(
        t.startswith("attention: 2 item(s) held that would write to bm0-trusted as trusted (read-source)") for t in text
    )

    # A second run changes nothing; a timer's run (the idle fast path) does not spin
    # on held items: it answers at once, until the ledger or the configuration changes,
    # with the status the real run had (the exit status never depends on the terminal).
    before = len(honcho.requests)
    assert bxmem_inprocess("send").returncode == 4
    assert touched(honcho, "bm0-trusted") == [] and len(honcho.requests) == before
    timer = bxmem_main("send")
    assert (timer.returncode, timer.stderr, len(honcho.requests)) == (4, "", before)
    config_file.write_text(config_file.read_text() + "\n")  # a changed configuration: the real job runs again
    assert bxmem_main("send").returncode == 4


def test_putting_the_configuration_back_releases_them_where_they_were_decided(
    waiting, honcho, config_file, configure, tmp_path
):
    config_file.write_text(swapped(honcho.url, tmp_path))
    send.run(load())
    configure(honcho.url)
    report = send.run(load())
    assert report.held_by_config == [] and report.exit_code == 0
    assert [m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-trusted")] == ["turn:s-clean:1"] * 2
    assert [m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-untrusted")] == ["turn:s-web:1"] * 2
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["a trusted note"]
    assert sync_json()[0] == 0


def test_a_renamed_workspace_holds_its_items_and_needs_attention(waiting, honcho, config_file):
    config_file.write_text(honcho_config(honcho.url).replace('trusted = "bm0-trusted"', 'trusted = "bm0-trusted-v2"'))
    report = send.run(load())
    assert report.exit_code == 4
    assert [(g["workspace"], g["reason"], g["now"], g["turns"], g["edits"]) for g in report.held_by_config] == [
        ("bm0-trusted", NOT_CONFIGURED, None, 1, 1)
    ]
    assert touched(honcho, "bm0-trusted") == [] and touched(honcho, "bm0-trusted-v2") == []
    code, status = sync_json()
    assert code == 4 and status["held"][0]["reason"] == NOT_CONFIGURED
    assert "bm0-trusted" not in status["workspaces"]  # no "(not configured any more)" row counting it as pending


def test_local_only_after_honcho_holds_what_was_decided_for_it(waiting, configure):
    configure(None)
    code, status = sync_json()
    assert code == 4 and sum(g["turns"] + g["edits"] for g in status["held"]) == 4
    assert {g["reason"] for g in status["held"]} == {NOT_CONFIGURED}


def test_a_remove_of_a_conclusion_in_a_workspace_now_read_is_held_and_the_undo_waits_behind_it(
    home, brokerd, honcho, configure, config_file, tmp_path
):
    configure(honcho.url)
    write_journal(home, [add("a1", "alpha")])
    mirror.run(load())
    send.run(load())
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["alpha"]
    config_file.write_text(swapped(honcho.url, tmp_path))
    write_journal(home, [remove("r1", "alpha"), add("a2", "beta")])
    mirror.run(load())
    preview = undo.run(load(), "a1", dry_run=True)
    assert any("but not now" in e and "bm0-trusted is now configured as a read source" in e for e in preview.effects)
    before = len(honcho.requests)
    report = send.run(load())
    assert not [r for r in honcho.requests[before:] if r.method == "DELETE" or "bm0-trusted" in r.path]
    assert [(g["oldest"], g["reason"]) for g in report.held_by_config] == [("edit:r1", READ_SOURCE)]
    # beta names nothing held: it goes to what is now the trusted workspace, as decided.
    assert [c["content"] for c in honcho.conclusions_in("bm0-untrusted")] == ["beta"]
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["alpha"]
    undo.run(load(), "r1")  # its undo writes the conclusion again there: held too
    report = send.run(load())
    assert [(g["oldest"], g["reason"], g["edits"]) for g in report.held_by_config] == [("edit:r1", READ_SOURCE, 2)]


def test_a_retraction_beside_a_note_in_a_renamed_fleet_is_held(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_journal(home, [note("n1", "untrusted", "a fleet note")])
    mirror.run(load())
    send.run(load())
    config_file.write_text(honcho_config(honcho.url).replace('fleet = "fleet"', 'fleet = "fleet-2"'))
    undo.run(load(), "n1")
    report = send.run(load())
    assert [(g["workspace"], g["reason"]) for g in report.held_by_config] == [("fleet", NOT_CONFIGURED)]
    assert [m["content"] for m in honcho.messages_in("fleet")] == ["a fleet note"]
    assert touched(honcho, "fleet-2") == []


def test_an_in_doubt_item_whose_workspace_became_a_read_source_is_not_even_looked_up(
    waiting, honcho, config_file, tmp_path
):
    from bxmem.honcho import api as honcho_module

    honcho.inject("store-then-drop", match=r"/sessions/s-clean/messages$")
    send.run(load())
    assert any(e["ev"] == "attempt" and e["items"] == ["turn:s-clean:1"] for e in ledger_events(waiting))
    config_file.write_text(swapped(honcho.url, tmp_path))
    before = len(honcho.requests)
    report = send.run(load(), clock=lambda: 2e10 + honcho_module.READ_TIMEOUT)  # long past the in-doubt wait
    assert ("bm0-trusted", READ_SOURCE) in {(g["workspace"], g["reason"]) for g in report.held_by_config}
    assert not [r for r in honcho.requests[before:] if "bm0-trusted/" in r.path or r.path.endswith("bm0-trusted")]


def test_the_client_itself_refuses_a_workspace_that_is_not_ours(waiting, honcho, config_file, tmp_path):
    config_file.write_text(swapped(honcho.url, tmp_path))
    from bxmem.commands.send.report import SendReport
    from bxmem.commands.send.runner import Sender
    from bxmem.store.ledger import Ledger
    from bxmem.store.outbox import Outbox

    config = load()
    ledger = Ledger(config.paths.ledger)
    sender = Sender(config, Outbox.load(config.paths.ensure_state_dir(), ledger), ledger, SendReport())
    try:
        for ws in ("bm0-trusted", "someone-elses", "bm0-untrusted-3"):
            with pytest.raises(RuntimeError, match="does not write to"):
                sender.client(ws)
        assert sender.client("bm0-untrusted").workspace == "bm0-untrusted"
    finally:
        sender.close()
    assert touched(honcho, "bm0-trusted") == []


def test_audit_reads_only_this_agents_workspaces_and_says_what_it_left(
    waiting, honcho, configure, config_file, tmp_path
):
    send.run(load())  # everything sent under the first configuration
    config_file.write_text(swapped(honcho.url, tmp_path))
    before = len(honcho.requests)
    report = audit_module.audit(load())
    assert not [r for r in honcho.requests[before:] if "bm0-trusted" in r.path]
    assert (
        report.not_audited["bm0-trusted"]["items"] == 2 and report.not_audited["bm0-trusted"]["now"] == "read:boxmaker9"
    )
    # The untrusted turn now sits in what the configuration calls trusted: the fleet must be told.
    assert ("role-changed", "turn:s-web:1") in {(d["kind"], d.get("item")) for d in report.discrepancies}
    assert report.exit_code == 4
    assert any(line.startswith("not audited: 2 item(s) sent to bm0-trusted") for line in report.lines())


def test_a_decision_with_a_damaged_workspace_or_role_is_held_not_sent_and_stops_nothing(
    home, brokerd, honcho, configure
):
    from bxmem.store.ledger import Ledger

    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "again", "yes") + turn_lines(3, "more", "ok"))
    decide.run(load())
    lines = [json.loads(line) for line in (home / "memory" / "honcho.jsonl").read_text().splitlines()]
    (home / "memory" / "honcho.jsonl").write_text("")  # the same decisions, two of them damaged
    for ev in lines:
        if ev.get("item") == "turn:s:1":
            ev["ws"] = ["bm0-trusted"]
        elif ev.get("item") == "turn:s:2":
            del ev["role"]
    Ledger(home / "memory" / "honcho.jsonl").append(lines)
    report = send.run(load())
    assert report.exit_code == 4
    assert {(g["reason"], g["oldest"]) for g in report.held_by_config} == {
        (NOT_CONFIGURED, "turn:s:1"),
        (ROLE_UNKNOWN, "turn:s:2"),
    }
    assert [m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-trusted")] == ["turn:s:3"] * 2
    code, status = sync_json()
    assert code == 4 and len(status["held"]) == 2


def sync_json():
    result = bxmem_inprocess("sync", "--json")
    return result.returncode, json.loads(result.stdout)


def test_sync_says_held_in_both_forms_without_checks(waiting, honcho, config_file, tmp_path):
    config_file.write_text(swapped(honcho.url, tmp_path))
    status = sync.status(load(), check=False)
    assert sync.exit_code(status) == 4
    assert [line for line in sync.lines(status) if line.startswith("held: ")]
