"""The seed's section 4 tables, as pure functions.

No I/O, no clock, no configuration objects: a reviewer can hold each function
against the table it implements, line by line. Everything that decides where
text may go is here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Literal

from .labels import higher_class

Role = Literal["trusted", "untrusted", "fleet"]
Class = Literal["public", "private", "secret"]

PEER_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")


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


# --- memory writes (seed section 4, "Memory writes") ---------------------------------

IDENTITY_FILES = ("memory.md", "user.md")


def about_for(file: str | None) -> str:
    """Whose picture a conclusion is: a user.md entry is about the owner;
    a memory.md entry or a note is the agent's."""
    return "owner" if file == "user.md" else "agent"


@dataclass(frozen=True)
class EditPlan:
    """What one journalled edit does in Honcho: a workspace (or none, and why)
    and the actions, in order. Texts are named by where they are in the
    journal line (`field`, `index`), never copied."""

    role: Role | None
    reason: str
    actions: tuple[dict, ...] = ()


def _conclude(about: str, field: str, index: int | None = None) -> dict:
    action = {"do": "conclude", "about": about, "field": field}
    if index is not None:
        action["index"] = index
    return action


def plan_edit(record: dict, live_ref: Callable[[str, str], str | None]) -> EditPlan:
    """Where an edit goes (seed section 4, "Memory writes"):

    | journalled edit                              | in Honcho                                      |
    | identity add (memory.md or user.md)          | a conclusion in the trusted workspace          |
    | identity replace                             | the old entry's conclusion deleted, new created |
    | identity remove, or dropped by consolidate   | its conclusion deleted                         |
    | moved out of identity by consolidate         | nothing: its conclusion is already there       |
    | a trusted note                               | a conclusion in the trusted workspace          |
    | an untrusted note                            | a message in the fleet workspace               |
    | a flagged note                               | nothing: it stays local                        |

    `live_ref(about, text)` names the ref (`edit:<id>#<i>`) of the live
    conclusion for that entry, or None if none was written. Undo is
    `plan_undo`.
    """
    op = record.get("op")
    file = record.get("file")
    if op in ("identity_add", "identity_replace", "identity_remove", "consolidate") and file not in IDENTITY_FILES:
        return EditPlan(None, "not-an-identity-file")
    about = about_for(file)
    if op == "identity_add":
        if not isinstance(record.get("entry"), str):
            return EditPlan(None, "no-entry")
        return EditPlan("trusted", "identity-add", (_conclude(about, "entry"),))
    if op == "identity_replace":
        if not isinstance(record.get("entry"), str):
            return EditPlan(None, "no-entry")
        old = record.get("old")
        ref = live_ref(about, old) if isinstance(old, str) else None
        actions = ({"do": "unconclude", "of": ref},) if ref else ()
        reason = "identity-replace" if ref else "identity-replace; old entry was never mirrored"
        return EditPlan("trusted", reason, actions + (_conclude(about, "entry"),))
    if op == "identity_remove":
        entry = record.get("entry")
        ref = live_ref(about, entry) if isinstance(entry, str) else None
        if ref is None:
            return EditPlan(None, "removed-entry-was-never-mirrored")
        return EditPlan("trusted", "identity-remove", ({"do": "unconclude", "of": ref},))
    if op == "consolidate":
        dropped = record.get("dropped") if isinstance(record.get("dropped"), list) else []
        refs = [live_ref(about, entry) for entry in dropped if isinstance(entry, str)]
        actions = tuple({"do": "unconclude", "of": ref} for ref in refs if ref)
        if not actions:
            return EditPlan(None, "consolidate-dropped-nothing-mirrored")  # moved entries: already there
        return EditPlan("trusted", "consolidate-dropped", actions)
    if op == "note":
        trust = record.get("trust")
        if not isinstance(record.get("entry"), str):
            return EditPlan(None, "no-entry")
        if trust == "trusted":
            return EditPlan("trusted", "trusted-note", (_conclude("agent", "entry"),))
        if trust == "untrusted":
            return EditPlan("fleet", "untrusted-note", ({"do": "fleet-message", "field": "entry"},))
        if trust == "flagged":
            return EditPlan(None, "flagged-note-stays-local")
        return EditPlan(None, "note-with-unknown-trust")
    return EditPlan(None, "unknown-op")


def plan_undo(target_item: str, target: dict | None, already_undone: bool) -> EditPlan:
    """Undo of an edit (seed section 4): its conclusions deleted, any it had
    deleted written again; an untrusted note already in the fleet gets a
    retraction message beside it (Honcho cannot delete a message)."""
    if target is None:
        return EditPlan(None, "undo-target-unknown")
    if target["op"] == "undo":
        return EditPlan(None, "undo-of-an-undo")
    if already_undone:
        return EditPlan(None, "already-undone")
    if target["role"] is None:
        return EditPlan(None, "target-stayed-local")
    reverse: list[dict] = []
    for index, action in enumerate(target["actions"]):
        ref = f"{target_item}#{index}"
        if action["do"] == "conclude":
            reverse.append({"do": "unconclude", "of": ref})
        elif action["do"] == "unconclude":
            reverse.append({"do": "reconclude", "of": action["of"], "undoes": ref})
        elif action["do"] == "fleet-message":
            reverse.append({"do": "retract", "of": ref})
    # Deletes first, then writes again, mirroring the order of a replace.
    reverse.sort(key=lambda a: a["do"] != "unconclude")
    return EditPlan(target["role"], "undo", tuple(reverse))
