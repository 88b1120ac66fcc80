"""Each Honcho session holds one Boxmaker session.

A Boxmaker session maps to a Honcho session of its own name, and a speaker who
joins later starts the next one (seed section 6). Both alphabets are
[A-Za-z0-9_-], so `<name>-2` for the second was also the name of a Boxmaker
session called `town-2`: both got-or-created one Honcho session, and Honcho
3.0.12 answers the second create with the existing session and adds the new
peers to it (checked on the real server), mixing two conversations and
unfixing the peers the seed fixes at creation. send_plan.session_name is one
to one; names given before it are kept (the ledger's `created` lines), and a
new session never takes a name the ledger has used in its workspace.
"""

from __future__ import annotations

import re

import pytest
from helpers import examples, write_log
from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.commands.send import plan as send_plan
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal

HONCHO_ID = re.compile(r"^[A-Za-z0-9_-]{1,512}$")


def load():
    return config_module.load()


def sessions_by_honcho_session(honcho) -> dict[tuple[str, str], set[str]]:
    held: dict[tuple[str, str], set[str]] = {}
    for m in honcho.messages:
        held.setdefault((m["workspace_id"], m["session_id"]), set()).add(m["metadata"]["bx_session"])
    return held


def where(honcho, ws: str = "bm0-trusted") -> dict[str, list[str]]:
    """Honcho session -> the items in it, in order."""
    out: dict[str, list[str]] = {}
    for m in honcho.messages_in(ws):
        items = out.setdefault(m["session_id"], [])
        if m["metadata"]["bxmem_item"] not in items:
            items.append(m["metadata"]["bxmem_item"])
    return out


def old_naming(session: str, n: int) -> str:
    """The naming of releases before this one."""
    return session if n == 1 else f"{session}-{n}"


def test_each_honcho_session_holds_one_boxmaker_session(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "town", turn_lines(1, "hi", "hello") + turn_lines(2, "me too", "hi ana", speaker="ana"))
    write_log(home, "town-2", turn_lines(1, "bob's own plans", "noted", speaker="bob"))
    decide.run(load())
    send.run(load())
    held = sessions_by_honcho_session(honcho)
    assert all(len(sessions) == 1 for sessions in held.values()), held
    assert where(honcho) == {"town": ["turn:town:1"], "town-2": ["turn:town:2"], "town-2-1": ["turn:town-2:1"]}
    assert {peer for peer in honcho.sessions[("bm0-trusted", "town-2-1")]["peers"]} == {"boxmaker0", "bob"}


def test_sessions_named_before_keep_their_names_and_new_ones_step_round_them(
    home, brokerd, honcho, configure, monkeypatch
):
    configure(honcho.url)
    # Under the old naming: Boxmaker session town-2's first Honcho session is town-2.
    with monkeypatch.context() as old:
        old.setattr(send_plan, "session_name", old_naming)
        write_log(home, "town-2", turn_lines(1, "bob's own plans", "noted", speaker="bob"))
        write_log(home, "town", turn_lines(1, "hi", "hello"))
        decide.run(load())
        send.run(load())
    assert where(honcho) == {"town-2": ["turn:town-2:1"], "town": ["turn:town:1"]}
    # Now ana joins town: its second session would be town-2, which is taken, so it is town-3;
    # town-2's next turn stays in the Honcho session it has (its history is not split).
    write_log(home, "town", turn_lines(2, "me too", "hi ana", speaker="ana"))
    write_log(home, "town-2", turn_lines(2, "and more plans", "noted too", speaker="bob"))
    decide.run(load())
    send.run(load())
    assert where(honcho) == {
        "town-2": ["turn:town-2:1", "turn:town-2:2"],
        "town": ["turn:town:1"],
        "town-3": ["turn:town:2"],
    }
    assert all(len(s) == 1 for s in sessions_by_honcho_session(honcho).values())
    # Then maria: the fourth.
    write_log(home, "town", turn_lines(3, "hello all", "hi maria", speaker="maria"))
    decide.run(load())
    send.run(load())
    assert where(honcho)["town-4"] == ["turn:town:3"]


def test_a_boxmaker_session_named_like_an_old_second_session_gets_a_name_of_its_own(
    home, brokerd, honcho, configure, monkeypatch
):
    configure(honcho.url)
    with monkeypatch.context() as old:
        old.setattr(send_plan, "session_name", old_naming)
        write_log(home, "town", turn_lines(1, "hi", "hello") + turn_lines(2, "me too", "hi ana", speaker="ana"))
        decide.run(load())
        send.run(load())
    assert where(honcho) == {"town": ["turn:town:1"], "town-2": ["turn:town:2"]}
    write_log(home, "town-2", turn_lines(1, "bob's own plans", "noted", speaker="bob"))
    write_log(home, "town", turn_lines(3, "ana again", "hi again", speaker="ana"))
    decide.run(load())
    send.run(load())
    assert where(honcho) == {
        "town": ["turn:town:1"],
        "town-2": ["turn:town:2", "turn:town:3"],
        "town-2-1": ["turn:town-2:1"],
    }


