"""A turn's speaker is held to the speaker rules again at send time.

decide refuses a speaker whose name reads as the agent's (`speaker-is-the-agent`:
Honcho would take a person's words for unobserved agent output) or as the
owner's without being the owner (`speaker-named-like-the-owner`), under the
agent and owner configured when it decides. The owner can rename either before
the turn is sent: to the name of a user who spoke (here `helper`), the agent's
own peer would then carry that person's words. send holds each pending turn's
decided peer to the rules under the configuration it runs with
(rules.peer_problem); a turn they refuse now is held, never written under
another peer, until the configuration lets it go again or the owner drops it.
"""

from __future__ import annotations

import json

import pytest
from helpers import bxmem_inprocess, examples, honcho_config, write_log
from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.commands import decide, sync
from bxmem.commands.send import job as send
from bxmem.commands.send.messages import build
from bxmem.commands.send.plan import LocalFailure
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.trust.rules import look_alike, peer_problem, speaker_peer
from bxmem.trust.write_policy import (
    PEER_IS_THE_AGENT,
    PEER_LIKE_THE_OWNER,
    PEER_NOT_A_NAME,
    Now,
    hold_pending,
    roles_of,
)


def load():
    return config_module.load()


def renamed(url: str, agent: str = "boxmaker0", owner: str = "kyle") -> str:
    return (
        honcho_config(url)
        .replace('agent = "boxmaker0"', f'agent = "{agent}"')
        .replace('owner = "kyle"', f'owner = "{owner}"')
    )


def by_peer(honcho) -> list[tuple[str, str, str]]:
    return [(m["metadata"]["bxmem_item"], m["metadata"]["role"], m["peer_id"]) for m in honcho.messages]


def test_a_speaker_who_is_now_the_agent_is_not_written_as_the_agent(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "this is me, helper, asking", "hi helper", speaker="helper"))
    write_log(home, "o", turn_lines(1, "the owner asks", "the agent answers"))
    decide.run(load())
    config_file.write_text(renamed(honcho.url, agent="helper"))
    report = send.run(load())
    assert [m for m in honcho.messages if m["peer_id"] == "helper" and m["metadata"]["role"] == "speaker"] == []
    assert "turn:s:1" not in {item for item, _role, _peer in by_peer(honcho)}
    # The owner's turn goes on, under the agent's peer as it is named now.
    assert by_peer(honcho) == [("turn:o:1", "speaker", "kyle"), ("turn:o:1", "agent", "helper")]
    assert report.exit_code == 4
    [group] = report.held_by_config
    assert (group["workspace"], group["reason"], group["turns"], group["oldest"]) == (
        "bm0-trusted",
        PEER_IS_THE_AGENT,
        1,
        "turn:s:1",
    )
    assert "its speaker's peer helper reads as the agent's own name now" in group["explain"]
    result = bxmem_inprocess("sync", "--json")
    status = json.loads(result.stdout)
    assert result.returncode == 4 and [g["reason"] for g in status["held"]] == [PEER_IS_THE_AGENT]
    assert any("(speaker-is-the-agent); nothing is sent for them" in a for a in status["attention"])


def test_a_look_alike_of_the_renamed_agent_is_held_too(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello from ana.lima", "hi", speaker="ana.lima"))
    decide.run(load())
    config_file.write_text(renamed(honcho.url, agent="ana_lima"))
    report = send.run(load())
    assert honcho.messages == []
    assert [(g["reason"], g["explain"].split(" reads")[0]) for g in report.held_by_config] == [
        (PEER_IS_THE_AGENT, "its speaker's peer ana_Dot_lima")
    ]


def test_a_speaker_who_now_reads_as_the_owner_is_held(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "kyle.b here", "hi kyle.b", speaker="kyle.b"))
    decide.run(load())
    config_file.write_text(renamed(honcho.url, owner="kyle_b"))
    report = send.run(load())
    assert honcho.messages == []
    assert [g["reason"] for g in report.held_by_config] == [PEER_LIKE_THE_OWNER]
    assert "reads as the owner's name now, and is not the owner's peer" in report.held_by_config[0]["explain"]


def test_a_speaker_who_is_now_the_owner_goes(home, brokerd, honcho, configure, config_file):
    """Renamed to exactly a speaker's peer, the owner is that person: nothing to hold."""
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "ana here", "hi ana", speaker="ana"))
    decide.run(load())
    config_file.write_text(renamed(honcho.url, owner="ana"))
    report = send.run(load())
    assert report.held_by_config == [] and report.exit_code == 0
    assert by_peer(honcho) == [("turn:s:1", "speaker", "ana"), ("turn:s:1", "agent", "boxmaker0")]


