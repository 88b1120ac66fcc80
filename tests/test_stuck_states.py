"""A way out of every stuck state, end to end against the fake Honcho: the
owner's `bxmem outbox list|drop|resend|reroute` and `bxmem audit --accept`,
what `sync` says before and after, and what the ledger keeps of it.

Each test names a state (a fixture or a helper below brings the home to it), the
owner's way out, and what holds after."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from helpers import bxmem_inprocess, honcho_config, ledger_events, register_secret, write_log
from runbook_lines import cites

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal

UNTRUSTED = [{"untrusted": True, "class": "public"}]


# --- the owner's commands, and what the fake Honcho holds ------------------------------------------


def load():
    return config_module.load()


def sync_json() -> tuple[int, dict]:
    result = bxmem_inprocess("sync", "--json")
    return result.returncode, json.loads(result.stdout)


def outbox(*args: str) -> tuple[int, dict]:
    result = bxmem_inprocess("outbox", *args, "--json")
    return result.returncode, json.loads(result.stdout)


def events(home, *kinds: str) -> list[dict]:
    return [e for e in ledger_events(home) if e["ev"] in kinds]


def listed() -> list[tuple[str, str]]:
    """`outbox list`: (item, state) of each."""
    code, shown = outbox("list")
    assert code == 0
    return [(i["item"], i["state"]) for i in shown["items"]]


def items_in(honcho, ws: str, session: str | None = None) -> list[str]:
    return [m["metadata"]["bxmem_item"] for m in honcho.messages_in(ws, session) if m["metadata"].get("part") == 0]


def touched(honcho, ws: str) -> list[str]:
    """Every request that named the workspace, creating it included."""
    return [
        f"{r.method} {r.path}"
        for r in honcho.requests
        if f"/workspaces/{ws}/" in r.path
        or r.path.endswith(f"/workspaces/{ws}")
        or (r.path == "/v3/workspaces" and isinstance(r.body, dict) and r.body.get("id") == ws)
    ]


# --- how a home gets stuck --------------------------------------------------------------------------


def talk(home, session: str, *turns: tuple[int, str, str], **kwargs) -> None:
    """The session's turns, logged and decided."""
    write_log(home, session, [line for n, said, reply in turns for line in turn_lines(n, said, reply, **kwargs)])
    decide.run(load())


def edit(home, n: str, entry: str, op: str = "identity_add") -> None:
    """An identity entry of user.md, journalled and mirrored."""
    write_journal(
        home, [{"id": n, "ts": "2026-09-27T10:00:00Z", "session": "s1", "op": op, "file": "user.md", "entry": entry}]
    )
    mirror.run(load())


def note(n: str, trust: str, entry: str) -> dict:
    """A note of the journal."""
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": "s1", "op": "note", "trust": trust, "entry": entry}


def delete_session(honcho, ws: str, session: str) -> None:
    """As the owner would, on the server: DELETE /v3/workspaces/{ws}/sessions/{session}."""
    import httpx

    assert httpx.delete(f"{honcho.url}/v3/workspaces/{ws}/sessions/{session}").status_code == 202


def trusted_renamed(url: str) -> str:
    """The configuration with the trusted workspace renamed: what was decided for bm0-trusted is held."""
    return honcho_config(url).replace('trusted = "bm0-trusted"', 'trusted = "bm0-home"')


def trusted_made_a_read_source(url: str, tmp_path) -> str:
    """The old trusted workspace listed as another agent's read source; the roles moved on."""
    key = tmp_path / "read.key"
    key.write_text(register_secret("read-key-for-old-trusted-5d1c") + "\n")
    os.chmod(key, 0o600)
    return (
        f'[honcho]\nurl = "{url}"\nagent = "boxmaker0"\nowner = "kyle"\n'
        'trusted = "bm0-untrusted"\nuntrusted = "bm0-untrusted-2"\nfleet = "fleet"\n'
        '[[honcho.read]]\nagent = "boxmaker9"\nworkspace = "bm0-trusted"\n'
        f'[secrets.honcho_read_boxmaker9]\nfile = "{key}"\n'
    )


