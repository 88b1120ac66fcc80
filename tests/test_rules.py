"""The seed's section 4 "Turns" table, row by row, and its guarantee as a property;
the late-decision rule (section 5) and the send-time veto. Memory writes: test_rules_edits.py."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.trust.rules import (
    CLEAN_LOG,
    DOT,
    PEER_RE,
    LogLabels,
    TurnFacts,
    after_line,
    higher_class,
    log_labels,
    look_alike,
    peer_name,
    route_turn,
    send_veto,
    speaker_peer,
)

AGENT = "boxmaker0"
classes = st.sampled_from(["public", "private", "secret", "unknown"])


def facts(**overrides) -> TurnFacts:
    base: dict[str, Any] = dict(
        status="completed",
        has_text=True,
        has_reply=True,
        speaker="kyle",
        log_unreadable=False,
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
    # bxmem: the session's log holds a line bxmem could not read before the turn's end;
    # first, since what the log says of the turn cannot be relied on
    ({"log_unreadable": True}, None, "log-unreadable"),
    ({"log_unreadable": True, "status": "error", "has_reply": False}, None, "log-unreadable"),
    ({"log_unreadable": True, "untrusted_by_log": True, "log_class": "secret"}, None, "log-unreadable"),
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


def test_speaker_with_dot_gets_a_peer_no_underscore_name_can_have():
    """`ana.lima` is the peer `ana_Dot_lima`, never `ana_lima`, another person's peer."""
    assert route_turn(facts(speaker="ana.lima"), AGENT).peer == "ana_Dot_lima"
    assert route_turn(facts(speaker="ana_lima"), AGENT).peer == "ana_lima"


def test_speaker_that_cannot_be_a_peer_goes_nowhere():
    for bad in ("", "a b", "x" * 513, "kyle/../admin", "émile"):
        assert route_turn(facts(speaker=bad), AGENT).reason == "speaker-not-a-peer-name", bad


def test_speaker_named_like_the_agent_goes_nowhere_even_with_a_dot():
    assert route_turn(facts(speaker="boxmaker0"), AGENT).reason == "speaker-is-the-agent"
    assert route_turn(facts(speaker="a.b"), "a_b").reason == "speaker-is-the-agent"


# Seed 000 section 5, step 3: a late decision moves only towards untrusted or nowhere.
WHERE = {"line": 7, "why": "not valid JSON"}
LOG_LABEL_ROWS = [
    # (the labels at the turn's end, the session's labels now, late) -> labels decided with
    ((False, "public", None), (True, "secret", None), False, (False, "public", None)),  # on time: up to the turn's end
    ((True, "private", None), (False, "public", None), False, (True, "private", None)),
    ((False, "public", None), (True, "secret", None), True, (True, "secret", None)),  # late: as of now
    ((False, "private", None), (False, "public", None), True, (False, "private", None)),  # never lower
    ((True, "public", None), (False, "private", None), True, (True, "private", None)),  # untrusted sticks
    ((False, "public", None), (True, "secret", WHERE), False, (False, "public", None)),  # unreadable after the end
    ((False, "public", None), (True, "secret", WHERE), True, (True, "secret", WHERE)),  # ...but before a late decision
    (
        (True, "secret", WHERE),
        (True, "secret", {"line": 9, "why": "x"}),
        True,
        (True, "secret", WHERE),
    ),  # the first one
]


@pytest.mark.parametrize("turn, now, late, expected", LOG_LABEL_ROWS)
def test_log_labels(turn, now, late, expected):
    assert log_labels(LogLabels(*turn), LogLabels(*now), late) == LogLabels(*expected)


@pytest.mark.parametrize(
    "before, line, expected",
    [
        (CLEAN_LOG, (False, "private"), (False, "private", None)),
        ((True, "public", None), (False, "public"), (True, "public", None)),  # untrusted sticks
        ((False, "private", None), (False, "public"), (False, "private", None)),  # the class never falls
        (CLEAN_LOG, (True, "secret", WHERE), (True, "secret", WHERE)),  # an unreadable line: labels.UNREADABLE_LINE
        ((True, "secret", WHERE), (False, "public", {"line": 9, "why": "x"}), (True, "secret", WHERE)),
    ],
)
def test_after_line(before, line, expected):
    assert after_line(LogLabels(*before), *line) == LogLabels(*expected)


labels_ = st.builds(LogLabels, st.booleans(), classes, st.none() | st.just(WHERE))


