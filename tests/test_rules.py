"""The seed's section 4 "Turns" table, row by row, and its guarantee as a property;
the late-decision rule (section 5) and the send-time veto. Memory writes: test_rules_edits.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.rules import TurnFacts, higher_class, log_labels, peer_name, route_turn, send_veto

AGENT = "boxmaker0"
classes = st.sampled_from(["public", "private", "secret", "unknown"])


def facts(**overrides) -> TurnFacts:
    base = dict(
        status="completed",
        has_text=True,
        has_reply=True,
        speaker="kyle",
        untrusted_by_log=False,
        log_class="public",
        untrusted_by_broker=False,
        broker_class="private",
        secret_in_text=False,
    )
    base.update(overrides)
    return TurnFacts(**base)


# Seed 000 section 4, "Turns", row by row, then the rows bxmem adds before them
# (a turn that did not finish, a speaker Honcho cannot name). Each row: the
# facts that differ from a clean private turn of kyle, where it goes, and why.
TURN_ROWS = [
    # seed: clean, class public or private -> the trusted workspace
    ({}, "trusted", "clean"),
    ({"broker_class": "public"}, "trusted", "clean"),
    ({"log_class": "private", "broker_class": "public"}, "trusted", "clean"),
    # seed: untrusted (read untrusted content), class public or private -> the untrusted workspace
    ({"untrusted_by_broker": True}, "untrusted", "untrusted-session"),
    ({"untrusted_by_log": True}, "untrusted", "untrusted-session"),
    ({"untrusted_by_log": True, "broker_class": "public"}, "untrusted", "untrusted-session"),
    # seed: class secret -> nowhere (from either source; untrusted or not)
    ({"broker_class": "secret"}, None, "secret-session"),
    ({"log_class": "secret"}, None, "secret-session"),
    ({"broker_class": "secret", "untrusted_by_broker": True}, None, "secret-session"),
    ({"log_class": "unknown"}, None, "secret-session"),  # a class nobody knows counts as secret
    # seed: no speaker, or incomplete speaker information -> nowhere
    ({"speaker": None}, None, "no-speaker"),
    # seed: the text holds a known-prefix secret -> nowhere, even when clean
    ({"secret_in_text": True}, None, "secret-in-text"),
    ({"secret_in_text": True, "untrusted_by_broker": True}, None, "secret-in-text"),
    # bxmem: a speaker whose name cannot be a Honcho peer id, or is the agent's own
    ({"speaker": "a b"}, None, "speaker-not-a-peer-name"),
    ({"speaker": AGENT}, None, "speaker-is-the-agent"),
    # bxmem: a turn that did not finish as a whole
    ({"status": "error"}, None, "turn-not-completed"),
    ({"status": "cancelled"}, None, "turn-not-completed"),
    ({"status": None}, None, "turn-not-completed"),
    ({"has_text": False}, None, "no-user-text"),
    ({"has_reply": False}, None, "no-final-reply"),
]


@pytest.mark.parametrize("overrides, role, reason", TURN_ROWS)
def test_turn_table(overrides, role, reason):
    route = route_turn(facts(**overrides), AGENT)
    assert (route.role, route.reason) == (role, reason)
    assert route.peer == ("kyle" if role else None)


def test_the_class_is_computed_once_and_recorded_whatever_the_route():
    # A public session's turn goes where a private one does, and keeps its class.
    assert route_turn(facts(broker_class="public"), AGENT).session_class == "public"
    assert route_turn(facts(broker_class="public", log_class="private"), AGENT).session_class == "private"
    assert route_turn(facts(status="error", log_class="secret"), AGENT).session_class == "secret"


def test_speaker_with_dot_becomes_underscore_peer():
    assert route_turn(facts(speaker="ana.lima"), AGENT).peer == "ana_lima"


def test_speaker_that_cannot_be_a_peer_goes_nowhere():
    for bad in ("", "a b", "x" * 513, "kyle/../admin", "émile"):
        assert route_turn(facts(speaker=bad), AGENT).reason == "speaker-not-a-peer-name", bad


def test_speaker_named_like_the_agent_goes_nowhere_even_with_a_dot():
    assert route_turn(facts(speaker="boxmaker0"), AGENT).reason == "speaker-is-the-agent"
    assert route_turn(facts(speaker="a.b"), "a_b").reason == "speaker-is-the-agent"


# Seed 000 section 5, step 3: a late decision moves only towards untrusted or nowhere.
LOG_LABEL_ROWS = [
    # (turn's own labels, the session's labels now, late) -> labels decided with
    ((False, "public"), (True, "secret"), False, (False, "public")),  # on time: up to the turn only
    ((True, "private"), (False, "public"), False, (True, "private")),
    ((False, "public"), (True, "secret"), True, (True, "secret")),  # late: as of now
    ((False, "private"), (False, "public"), True, (False, "private")),  # never lower
    ((True, "public"), (False, "private"), True, (True, "private")),  # untrusted sticks
]


@pytest.mark.parametrize("turn, now, late, expected", LOG_LABEL_ROWS)
def test_log_labels(turn, now, late, expected):
    assert log_labels(*turn, *now, late) == expected


@settings(max_examples=500)
@given(st.booleans(), classes, st.booleans(), classes)
def test_a_late_decision_is_never_more_trusted_than_one_on_time(turn_untrusted, turn_class, now_untrusted, now_class):
    on_time = log_labels(turn_untrusted, turn_class, now_untrusted, now_class, late=False)
    late = log_labels(turn_untrusted, turn_class, now_untrusted, now_class, late=True)
    assert late[0] >= on_time[0]
    assert higher_class(late[1], on_time[1]) == late[1]


@pytest.mark.parametrize(
    "speaker, reply, expected",
    [
        ("hello", "hi", None),
        ("my key is sk-ant-api03-" + "A" * 40, "ok", "holds a secret (anthropic-api-key)"),
        ("hello", "here: ghp_" + "a" * 36, "holds a secret (github-token)"),  # the reply too
    ],
)
def test_send_veto(speaker, reply, expected):
    assert send_veto(speaker, reply) == expected


def test_higher_class_treats_unknown_as_secret():
    assert higher_class("public", "private") == "private"
    assert higher_class("secret", "public") == "secret"
    assert higher_class("public", "bogus") == "secret"


def test_peer_name():
    assert peer_name("kyle") == "kyle"
    assert peer_name("a.b.c") == "a_b_c"
    assert peer_name(None) is None


@settings(max_examples=2000)
@given(
    status=st.sampled_from(["completed", "error", "cancelled", None]),
    has_text=st.booleans(),
    has_reply=st.booleans(),
    speaker=st.one_of(st.none(), st.text(max_size=20)),
    untrusted_by_log=st.booleans(),
    untrusted_by_broker=st.booleans(),
    log_class=classes,
    broker_class=classes,
    secret_in_text=st.booleans(),
)
def test_the_guarantee(**kwargs):
    """Nothing reaches the trusted workspace unless both sources say clean and the
    class is at most private; a secret session or a secret in the text reaches none."""
    f = TurnFacts(**kwargs)
    route = route_turn(f, AGENT)
    if route.role == "trusted":
        assert not f.untrusted_by_log and not f.untrusted_by_broker
        assert f.broker_class in ("public", "private") and f.log_class in ("public", "private")
    if f.broker_class not in ("public", "private") or f.log_class not in ("public", "private"):
        assert route.role is None  # secret, or a class nobody knows
    if f.secret_in_text or f.status != "completed" or f.speaker is None:
        assert route.role is None
    if route.role is not None:
        assert route.peer is not None and route.peer != AGENT
    assert route.session_class == higher_class(f.broker_class, f.log_class)  # one class, whatever the route