# --- a Honcho session deleted on the server -----------------------------------------------


@pytest.fixture
def session_deleted(home, brokerd, honcho, configure):
    """Turns 1 and 2 sent in the Honcho session s, which the owner then deleted on the
    server; turns 3 and 4 decided for it."""
    configure(honcho.url)
    talk(home, "s", (1, "first", "one"), (2, "second", "two"))
    assert send.run(load()).sent == 2
    delete_session(honcho, "bm0-trusted", "s")
    talk(home, "s", (3, "third", "three"), (4, "fourth", "four"))
    return honcho


@pytest.fixture
def failed_with_the_session(home, session_deleted):
    """Turns 3, 4 and 5 of s failed because Honcho deleted their session."""
    bxmem_inprocess("-q", "send")
    talk(home, "s", (5, "fifth", "five"))
    bxmem_inprocess("-q", "send")
    return session_deleted


def test_a_deleted_session_fails_its_turns_with_one_warning(home, session_deleted):
    honcho = session_deleted
    asked = len(honcho.requests)
    first = bxmem_inprocess("-q", "send")
    # one request for the group, no retry one by one: a session Honcho lost holds for every turn
    assert len([r for r in honcho.requests[asked:] if r.path.endswith("/messages")]) == 1
    assert first.stderr.strip().splitlines() == [
        "bxmem send: warning: the Honcho session s in bm0-trusted is gone (HTTP 404: deleted on the server); its turns "
        "fail until the owner resends them" + cites("honcho-session-deleted")
    ]
    talk(home, "s", (5, "fifth", "five"))
    asked = len(honcho.requests)
    later = bxmem_inprocess("-q", "send")
    assert later.stderr == "" and not honcho.requests[asked:]  # failed here, quietly: said once already
    assert [(e["item"], e["status"]) for e in events(home, "failed")] == [
        ("turn:s:3", 404),
        ("turn:s:4", 404),
        ("turn:s:5", None),
    ]
    code, status = sync_json()
    assert code == 4
    assert (
        "3 item(s) failed because Honcho deleted their session: bxmem outbox resend sends them to a new one, bxmem "
        "outbox drop gives them up" + cites("honcho-session-deleted")
    ) in status["attention"]
    assert listed() == [("turn:s:3", "failed"), ("turn:s:4", "failed"), ("turn:s:5", "failed")]


def test_resend_opens_a_new_session_and_the_conversation_goes_on_there(home, failed_with_the_session):
    """Never to the deleted session again, where they would fail for good; the dry run says
    where they go and writes nothing; the new session is recorded once."""
    honcho = failed_with_the_session
    code, dry = outbox("resend", "--all-failed", "--dry-run")
    assert code == 0 and dry["written"] is False and len(dry["items"]) == 3
    assert dry["items"][0]["note"] == "its Honcho session s is gone: to a new session, s-2"
    assert not events(home, "requeued", "session_renewed")

    code, done = outbox("resend", "turn:s:3", "turn:s:4", "turn:s:5")
    assert code == 0 and done["written"] is True
    renewed = events(home, "session_renewed")
    assert [(e["ws"], e["session"], e["hsession"]) for e in renewed] == [("bm0-trusted", "s", "s")]  # once
    assert send.run(load()).sent == 3
    assert items_in(honcho, "bm0-trusted", "s-2") == ["turn:s:3", "turn:s:4", "turn:s:5"]
    talk(home, "s", (6, "sixth", "six"))
    send.run(load())
    assert items_in(honcho, "bm0-trusted", "s-2")[-1] == "turn:s:6"  # the session goes on in s-2
    assert not items_in(honcho, "bm0-trusted", "s")[2:]  # nothing written to the deleted one again