@settings(max_examples=examples(500))
@given(labels_, labels_)
def test_a_late_decision_is_never_more_trusted_than_one_on_time(at_end, now):
    on_time = log_labels(at_end, now, late=False)
    late = log_labels(at_end, now, late=True)
    assert late.untrusted >= on_time.untrusted
    assert higher_class(late.trust_class, on_time.trust_class) == late.trust_class
    assert (late.unreadable is not None) >= (on_time.unreadable is not None)


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
    assert peer_name("KYLE") == peer_name("Kyle") == "kyle"
    assert peer_name("a.b.c") == "a_Dot_b_Dot_c"
    assert peer_name("a-b_c9") == "a-b_c9"
    assert peer_name(None) is None
    assert peer_name("x" * 512) == "x" * 512 and peer_name("x" * 513) is None
    assert peer_name("." * 102) == DOT * 102 and peer_name("." * 103) is None  # 515 characters once written
    for bad in ("", "a b", "kyle/x", "émile", "kyle\n", "k\u0131"):
        assert peer_name(bad) is None, bad


OWNER = "kyle"
# speaker_peer's table, row by row: (speaker, agent, owner) -> (peer, why nowhere)
SPEAKER_ROWS = [
    (("kyle", AGENT, OWNER), ("kyle", None)),
    (("KYLE", AGENT, OWNER), ("kyle", None)),  # Mattermost usernames ignore case: the owner
    (("Kyle", AGENT, OWNER), ("kyle", None)),
    (("BoxMaker0", AGENT, OWNER), (None, "speaker-is-the-agent")),  # never a peer of its own
    (("BOXMAKER0", AGENT, OWNER), (None, "speaker-is-the-agent")),
    (("boxmaker.0", AGENT, "kyle"), ("boxmaker_Dot_0", None)),  # not like boxmaker0
    (("boxmaker.0", "boxmaker_0", OWNER), (None, "speaker-is-the-agent")),
    (("boxmaker_Dot_0", "boxmaker_0", OWNER), (None, "speaker-is-the-agent")),
    (("kyle_b", AGENT, "kyle_b"), ("kyle_b", None)),
    (("kyle.b", AGENT, "kyle_b"), (None, "speaker-named-like-the-owner")),  # never written as the owner
    (("KYLE.B", AGENT, "kyle_b"), (None, "speaker-named-like-the-owner")),
    (("kyle.b", AGENT, "kyle_Dot_b"), ("kyle_Dot_b", None)),  # an owner whose username has a dot
    (("kyle_b", AGENT, "kyle_Dot_b"), (None, "speaker-named-like-the-owner")),
    (("kyle_dot_b", AGENT, "kyle_Dot_b"), ("kyle_dot_b", None)),  # another name altogether
    (("kyle.b", AGENT, OWNER), ("kyle_Dot_b", None)),
    (("kyle_b", AGENT, OWNER), ("kyle_b", None)),  # and these two stay two people
    (("ana.lima", AGENT, None), ("ana_Dot_lima", None)),  # local-only: no owner configured
    (("a b", AGENT, OWNER), (None, "speaker-not-a-peer-name")),
]


@pytest.mark.parametrize("args, expected", SPEAKER_ROWS)
def test_speaker_peer_row(args, expected):
    assert speaker_peer(*args) == expected
    route = route_turn(facts(speaker=args[0]), args[1], args[2])
    assert (route.peer, None if route.role else route.reason) == expected


def test_look_alike():
    assert look_alike("Kyle.B") == look_alike("kyle_b") == look_alike("kyle_Dot_b") == "kyle_b"
    assert look_alike("kyle-b") == "kyle-b"  # `-` is its own character: kyle-b is another name


speaker_names = st.text(alphabet="abkyKYDot.-_0", min_size=1, max_size=12)


@settings(max_examples=examples(3000))
@given(first=speaker_names, second=speaker_names)
def test_two_people_never_share_a_peer(first, second):
    """Names that differ other than in case (Mattermost's rule for one account) get
    two peers: peer_name is one-to-one on folded names, and a lower-case peer id
    that has no `.` is its own peer."""
    one, two = peer_name(first), peer_name(second)
    assert one is not None and two is not None and PEER_RE.fullmatch(one)
    assert (one == two) == (first.lower() == second.lower())
    if first == first.lower() and "." not in first:
        assert one == first


@settings(max_examples=examples(3000))
@given(speaker=speaker_names, owner=speaker_names.filter(lambda n: "." not in n))
def test_only_the_owner_is_written_as_the_owner(speaker, owner):
    peer, _why = speaker_peer(speaker, AGENT, owner)
    if peer == owner:
        assert peer_name(speaker) == owner  # never a look-alike
    if look_alike(speaker) == look_alike(owner):
        assert peer in (owner, None)  # a look-alike of the owner is the owner or no one


@settings(max_examples=examples(2000))
@given(
    status=st.sampled_from(["completed", "error", "cancelled", None]),
    has_text=st.booleans(),
    has_reply=st.booleans(),
    speaker=st.one_of(st.none(), st.text(max_size=20)),
    log_unreadable=st.booleans(),
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
    if f.secret_in_text or f.status != "completed" or f.speaker is None or f.log_unreadable:
        assert route.role is None
    if route.role is not None:
        assert route.peer is not None and route.peer != AGENT
    assert route.session_class == higher_class(f.broker_class, f.log_class)  # one class, whatever the route
