"""`bxmem mirror`, `send` and `undo` for memory writes: each row of the seed's table."""

from __future__ import annotations

import json

import pytest
from helpers import bxmem_main, decisions, ledger_events, write_log

from bxmem.commands import decide, mirror, undo
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.errors import NotFound, Refused
from bxmem.honcho.api import settle_wait_s


def load():
    return config_module.load()


def sync():
    mirror.run(load())
    for _ in range(10):
        report = send.run(load())
        if not report.sent and not report.failed:
            return


def conclusions(honcho, ws="bm0-trusted") -> dict[str, dict]:
    return {c["content"]: c for c in honcho.conclusions_in(ws)}


def edit(n: str, op: str, session: str = "s1", **fields) -> dict:
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": session, "op": op, **fields}


@pytest.fixture
def setup(home, honcho, configure):
    configure(honcho.url)
    return home


def test_sample_journal_lands_as_the_table_says(setup, honcho):
    write_journal(setup)
    sync()
    got = conclusions(honcho)
    assert set(got) == {"Kyle prefers metric units", "backups run nightly", "the NAS is at 10.0.0.5"}
    owner, agent = got["Kyle prefers metric units"], got["backups run nightly"]
    assert (owner["observer_id"], owner["observed_id"]) == ("kyle", "kyle")  # user.md: the owner's picture
    assert (agent["observer_id"], agent["observed_id"]) == ("boxmaker0", "boxmaker0")  # memory.md: the agent's
    assert got["the NAS is at 10.0.0.5"]["observer_id"] == "boxmaker0"  # a note: the agent's
    assert owner["session_id"] == "s-clean" and got["the NAS is at 10.0.0.5"]["session_id"] == "s-team"
    fleet = honcho.messages_in("fleet")
    assert [(m["peer_id"], m["session_id"], m["content"]) for m in fleet] == [
        ("boxmaker0", "s-fetched", "the vendor page says v2 is deprecated")
    ]
    reasons = {d["edit"]: d["reason"] for d in decisions(setup).values() if d.get("kind") == "edit"}
    assert reasons["j-0010"] == "flagged-note-stays-local"
    assert "ignore previous" not in json.dumps(honcho.messages) + json.dumps(list(honcho.conclusions.values()))


def test_fleet_workspace_is_quiet_and_the_agent_unobserved(setup, honcho):
    write_journal(setup, [edit("n1", "note", "s9", trust="untrusted", entry="vendor says so")])
    sync()
    config = honcho.workspaces["fleet"]["configuration"]
    assert config["reasoning"] == {"enabled": False} and config["summary"] == {"enabled": False}
    assert config["dream"] == {"enabled": False} and config["peer_card"] == {"use": False, "create": False}
    assert honcho.peers[("fleet", "boxmaker0")]["configuration"] == {"observe_me": False}
    assert set(honcho.sessions[("fleet", "s9")]["peers"]) == {"boxmaker0"}


def test_replace_deletes_exactly_the_right_conclusion_when_text_repeats(setup, honcho):
    write_journal(
        setup,
        [
            edit("a1", "identity_add", file="memory.md", entry="same text"),
            edit("a2", "identity_add", file="memory.md", entry="same text"),
        ],
    )
    sync()
    first, second = sorted(honcho.conclusions_in("bm0-trusted"), key=lambda c: c["created_at"])
    write_journal(setup, [edit("a3", "identity_replace", file="memory.md", old="same text", entry="new text")])
    sync()
    remaining = {c["id"] for c in honcho.conclusions_in("bm0-trusted")}
    assert first["id"] in remaining and second["id"] not in remaining  # the latest one was replaced
    assert set(conclusions(honcho)) == {"same text", "new text"}
    write_journal(setup, [edit("a4", "identity_remove", file="memory.md", entry="same text")])
    sync()
    assert set(conclusions(honcho)) == {"new text"}


def test_replace_of_an_entry_never_mirrored_says_so_and_creates_the_new_one(setup, honcho):
    write_journal(setup, [edit("r1", "identity_replace", file="user.md", old="never seen", entry="fresh")])
    sync()
    assert set(conclusions(honcho)) == {"fresh"}
    assert decisions(setup)["edit:r1"]["reason"] == "identity-replace; old entry was never mirrored"