def test_what_went_with_a_deleted_session_is_missing_until_the_owner_accepts_the_loss(home, failed_with_the_session):
    assert outbox("resend", "--all-failed")[0] == 0 and send.run(load()).sent == 3
    audit = bxmem_inprocess("audit", "--json")
    assert audit.returncode == 4
    found = json.loads(audit.stdout)["discrepancies"]
    assert sorted((d["kind"], d["item"]) for d in found) == sorted(
        [("missing", "turn:s:1"), ("missing", "turn:s:1"), ("missing", "turn:s:2"), ("missing", "turn:s:2")]
    )
    code, status = sync_json()
    assert code == 4 and any(
        "bxmem audit found 4 missing" in line and "audit-missing" in line for line in status["attention"]
    )
    ids = [d["id"] for d in found]
    accept = bxmem_inprocess("audit", *[f"--accept={i}" for i in ids], "--reason", "deleted on purpose", "--json")
    assert accept.returncode == 0, accept.stderr
    assert [a["reason"] for a in json.loads(accept.stdout)["accepted"]] == ["deleted on purpose"] * 4
    assert bxmem_inprocess("audit").returncode == 0
    code, status = sync_json()
    assert code == 0 and status["audit"]["accepted"] == 4 and status["audit"]["discrepancies"] == {}


def test_an_edit_whose_session_was_deleted_is_resent_to_a_new_one(home, honcho, configure):
    """Honcho refused the edit's conclusion without saying the session is gone: resend
    names no new session, and the edit goes again."""
    configure(honcho.url)
    write_journal(
        home, [{"id": "a", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "tea"}]
    )
    mirror.run(load())
    send.run(load())
    delete_session(honcho, "bm0-trusted", "s")
    honcho.inject("status", match=r"/conclusions$", status=404)  # a conclusion in a deleted session: refused
    write_journal(
        home, [{"id": "b", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "jam"}]
    )
    mirror.run(load())
    send.run(load())
    assert [e["item"] for e in events(home, "failed")] == ["edit:b"]

    code, done = outbox("resend", "edit:b")
    assert code == 0 and "note" not in done["items"][0]
    assert send.run(load()).sent == 1
    assert sorted(c["content"] for c in honcho.conclusions_in("bm0-trusted")) == ["jam", "tea"]


# --- failed, dropped ----------------------------------------------------------------------


@pytest.fixture
def refused(home, brokerd, honcho, configure):
    """turn:s:1 failed: Honcho refused it (HTTP 422)."""
    configure(honcho.url)
    talk(home, "s", (1, "hello", "hi"))
    honcho.inject("status", match=r"/messages$", status=422)
    send.run(load())
    return honcho


def test_a_refused_item_is_dropped_with_the_reason_in_the_ledger(home, refused):
    assert sync_json()[0] == 4
    assert bxmem_inprocess("outbox", "drop", "turn:s:1").returncode == 2  # the reason is required

    code, done = outbox("drop", "turn:s:1", "--reason", "too big for the server")
    assert code == 0 and done["items"] == [{"item": "turn:s:1", "workspace": "bm0-trusted", "was": "failed"}]
    assert [(e["item"], e["was"], e["reason"]) for e in events(home, "dropped")] == [
        ("turn:s:1", "failed", "too big for the server")
    ]
    code, status = sync_json()
    assert code == 0 and status["dropped_items"] == 1 and status["failed"] == []
    assert "dropped by the owner: 1 item(s)" in bxmem_inprocess("sync").stdout
    send.run(load())
    assert not refused.messages  # dropped for good: never sent


