"""The seed's section 4 tables, as pure functions.

No I/O, no clock, no configuration objects: a reviewer can hold each function
against the table it implements, line by line. Everything that decides where
text may go is here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Role = Literal["trusted", "untrusted", "fleet"]
Class = Literal["public", "private", "secret"]

CLASS_RANK = {"public": 0, "private": 1, "secret": 2}
PEER_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")


def higher_class(a: str, b: str) -> str:
    """The more restrictive of two classes; an unknown class counts as secret."""
    if a not in CLASS_RANK or b not in CLASS_RANK:
        return "secret"
    return a if CLASS_RANK[a] >= CLASS_RANK[b] else b


def peer_name(speaker: str | None) -> str | None:
    """A Mattermost username as a Honcho peer id (`.` becomes `_`), or None if it cannot be one."""
    if speaker is None:
        return None
    name = speaker.replace(".", "_")
    return name if PEER_RE.fullmatch(name) else None


@dataclass(frozen=True)
class TurnFacts:
    """What is known about a finished turn when it is decided."""

    status: str | None  # the turn_end status; None if the record lacks one
    has_text: bool  # the speaker's message was logged with its text
    has_reply: bool  # a final assistant line exists
    speaker: str | None  # as loopd logged it (None: absent, null, or several people)
    untrusted_by_log: bool  # any tool_result of the session so far was labelled untrusted
    log_class: str  # the highest label class of the session's tool results so far
    untrusted_by_broker: bool
    broker_class: str
    secret_in_text: bool  # a known-prefix secret in the speaker's text or the reply


@dataclass(frozen=True)
class Route:
    role: Role | None  # None: nowhere
    reason: str
    peer: str | None = None  # the speaker's peer, when the turn goes somewhere
    session_class: str = "private"  # the class the turn is written with


def route_turn(facts: TurnFacts, agent_peer: str) -> Route:
    """Where a finished turn goes (seed section 4, "Turns"; interfaces section 2).

    | the turn's session at its end                         | goes to             |
    | not completed, no user text, or no final reply        | nowhere             |
    | class secret                                          | nowhere             |
    | no speaker, or incomplete speaker information         | nowhere             |
    | the text holds a known-prefix secret                  | nowhere             |
    | untrusted (read untrusted content), public or private | the untrusted one   |
    | clean, class public or private                        | the trusted one     |

    Untrusted if either brokerd or loopd's labels say so; the class is the
    higher of brokerd's and the labels'. A public turn is written as private:
    public records where a result came from, not a permission.
    """
    if facts.status != "completed":
        return Route(None, "turn-not-completed")
    if not facts.has_text:
        return Route(None, "no-user-text")
    if not facts.has_reply:
        return Route(None, "no-final-reply")
    session_class = higher_class(facts.broker_class, facts.log_class)
    if session_class == "secret":
        return Route(None, "secret-session")
    if facts.speaker is None:
        return Route(None, "no-speaker")
    peer = peer_name(facts.speaker)
    if peer is None:
        return Route(None, "speaker-not-a-peer-name")
    if peer == agent_peer:
        # A person named like the agent would have their words written as the
        # agent's own, which Honcho treats as unobserved agent output.
        return Route(None, "speaker-is-the-agent")
    if facts.secret_in_text:
        return Route(None, "secret-in-text")
    if facts.untrusted_by_broker or facts.untrusted_by_log:
        return Route("untrusted", "untrusted-session", peer, "private")
    return Route("trusted", "clean", peer, "private")


# --- memory writes (seed section 4, "Memory writes"; issue 3) ---------------------------

IDENTITY_FILES = {"memory.md", "user.md"}


@dataclass(frozen=True)
class EditAction:
    """What one journalled edit does in Honcho."""

    action: Literal["conclude", "unconclude", "fleet-message", "nothing"]
    reason: str
    role: Role | None = None  # the workspace
    about: Literal["owner", "agent"] | None = None  # whose picture the conclusion is


def about_for(file: str | None) -> Literal["owner", "agent"]:
    """A user.md entry is about the owner; a memory.md entry or a note is the agent's."""
    return "owner" if file == "user.md" else "agent"