def test_consolidate_drops_and_moves(setup, honcho):
    write_journal(
        setup,
        [
            edit("c1", "identity_add", file="memory.md", entry="keep"),
            edit("c2", "identity_add", file="memory.md", entry="drop me"),
            edit("c3", "consolidate", file="memory.md", dropped=["drop me"], moved=["keep"]),
        ],
    )
    sync()
    assert set(conclusions(honcho)) == {"keep"}


@pytest.mark.parametrize("target", ["j-0001", "j-0003", "j-0005", "j-0007", "j-0008", "j-0009", "j-0010"])
def test_undo_of_each_row_leaves_honcho_as_if_never_made(setup, honcho, target):
    write_journal(setup)
    sync()
    before_conclusions = set(conclusions(honcho))
    result = undo.run(load(), target)
    assert result.written and result.undo_id is not None and result.undo_id.startswith("undo-")
    sync()
    after = set(conclusions(honcho))
    expected = {
        "j-0001": before_conclusions - {"Kyle prefers metric units"},
        "j-0003": before_conclusions - {"backups run nightly"} | {"backups run weekly"},
        "j-0005": before_conclusions | {"Kyle lives in Oakland"},
        "j-0007": before_conclusions | {"old fact"},
        "j-0008": before_conclusions - {"the NAS is at 10.0.0.5"},
        "j-0009": before_conclusions,
        "j-0010": before_conclusions,
    }[target]
    assert after == expected
    fleet = [m["content"] for m in honcho.messages_in("fleet")]
    if target == "j-0009":
        assert fleet == ["the vendor page says v2 is deprecated", "retracted: the vendor page says v2 is deprecated"]
    else:
        assert fleet == ["the vendor page says v2 is deprecated"]


def test_an_undone_conclusion_written_again_keeps_its_session(setup, honcho):
    write_journal(
        setup,
        [
            edit("k1", "identity_add", "sess-a", file="memory.md", entry="v1"),
            edit("k2", "identity_replace", "sess-b", file="memory.md", old="v1", entry="v2"),
        ],
    )
    sync()
    undo.run(load(), "k2")
    sync()
    assert {c["content"]: c["session_id"] for c in honcho.conclusions_in("bm0-trusted")} == {"v1": "sess-a"}


def test_undo_before_send_means_the_edit_is_never_sent(setup, honcho):
    write_journal(setup, [edit("u1", "identity_add", file="user.md", entry="oops")])
    mirror.run(load())
    undo.run(load(), "u1")
    sync()
    assert not honcho.conclusions_in("bm0-trusted")
    assert [e["item"] for e in ledger_events(setup) if e["ev"] == "cancelled"] == ["edit:u1"]


def test_undo_refusals_write_nothing(setup, honcho):
    write_journal(setup, [edit("x1", "identity_add", file="user.md", entry="a")])
    journal = setup / "memory" / "journal.jsonl"
    with pytest.raises(NotFound):
        undo.run(load(), "nope")
    first = undo.run(load(), "x1")
    assert first.undo_id is not None
    size = journal.stat().st_size
    with pytest.raises(Refused, match="already undone by undo-"):
        undo.run(load(), "x1")
    with pytest.raises(Refused, match="itself an undo"):
        undo.run(load(), first.undo_id)
    assert journal.stat().st_size == size
    result = bxmem_main("undo", "nope")
    assert result.returncode == 5 and len(result.stderr.strip().splitlines()) == 1
    assert bxmem_main("undo", "x1").returncode == 6