def test_all_or_nothing_one_bad_item_writes_nothing(home, refused):
    before = ledger_events(home)
    assert bxmem_inprocess("outbox", "drop", "turn:s:1", "turn:s:9", "--reason", "x").returncode == 5
    assert ledger_events(home) == before


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("drop", "turn:nope:1", "--reason", "x"), 5, "no item 'turn:nope:1' in the ledger"),
        (
            ("drop", "turn:s:1", "--reason", "x"),
            6,
            "turn:s:1 is not in the outbox: it was sent, dropped, or decided to go nowhere",
        ),
        (("resend", "turn:s:2"), 6, "turn:s:2 has not failed (pending: on its way): only a failed item is sent again"),
        (("reroute", "turn:s:2"), 6, "turn:s:2 is pending (on its way): only a held or failed item is re-routed"),
        (
            ("drop", "turn:s:2", "--reason", "a\x1bb"),
            2,
            "outbox drop: --reason must be one line of at most 200 printable",
        ),
        (("drop", "--reason", "x"), 2, "outbox drop: name the items (ITEM...), or --all-failed or --all-held"),
    ],
)
def test_what_cannot_be_done_is_refused_and_nothing_is_written(home, brokerd, honcho, configure, args, code, says):
    """turn:s:1 sent, turn:s:2 pending."""
    configure(honcho.url)
    talk(home, "s", (1, "a", "b"))
    send.run(load())
    talk(home, "s", (2, "c", "d"))
    before = ledger_events(home)
    result = bxmem_inprocess("outbox", *args)
    assert result.returncode == code and says in result.stderr, result.stderr
    assert ledger_events(home) == before


def test_items_of_a_workspace_whose_key_is_refused_can_be_dropped_the_rest_wait_for_the_key(
    home, brokerd, honcho, configure, tmp_path
):
    key = tmp_path / "t.key"
    key.write_text(register_secret("not-the-key-for-bm0-trusted-1b") + "\n")
    os.chmod(key, 0o600)
    honcho.keys["bm0-trusted"] = register_secret("the-key-for-bm0-trusted-7e")
    configure(honcho.url, extra=f'[secrets.honcho_trusted]\nfile = "{key}"\n')
    talk(home, "s", (1, "a", "b"), (2, "c", "d"))
    assert bxmem_inprocess("send").returncode == 3
    assert listed() == [("turn:s:1", "stopped"), ("turn:s:2", "stopped")]

    code, done = outbox("drop", "turn:s:1", "--reason", "not wanted in Honcho")
    assert code == 0 and done["items"][0]["was"] == "stopped"
    key.write_text("the-key-for-bm0-trusted-7e\n")  # the owner fixes the key: the rest goes
    assert bxmem_inprocess("send").returncode == 0
    assert items_in(honcho, "bm0-trusted") == ["turn:s:2"]


def plant(honcho, kind: str) -> None:
    """What the server holds that bxmem cannot put right, of the audit finding `kind`."""
    with honcho.lock:
        if kind == "duplicate":  # a copy Honcho stored after bxmem had looked for it
            honcho.messages.append({**honcho.messages[0], "id": "copy-of-part-0"})
        elif kind == "foreign-agent-message":  # someone posting under this agent's peer
            honcho.messages.append({**honcho.messages[1], "id": "not-ours", "metadata": {}})
        else:  # a conclusion of the owner's peer bxmem never wrote
            honcho.conclusions["c-x"] = {
                "id": "c-x",
                "content": "made by hand",
                "observer_id": "kyle",
                "observed_id": "kyle",
                "session_id": "s",
                "workspace_id": "bm0-trusted",
                "created_at": "2026-12-01T00:00:00Z",
            }


@pytest.mark.parametrize("kind", ["duplicate", "foreign-agent-message", "unexpected-conclusion"])
def test_an_audit_finding_the_server_cannot_put_right_is_accepted_once_for_good(home, brokerd, honcho, configure, kind):
    configure(honcho.url)
    talk(home, "s", (1, "hello", "hi"))
    send.run(load())
    plant(honcho, kind)
    found = json.loads(bxmem_inprocess("audit", "--json").stdout)["discrepancies"]
    assert [d["kind"] for d in found] == [kind]
    code, status = sync_json()
    assert code == 4 and any(
        f"bxmem audit found 1 {kind} at " in line and f"audit-{kind}" in line for line in status["attention"]
    )

    assert bxmem_inprocess("audit", "--accept", found[0]["id"]).returncode == 2  # the reason is required
    assert bxmem_inprocess("audit", "--accept", f"{found[0]['id']}x", "--reason", "r").returncode == 5
    assert not events(home, "accepted")
    accepted = bxmem_inprocess("audit", "--accept", found[0]["id"], "--reason", "looked into: harmless")
    assert accepted.returncode == 0 and f"accepted: {found[0]['id']} (looked into: harmless)" in accepted.stdout
    assert bxmem_inprocess("audit").returncode == 0 and sync_json()[0] == 0