def test_renaming_the_agent_back_sends_the_held_turn_as_decided(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "this is me, helper, asking", "hi helper", speaker="helper"))
    decide.run(load())
    config_file.write_text(renamed(honcho.url, agent="Helper"))  # case does not make another name
    assert [g["reason"] for g in send.run(load()).held_by_config] == [PEER_IS_THE_AGENT]
    assert honcho.messages == []
    configure(honcho.url)
    report = send.run(load())
    assert report.held_by_config == [] and sync.exit_code(sync.status(load(), check=False)) == 0
    assert by_peer(honcho) == [("turn:s:1", "speaker", "helper"), ("turn:s:1", "agent", "boxmaker0")]


# --- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("peer", "agent", "owner", "why"),
    [
        ("helper", "boxmaker0", "kyle", None),
        ("helper", "helper", "kyle", PEER_IS_THE_AGENT),
        ("helper", "Helper", "kyle", PEER_IS_THE_AGENT),
        ("ana_Dot_lima", "ana_lima", "kyle", PEER_IS_THE_AGENT),
        ("kyle_Dot_b", "boxmaker0", "kyle_b", PEER_LIKE_THE_OWNER),
        ("kyle_b", "boxmaker0", "kyle_Dot_b", PEER_LIKE_THE_OWNER),
        (
            "ana_lima",
            "boxmaker0",
            "ana_Dot_lima",
            PEER_LIKE_THE_OWNER,
        ),  # a 0.1.0 peer of ana.lima, now the owner's look-alike
        ("kyle_b", "boxmaker0", "kyle_b", None),  # the owner
        ("kyle-b", "boxmaker0", "kyle_b", None),  # `-` is another name
        ("a b", "boxmaker0", "kyle", PEER_NOT_A_NAME),
    ],
)
def test_the_peer_rule_row_by_row(peer, agent, owner, why):
    assert peer_problem(peer, agent, owner) == why


def test_a_damaged_peer_is_held_and_each_peer_is_checked_once():
    now = Now(roles_of([("trusted", "t"), ("untrusted", "u"), ("fleet", "f")]), {}, "helper", "kyle")
    pending = [
        ("turn:a:1", "t", "trusted", "turn", None),
        ("turn:a:2", "t", "trusted", "turn", ["helper"]),
        ("turn:b:1", "u", "untrusted", "turn", "helper"),
        ("turn:c:1", "t", "trusted", "turn", "ana"),
        ("edit:x", "t", "trusted", "edit", None),
    ]
    holds = hold_pending(pending, now, lambda item: {"ws": "t", "role": "trusted", "kind": "edit"}, {}, {})
    assert {item: (h.reason, h.workspace, h.now) for item, h in holds.held.items()} == {
        "turn:a:1": (PEER_NOT_A_NAME, "t", "trusted"),
        "turn:a:2": (PEER_NOT_A_NAME, "t", "trusted"),
        "turn:b:1": (PEER_IS_THE_AGENT, "u", "untrusted"),
    }
    assert {(g["reason"], g["workspace"]) for g in holds.groups(lambda _item: "turn")} == {
        (PEER_NOT_A_NAME, "t"),
        (PEER_IS_THE_AGENT, "u"),
    }


speaker_names = st.text(alphabet="abkyKYhelpDot.-_0", min_size=1, max_size=12)


@settings(max_examples=examples(3000))
@given(speaker=speaker_names, agent=speaker_names, owner=speaker_names)
def test_a_peer_decide_lets_go_is_let_go_under_the_same_configuration(speaker, agent, owner):
    """send holds nothing decide would write under the same agent and owner, and
    everything decide would refuse a speaker for, whoever they are named like.
    (Peer ids are checked as look_alike reads them; a speaker whose name holds
    `_Dot_` itself, which no Mattermost username can, reads another way.)"""
    agent_id, owner_id = agent.lower().replace(".", "_"), owner.lower().replace(".", "_")
    if agent_id == owner_id or "_Dot_" in speaker:
        return
    peer, _why = speaker_peer(speaker, agent_id, owner_id)
    if peer is not None:
        assert peer_problem(peer, agent_id, owner_id) is None
        # Under another agent or owner: held exactly when decide would refuse the speaker now.
        for other_agent, other_owner in ((owner_id + "x", peer), (peer, owner_id), (look_alike(peer), owner_id)):
            if other_agent == other_owner:
                continue
            refused = speaker_peer(speaker, other_agent, other_owner)[0] is None
            assert (peer_problem(peer, other_agent, other_owner) is not None) == refused


def test_the_message_builder_refuses_the_agents_peer_as_a_speaker():
    """The last line behind the holds: a turn whose speaker is the agent is never built."""
    item = {"item": "turn:s:1", "peer": "helper", "session": "s", "turn": 1, "at": None}
    with pytest.raises(LocalFailure, match="speaker-is-the-agent"):
        build(item, "words", "reply", "helper", "kyle")
    with pytest.raises(LocalFailure, match="no speaker peer"):
        build({**item, "peer": None}, "words", "reply", "boxmaker0", "kyle")
    assert [m["peer_id"] for m in build(item, "words", "reply", "boxmaker0", "kyle")] == ["helper", "boxmaker0"]