def test_undo_dry_run_says_what_would_happen_and_writes_nothing(setup, honcho):
    write_journal(setup, [edit("d1", "identity_add", file="user.md", entry="a fact")])
    sync()
    journal = setup / "memory" / "journal.jsonl"
    size = journal.stat().st_size
    result = bxmem_main("undo", "d1", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would undo d1" in result.stdout and "will be deleted" in result.stdout
    assert journal.stat().st_size == size
    result = bxmem_main("undo", "d1")
    assert "undid d1 as undo-" in result.stdout
    line = json.loads(journal.read_text().splitlines()[-1])
    assert line["op"] == "undo" and line["target"] == "d1" and line["session"] == "owner"


def test_a_lost_answer_after_a_conclusion_was_stored_leaves_one_conclusion(setup, honcho):
    write_journal(setup, [edit("z1", "identity_add", file="user.md", entry="only once")])
    mirror.run(load())
    honcho.inject("store-then-drop", match=r"/conclusions$")
    clock_now = [1_000_000.0]
    assert send.run(load(), clock=lambda: clock_now[0]).outage
    assert len(honcho.conclusions_in("bm0-trusted")) == 1
    clock_now[0] += settle_wait_s()
    send.run(load(), clock=lambda: clock_now[0])
    assert len(honcho.conclusions_in("bm0-trusted")) == 1
    sent = [e for e in ledger_events(setup) if e["ev"] == "sent" and e["item"] == "edit:z1"]
    assert sent[0]["results"][0].get("settled") is True


def test_conclusions_carry_the_latest_honcho_session_of_their_boxmaker_session(setup, honcho, brokerd):
    write_log(
        setup, "chat", turn_lines(1, "hi", "hello", speaker="ana") + turn_lines(2, "me too", "ok", speaker="kyle")
    )
    decide.run(load())
    send.run(load())
    write_journal(setup, [edit("s1", "note", "chat", trust="trusted", entry="a note")])
    sync()
    assert conclusions(honcho)["a note"]["session_id"] == "chat-2"


def test_bad_journal_lines_are_skipped_named_and_the_rest_goes_on(setup, honcho):
    path = setup / "memory" / "journal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"{not json\n")
        f.write(json.dumps(edit("b1", "teleport", entry="x")).encode() + b"\n")
        f.write(json.dumps({"op": "note"}).encode() + b"\n")
        f.write(json.dumps(edit("b2", "undo", target="missing")).encode() + b"\n")
        f.write(json.dumps(edit("b3", "identity_add", file="user.md", entry="y" * 70_000)).encode() + b"\n")
        f.write(json.dumps(edit("b4", "note", trust="trusted", entry="key ghp_" + "c" * 36)).encode() + b"\n")
        f.write(json.dumps(edit("b5", "identity_add", file="user.md", entry="fine")).encode() + b"\n")
    result = bxmem_main("mirror", "--json")
    assert result.returncode == 0, result.stderr
    assert f"{path}:1: not valid JSON; line skipped" in result.stderr
    assert f"{path}:3: field 'id' is missing" in result.stderr
    got = {d["edit"]: d["reason"] for d in decisions(setup).values()}
    assert got["b1"] == "unknown-op" and got["b2"] == "undo-target-unknown"
    assert got["b3"] == "entry-not-1-to-65535-characters"
    assert got["b4"].startswith("secret-in-entry")
    assert got["b5"] == "identity-add"
    sync()
    assert set(conclusions(honcho)) == {"fine"}


def test_lost_mirror_state_decides_nothing_twice(setup, honcho):
    write_journal(setup, [edit("l1", "identity_add", file="user.md", entry="one")])
    mirror.run(load())
    (setup / "memory" / "bxmem" / "mirror.json").unlink()
    write_journal(setup, [edit("l2", "identity_remove", file="user.md", entry="one")])
    mirror.run(load())
    items = [e["item"] for e in ledger_events(setup) if e["ev"] == "decided"]
    assert items == ["edit:l1", "edit:l2"]
    assert decisions(setup)["edit:l2"]["actions"][0]["of"] == "edit:l1#0"


def test_turns_and_edits_of_one_session_share_the_outbox(setup, honcho, brokerd):
    write_log(setup, "mix", turn_lines(1, "hi", "hello"))
    decide.run(load())
    write_journal(setup, [edit("m1", "note", "mix", trust="trusted", entry="noted")])
    mirror.run(load())
    write_log(setup, "mix", turn_lines(2, "more", "sure"))
    decide.run(load())
    sync()
    assert [m["content"] for m in honcho.messages_in("bm0-trusted", "mix")] == ["hi", "hello", "more", "sure"]
    assert conclusions(honcho)["noted"]["session_id"] == "mix"