# --- in doubt ---------------------------------------------------------------------------------


def test_an_item_in_doubt_is_not_dropped_or_moved_until_send_has_looked(home, brokerd, honcho, configure, monkeypatch):
    from bxmem.honcho import api as honcho_module

    configure(honcho.url)
    talk(home, "s", (1, "first", "one"), (2, "second", "two"))
    monkeypatch.setattr(honcho_module, "READ_TIMEOUT", 0.3)
    honcho.inject("late", match=r"/sessions/s/messages$")
    send.run(load())
    code, shown = outbox("list")
    assert code == 0
    states = {i["item"]: i for i in shown["items"]}
    assert states["turn:s:1"]["state"] == "in-doubt" and "looked up at 20" in states["turn:s:1"]["why"]

    result = bxmem_inprocess("outbox", "drop", "turn:s:1", "--reason", "x")
    assert result.returncode == 6 and "it may be in Honcho already" in result.stderr
    honcho.release_late()


def test_a_failure_honcho_may_hold_is_shown_in_doubt_never_moved_and_resent_only_after_a_lookup(
    home, brokerd, honcho, configure
):
    from hostile_honcho import Attack, arm, disarm

    configure(honcho.url)
    talk(home, "s", (1, "hello there", "hi"))
    ids_it_cannot_use = Attack(
        "typed", r"POST .*/messages$", store=True, body=lambda sent: [{"id": 12345} for _ in sent["messages"]]
    )
    arm(honcho, ids_it_cannot_use)
    assert send.run(load(), clock=lambda: 1e6).failed == 1
    disarm(honcho)
    code, status = sync_json()
    assert code == 4 and [(f["item"], f["in_doubt"]) for f in status["failed"]] == [("turn:s:1", True)]
    assert (
        "1 failed item(s) Honcho may hold (its answer was not usable): bxmem outbox resend looks each up before "
        "sending anything, once the cause is fixed; or drop" + cites("honcho-send-refused")
    ) in status["attention"]
    assert "; Honcho may hold it: a resend looks it up first (at " in bxmem_inprocess("sync").stdout
    assert outbox("list")[1]["items"][0]["why"].endswith("; Honcho may hold it: a resend looks it up first")

    # Never moved: in Honcho in bm0-trusted perhaps, it would then be in two workspaces.
    configure(honcho.url).write_text(trusted_renamed(honcho.url))
    result = bxmem_inprocess("outbox", "reroute", "turn:s:1")
    assert result.returncode == 6 and "Honcho perhaps holding it" in result.stderr, result.stderr
    configure(honcho.url)
    assert outbox("resend", "turn:s:1")[0] == 0
    assert send.run(load(), clock=lambda: 1e6 + 1000).sent == 1
    assert len(honcho.messages_in("bm0-trusted")) == 2  # looked up: its two parts once, not sent again


# --- held by the configuration: re-routed, never towards trusted ------------------------------------


def test_a_renamed_workspace_holds_items_until_reroute_sends_them_where_their_role_is(
    home, brokerd, honcho, config_file
):
    config_file.write_text(honcho_config(honcho.url))
    talk(home, "s", (1, "hello", "hi"))
    config_file.write_text(trusted_renamed(honcho.url))
    assert bxmem_inprocess("send").returncode == 4
    code, shown = outbox("list")
    assert [(i["item"], i["state"], i["workspace"]) for i in shown["items"]] == [("turn:s:1", "held", "bm0-trusted")]

    code, dry = outbox("reroute", "--all-held", "--dry-run")
    assert code == 0 and dry["items"] == [
        {"item": "turn:s:1", "workspace": "bm0-trusted", "was": "held", "to": "bm0-home"}
    ]
    assert outbox("reroute", "--all-held")[0] == 0
    assert bxmem_inprocess("send").returncode == 0
    assert items_in(honcho, "bm0-home") == ["turn:s:1"] and not honcho.messages_in("bm0-trusted")
    assert bxmem_inprocess("audit").returncode == 0  # held where the owner sent it: not misrouted


