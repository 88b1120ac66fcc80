"""The seed's section 4 "Turns" table, row by row, and its guarantee as a property."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.rules import TurnFacts, higher_class, peer_name, route_turn

AGENT = "boxmaker0"


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


def test_clean_private_goes_to_trusted():
    route = route_turn(facts(), AGENT)
    assert (route.role, route.reason, route.peer) == ("trusted", "clean", "kyle")


def test_clean_public_goes_to_trusted_written_as_private():
    route = route_turn(facts(broker_class="public"), AGENT)
    assert (route.role, route.session_class) == ("trusted", "private")


def test_untrusted_by_brokerd_goes_to_untrusted():
    assert route_turn(facts(untrusted_by_broker=True), AGENT).role == "untrusted"


def test_untrusted_by_log_goes_to_untrusted():
    assert route_turn(facts(untrusted_by_log=True), AGENT).role == "untrusted"


def test_secret_class_goes_nowhere_from_either_source():
    assert route_turn(facts(broker_class="secret"), AGENT).reason == "secret-session"
    assert route_turn(facts(log_class="secret"), AGENT).reason == "secret-session"
    assert route_turn(facts(broker_class="secret", untrusted_by_broker=True), AGENT).role is None


def test_no_speaker_goes_nowhere():
    assert route_turn(facts(speaker=None), AGENT).reason == "no-speaker"


def test_speaker_with_dot_becomes_underscore_peer():
    assert route_turn(facts(speaker="ana.lima"), AGENT).peer == "ana_lima"


def test_speaker_that_cannot_be_a_peer_goes_nowhere():
    for bad in ("", "a b", "x" * 513, "kyle/../admin", "émile"):
        assert route_turn(facts(speaker=bad), AGENT).reason == "speaker-not-a-peer-name", bad


def test_speaker_named_like_the_agent_goes_nowhere():
    assert route_turn(facts(speaker="boxmaker0"), AGENT).reason == "speaker-is-the-agent"


def test_known_prefix_secret_goes_nowhere_even_when_clean():
    assert route_turn(facts(secret_in_text=True), AGENT).reason == "secret-in-text"


def test_incomplete_turns_go_nowhere():
    assert route_turn(facts(status="error"), AGENT).reason == "turn-not-completed"
    assert route_turn(facts(status="cancelled"), AGENT).reason == "turn-not-completed"
    assert route_turn(facts(status=None), AGENT).reason == "turn-not-completed"
    assert route_turn(facts(has_reply=False), AGENT).reason == "no-final-reply"
    assert route_turn(facts(has_text=False), AGENT).reason == "no-user-text"


def test_higher_class_treats_unknown_as_secret():
    assert higher_class("public", "private") == "private"
    assert higher_class("secret", "public") == "secret"
    assert higher_class("public", "bogus") == "secret"


def test_peer_name():
    assert peer_name("kyle") == "kyle"
    assert peer_name("a.b.c") == "a_b_c"
    assert peer_name(None) is None


classes = st.sampled_from(["public", "private", "secret", "unknown"])


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
