"""Where an artifact card goes: a turn's rules on the session it was recorded in, at record time."""

from __future__ import annotations

from dataclasses import dataclass

from bxmem.trust.labels import higher_class
from bxmem.trust.rules import Route


@dataclass(frozen=True)
class CardFacts:
    """What is known about the session an artifact card is recorded in, at record time."""

    broker_answered: bool  # brokerd answered for the session
    log_unreadable: bool  # its log cannot be read, or holds a line bxmem could not read
    untrusted_by_log: bool
    log_class: str
    untrusted_by_broker: bool
    broker_class: str
    projection_problem: str | None  # why the card has no remote projection (trust/artifact_rules.projection)


def route_card(facts: CardFacts) -> Route:
    """Where an artifact card's remote projection goes: as a turn of the session it
    was recorded in would (route_turn's rows on the session's labels), decided at
    record time, the first row that holds deciding:

    | the recording session at record time                  | goes to   | reason            |
    | brokerd cannot answer (no waiting: a record is synchronous) | nowhere | broker-unavailable |
    | its log cannot be read, or holds a line bxmem could not read | nowhere | log-unreadable |
    | class secret (or a class nobody knows)                 | nowhere   | secret-session    |
    | the card has no projection (empty summary, a secret)   | nowhere   | that reason       |
    | untrusted by brokerd or by the log                     | untrusted | untrusted-session |
    | clean, class public or private                         | trusted   | clean             |

    What cannot be read counts as untrusted and secret (`card_label`), so the two
    unreadable rows are also the secret row. The card is written as the agent's
    own peer, never a speaker's: the speaker rows of route_turn do not apply."""
    untrusted, session_class = card_label(facts)

    def nowhere(reason: str) -> Route:
        return Route(None, reason, session_class)

    if not facts.broker_answered:
        return nowhere("broker-unavailable")
    if facts.log_unreadable:
        return nowhere("log-unreadable")
    if session_class == "secret":
        return nowhere("secret-session")
    if facts.projection_problem is not None:
        return nowhere(facts.projection_problem)
    if untrusted:
        return Route("untrusted", "untrusted-session", session_class)
    return Route("trusted", "clean", session_class)


def card_label(facts: CardFacts) -> tuple[bool, str]:
    """(untrusted, class) of a card and its bytes: the recording session's, as decide
    would read them; brokerd not answering, or a log bxmem cannot read, counts as
    untrusted and secret (labels.UNREADABLE_LINE). resolve gives the bytes this label."""
    if not facts.broker_answered or facts.log_unreadable:
        return True, "secret"
    return (facts.untrusted_by_broker or facts.untrusted_by_log), higher_class(facts.broker_class, facts.log_class)