def test_a_held_edit_rerouted_writes_its_conclusion_where_it_was_rerouted(home, honcho, config_file):
    config_file.write_text(honcho_config(honcho.url))
    write_journal(
        home, [{"id": "a", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "tea"}]
    )
    mirror.run(load())
    config_file.write_text(trusted_renamed(honcho.url))
    assert bxmem_inprocess("send").returncode == 4

    assert outbox("reroute", "edit:a")[0] == 0
    assert bxmem_inprocess("send").returncode == 0
    assert [c["content"] for c in honcho.conclusions_in("bm0-home")] == ["tea"]
    assert not honcho.conclusions_in("bm0-trusted")
    assert not [r for r in honcho.requests if "/workspaces/bm0-trusted" in r.path]


def test_swapped_roles_an_untrusted_item_goes_to_the_untrusted_workspace_never_to_trusted(
    home, brokerd, honcho, config_file
):
    config_file.write_text(honcho_config(honcho.url))
    brokerd.states["tainted"] = ("private", True)
    write_log(home, "tainted", turn_lines(1, "read a page", "ok"))
    talk(home, "clean", (1, "hello", "hi"))
    # The owner swaps the names: the old untrusted workspace is now the trusted one.
    swapped = honcho_config(honcho.url).replace(
        'trusted = "bm0-trusted"\nuntrusted = "bm0-untrusted"', 'trusted = "bm0-untrusted"\nuntrusted = "bm0-trusted"'
    )
    config_file.write_text(swapped)
    assert bxmem_inprocess("send").returncode == 4

    code, done = outbox("reroute", "--all-held")
    assert code == 0 and {(i["item"], i["to"]) for i in done["items"]} == {
        ("turn:tainted:1", "bm0-trusted"),
        ("turn:clean:1", "bm0-untrusted"),
    }  # each where its own role is now
    send.run(load())
    assert items_in(honcho, "bm0-trusted") == ["turn:tainted:1"]  # bm0-trusted is the untrusted workspace now
    assert items_in(honcho, "bm0-untrusted") == ["turn:clean:1"]
    assert {(e["item"], e["role"], e["was"], e["ws"]) for e in events(home, "rerouted")} == {
        ("turn:tainted:1", "untrusted", "bm0-untrusted", "bm0-trusted"),
        ("turn:clean:1", "trusted", "bm0-trusted", "bm0-untrusted"),
    }


def test_a_decision_without_a_role_to_check_is_not_rerouted_only_dropped(home, brokerd, honcho, config_file):
    """Held for a role-unknown decision (a damaged or hand-written ledger line): no role
    says where it may go, so it never moves; the owner can only drop it."""
    config_file.write_text(honcho_config(honcho.url))
    talk(home, "s", (1, "hello", "hi"))
    path = home / "memory" / "honcho.jsonl"
    path.write_text(path.read_text().replace('"role":"trusted"', '"role":"boss"'))
    (home / "memory" / "bxmem" / "outbox.marshal").unlink(missing_ok=True)

    result = bxmem_inprocess("outbox", "reroute", "turn:s:1")
    assert (
        result.returncode == 6 and "its decision records no role for bm0-trusted that can be checked" in result.stderr
    )
    assert outbox("drop", "turn:s:1", "--reason", "damaged line")[0] == 0


# --- held because a workspace of ours became a read source, and edits waiting behind a held one --------