def test_a_session_made_for_memory_writes_is_named_the_same_way(home, brokerd, honcho, configure, monkeypatch):
    configure(honcho.url)
    note = {
        "id": "j-1",
        "ts": "2026-09-27T10:00:00Z",
        "op": "note",
        "trust": "trusted",
        "entry": "the NAS is at 10.0.0.5",
    }
    with monkeypatch.context() as old:
        old.setattr(send_plan, "session_name", old_naming)
        write_journal(home, [{**note, "session": "lab-7"}])
        mirror.run(load())
        send.run(load())
    write_journal(home, [{**note, "id": "j-2", "session": "town-2"}])
    mirror.run(load())
    send.run(load())
    # Conclusions carry their Honcho session: lab-7's kept its name; town-2's is town-2-1.
    assert sorted(c["session_id"] for c in honcho.conclusions_in("bm0-trusted")) == ["lab-7", "town-2-1"]
    # The first speaker of each joins the session made for its memory writes.
    write_log(home, "lab-7", turn_lines(1, "hi", "hello"))
    write_log(home, "town-2", turn_lines(1, "hi", "hello"))
    decide.run(load())
    send.run(load())
    assert where(honcho) == {"lab-7": ["turn:lab-7:1"], "town-2-1": ["turn:town-2:1"]}


# --- the naming ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "n", "name"),
    [
        ("town", 1, "town"),
        ("town", 2, "town-2"),
        ("town", 10, "town-10"),
        ("town-2", 1, "town-2-1"),
        ("town-2", 2, "town-2-2"),
        ("town-02", 1, "town-02-1"),
        ("town-", 1, "town-"),
        ("town-x", 1, "town-x"),
        ("-1", 1, "-1-1"),
        ("1", 1, "1"),
        ("s-abc-0", 1, "s-abc-0-1"),
    ],
)
def test_session_name(session, n, name):
    assert send_plan.session_name(session, n) == name


boxmaker_ids = st.text(alphabet="ab12-_", min_size=1, max_size=10) | st.sampled_from(["town", "town-2", "town-2-1"])


@settings(max_examples=examples(3000))
@given(first=st.tuples(boxmaker_ids, st.integers(1, 30)), second=st.tuples(boxmaker_ids, st.integers(1, 30)))
def test_no_two_sessions_share_a_name(first, second):
    one, two = send_plan.session_name(*first), send_plan.session_name(*second)
    assert (one == two) == (first == second)
    assert HONCHO_ID.fullmatch(one)


def test_the_longest_boxmaker_id_still_makes_a_honcho_id():
    session = "a" * 499 + "-7"  # 501: the longest sources/loopd.SESSION_RE takes is 500
    assert HONCHO_ID.fullmatch(send_plan.session_name(session[:500], 1))
    assert HONCHO_ID.fullmatch(send_plan.session_name("b" * 500, 10**9))


def test_a_taken_name_is_stepped_over():
    taken = {"town-2": "town-2", "town-3": "other"}
    assert send_plan.next_session("town", 2, taken) == ("town-4", 4)
    assert send_plan.next_session("town", 1, taken) == ("town", 1)
    assert send_plan.next_session("town-2", 1, {"town-2-1": "town-2-1"}) == ("town-2-2", 2)


@pytest.mark.parametrize(
    ("known", "taken", "name"),
    [
        ({"name": "town", "n": 1}, {"town": "town"}, ("town-2", 2)),
        ({"name": "town-2-1", "n": 1}, {"town-2-1": "town-2"}, ("town-2-2", 2)),
        # named before the one-to-one naming: town-2's first was town-2, and town's second took town-3
        ({"name": "town-2", "n": 1}, {"town-2": "town-2", "town-3": "town"}, ("town-2-2", 2)),
        ({"name": "town-2", "n": 2}, {"town": "town", "town-2": "town", "town-3": "town-3"}, ("town-4", 4)),
    ],
)
def test_the_session_that_replaces_one_honcho_deleted_is_named_one_to_one(known, taken, name):
    gone = {**known, "peers": ["boxmaker0", "kyle"], "gone": True}
    session = next(bx for hs, bx in taken.items() if hs == known["name"])
    assert send_plan.target(gone, "kyle", session, "boxmaker0", taken) == (*name, ["boxmaker0", "kyle"], True)