def test_items_held_by_a_read_source_are_rerouted_where_their_role_is_now_never_to_the_read_source(
    home, brokerd, honcho, config_file, tmp_path
):
    config_file.write_text(honcho_config(honcho.url))
    write_log(home, "s-clean", turn_lines(1, "the owner's words", "a clean reply"))
    write_log(home, "s-web", turn_lines(1, "read that page", "the page says", results=UNTRUSTED))
    brokerd.states["s-web"] = ("private", True)
    write_journal(home, [note("n1", "trusted", "a trusted note")])
    decide.run(load())
    mirror.run(load())
    config_file.write_text(trusted_made_a_read_source(honcho.url, tmp_path))
    assert bxmem_inprocess("send").returncode == 4
    code, status = sync_json()
    assert code == 4
    assert {(h["workspace"], h["reason"]) for h in status["held"]} == {
        ("bm0-trusted", "read-source"),
        ("bm0-untrusted", "role-changed"),
    }
    code, shown = outbox("list")
    assert {(i["item"], i["state"], i["why"].split(":")[0]) for i in shown["items"]} == {
        ("turn:s-clean:1", "held", "read-source"),
        ("edit:n1", "held", "read-source"),
        ("turn:s-web:1", "held", "role-changed"),
    }

    code, done = outbox("reroute", "--all-held")
    assert code == 0, done
    assert {(i["item"], i["to"]) for i in done["items"]} == {
        ("turn:s-clean:1", "bm0-untrusted"),
        ("edit:n1", "bm0-untrusted"),
        ("turn:s-web:1", "bm0-untrusted-2"),
    }
    assert bxmem_inprocess("send").returncode == 0
    assert touched(honcho, "bm0-trusted") == []  # the read source: nothing, with any key
    assert items_in(honcho, "bm0-untrusted") == ["turn:s-clean:1"]  # trusted now
    assert [c["content"] for c in honcho.conclusions_in("bm0-untrusted")] == ["a trusted note"]
    assert items_in(honcho, "bm0-untrusted-2") == ["turn:s-web:1"]  # the untrusted turn stays untrusted
    assert sync_json()[0] == 0


def test_a_reroute_never_targets_a_workspace_the_write_rule_refuses(home, brokerd, honcho, config_file, monkeypatch):
    """Belt and braces: should the configuration ever give a role a workspace the write
    rule refuses (a read source), the re-route is refused, nothing written."""
    from bxmem.commands import outbox_actions

    config_file.write_text(honcho_config(honcho.url))
    talk(home, "s", (1, "hello", "hi"))
    config_file.write_text(trusted_renamed(honcho.url))
    real = outbox_actions.checked_against

    def with_read_source(config, box):
        now = real(config, box)
        return dataclasses.replace(now, roles={**now.roles, "bm0-home": "read:boxmaker9"})

    monkeypatch.setattr(outbox_actions, "checked_against", with_read_source)
    before = ledger_events(home)
    result = bxmem_inprocess("outbox", "reroute", "turn:s:1")
    assert result.returncode == 6
    assert "cannot be re-routed to bm0-home: bm0-home is now configured as a read source" in result.stderr
    assert ledger_events(home) == before


def test_an_undo_waiting_behind_a_held_edit_goes_once_that_edit_is_rerouted(home, brokerd, honcho, config_file):
    """The add was decided for the old trusted workspace, its undo under the new
    configuration: the undo writes only where it may, but names a held edit, so it
    waits behind it (never moved alone); re-routing the add lets both go, in order."""
    from bxmem.commands import undo

    config_file.write_text(honcho_config(honcho.url))
    edit(home, "a1", "alpha")
    config_file.write_text(trusted_renamed(honcho.url))
    undone = undo.run(load(), "a1")
    assert send.run(load()).sent == 0
    code, shown = outbox("list")
    states = {i["item"]: i["why"].split(":")[0] for i in shown["items"]}
    behind = [k for k, why in states.items() if why == "behind-held-edit"]
    assert states["edit:a1"] == "not-configured" and len(behind) == 1, shown
    assert undone is not None

    result = bxmem_inprocess("outbox", "reroute", behind[0])
    assert result.returncode == 6 and "waits behind it" in result.stderr
    assert outbox("reroute", "edit:a1")[0] == 0
    assert bxmem_inprocess("send").returncode == 0
    # the add and its undo, let go together: nothing to write (never written, then deleted)
    assert honcho.conclusions_in("bm0-home") == [] and honcho.conclusions_in("bm0-trusted") == []
    assert outbox("list")[1]["items"] == []
    assert not [r for r in honcho.requests if "/workspaces/bm0-trusted" in r.path]
    code, status = sync_json()
    assert code == 0 and status["held"] == []


def test_held_items_are_dropped_with_the_reason_and_the_rest_go(home, brokerd, honcho, config_file, tmp_path):
    config_file.write_text(honcho_config(honcho.url))
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    talk(home, "t", (1, "later", "ok"))
    config_file.write_text(trusted_made_a_read_source(honcho.url, tmp_path))
    assert bxmem_inprocess("send").returncode == 4

    code, dropped = outbox("drop", "turn:s:1", "--reason", "that workspace is boxmaker9's now")
    assert code == 0 and [(i["item"], i["was"]) for i in dropped["items"]] == [("turn:s:1", "held")]
    assert [(e["item"], e["reason"]) for e in events(home, "dropped")] == [
        ("turn:s:1", "that workspace is boxmaker9's now")
    ]
    code, status = sync_json()
    assert code == 4 and [(h["workspace"], h["turns"]) for h in status["held"]] == [("bm0-trusted", 1)]  # turn:t:1
    assert outbox("drop", "--all-held", "--reason", "gone")[0] == 0
    assert bxmem_inprocess("send").returncode == 0 and touched(honcho, "bm0-trusted") == []
    assert sync_json()[0] == 0


# --- what sync and outbox list print of the ledger ------------------------------------------------


def test_what_sync_and_outbox_list_print_from_the_ledger_goes_through_shown(home, brokerd, honcho, configure):
    """A damaged or forged ledger line (its reason, workspace, time) cannot print an ESC,
    a line break that forges an `attention:` line, or a bidi override."""
    from bxmem.store.ledger import Ledger

    configure(honcho.url)
    talk(home, "s", (1, "hello", "hi"))
    forged = "refused\x1b[2J\nattention: all clear \u202e"
    Ledger(home / "memory" / "honcho.jsonl").append(
        [
            {
                "v": 1,
                "ev": "failed",
                "ts": "2026-12-01T10:00:00Z\nattention: forged",
                "item": "turn:s:1",
                "ws": "bm0-trusted\x1b[31m",
                "status": 400,
                "reason": forged,
            }
        ]
    )
    for args in (("sync",), ("outbox", "list"), ("sync", "--json"), ("outbox", "list", "--json")):
        out = bxmem_inprocess(*args).stdout
        assert "\x1b" not in out and "\u202e" not in out, args
        assert not [line for line in out.splitlines() if "forged" in line or line.startswith("attention: all clear")], (
            args
        )
    code, status = sync_json()
    assert code == 4
    assert status["failed"][0]["workspace"] == "(invalid id)" and status["failed"][0]["when"] is None
    assert "\n" not in status["failed"][0]["reason"]


# --- the runbook: an entry for each stuck state and each audit finding ---------------------------


def test_every_audit_finding_and_stuck_state_has_an_entry_naming_what_sync_shows_and_the_way_out():
    import ast

    from helpers import ROOT

    from bxmem.commands import audit
    from bxmem.runbooks import ENTRIES

    tree = ast.parse((ROOT / "bxmem" / "commands" / "audit.py").read_text())
    added = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "add"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert added == set(audit.KINDS)
    stuck = {
        "honcho-session-deleted": "bxmem outbox resend",
        "honcho-send-refused": "bxmem outbox drop",
        "honcho-held-by-config": "bxmem outbox reroute",
        "honcho-key-refused": "bxmem outbox drop",
        "honcho-in-doubt": "bxmem send",
        "honcho-unreachable": "bxmem send",
        "broker-state-unavailable": "bxmem decide",
    }
    for kind in audit.KINDS:
        stuck[f"audit-{kind}"] = "bxmem audit --accept"
    for entry, way_out in stuck.items():
        assert entry in ENTRIES
        text = (ROOT / "runbook" / f"{entry}.md").read_text()
        assert "`bxmem sync`" in text and way_out in text, entry
