"""Where text may go, as pure functions a reviewer holds against docs/design.md's tables ("Deciding",
"Memory writes") line by line. When a turn may be decided is trust/turn_order.py's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from bxmem.trust.labels import higher_class
from bxmem.trust.sanitize import find_secret

Role = Literal["trusted", "untrusted", "fleet"]

PEER_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")
SPEAKER_RE = re.compile(r"^[A-Za-z0-9._-]+$")  # Mattermost's username alphabet, in any case
DOT = "_Dot_"  # how a `.` is written in a peer id: Honcho ids have no `.`


def peer_name(speaker: str | None) -> str | None:
    """A speaker's name as a Honcho peer id, one peer per person, or None if it cannot be one.

    Letters are folded to lower case: Mattermost usernames are unique whatever
    their case, so `KYLE` is `kyle`. Each `.` is written `_Dot_`: its capital D
    is in no folded name, so `kyle.b` (`kyle_Dot_b`) and `kyle_b` stay two
    people. A name already a lower-case peer id is its own peer id.
    """
    if speaker is None or not speaker.isascii() or not SPEAKER_RE.fullmatch(speaker):
        return None
    name = speaker.lower().replace(".", DOT)
    return name if PEER_RE.fullmatch(name) else None


def look_alike(name: str) -> str:
    """What two names a reader could take for each other share: case, and `.`
    (or its `_Dot_`) against `_`, ignored."""
    return name.replace(DOT, ".").lower().replace(".", "_")


def owner_problem(owner: str, agent: str | None = None) -> str | None:
    """Why `[honcho] owner` can never be a speaker's peer (speaker_peer), so that every
    turn of the owner would go nowhere for good, and what to write instead; or None.

    | owner as written                       | why no speaker is it                        | write         |
    | `Kyle`                                 | speakers' names are folded to lower case     | `kyle`        |
    | `kyle.r`                               | a `.` is written `_Dot_` in a peer id        | `kyle_Dot_r`  |
    | like the agent's (`BoxMaker0`, `boxmaker_0` for `boxmaker.0`) | such a speaker is taken for the agent | another name  |
    """
    spoken = owner.replace(DOT, ".")
    written = peer_name(spoken)
    if written is None:
        return None  # not a name at all: the id rule says so
    if written != owner:
        how = "a `.` is written `_Dot_` in a peer id" if "." in owner else "speakers' names are folded to lower case"
        return f"no speaker's peer is ever {owner!r} ({how}): write {written!r}"
    if agent is not None and look_alike(owner) == look_alike(agent):
        return (
            f"{owner!r} reads as the agent {agent!r} (case, `.` and `_` aside): a speaker of that name is taken "
            "for the agent and kept out; the owner's peer must be the owner's own name"
        )
    return None


def speaker_peer(speaker: str, agent: str, owner: str | None) -> tuple[str | None, str | None]:
    """Who a named speaker is in Honcho: (their peer, None), or (None, why nowhere).
    `agent` and `owner` are the configured peer ids; the first row that holds decides:

    | the speaker's name                                          | peer        | why nowhere                  |
    | not letters, digits, `.`, `_`, `-`; too long for a peer id   | none        | speaker-not-a-peer-name      |
    | the agent's, or like it (`BoxMaker0`, `boxmaker.0`)         | none        | speaker-is-the-agent         |
    | the owner's once folded (`KYLE` for `kyle`)                 | the owner's |                              |
    | like the owner's, but another person's (`kyle.b`, `kyle_b`) | none        | speaker-named-like-the-owner |
    | any other                                                   | its own     |                              |
    """
    peer = peer_name(speaker)
    if peer is None:
        return None, "speaker-not-a-peer-name"
    why = _named_like(peer, look_alike(speaker), agent, owner)
    return (None, why) if why else (peer, None)


def peer_problem(peer: str, agent: str, owner: str | None) -> str | None:
    """Why a decided speaker's peer id may not carry their words under this agent
    and owner, or None: speaker_peer's rows on the peer id it made, read by
    look_alike as the name it came from. `send` holds a decided turn to them
    again, since the agent or the owner may have been renamed after the decision."""
    if not PEER_RE.fullmatch(peer):
        return "speaker-not-a-peer-name"
    return _named_like(peer, look_alike(peer), agent, owner)


def _named_like(peer: str, alike: str, agent: str, owner: str | None) -> str | None:
    """The agent and owner rows of speaker_peer, for a peer id and what it looks like."""
    if peer == agent or alike == look_alike(agent):
        # A person named like the agent would have their words written as the
        # agent's own, which Honcho treats as unobserved agent output.
        return "speaker-is-the-agent"
    if owner is not None and peer != owner and alike == look_alike(owner):
        # Another account whose name reads as the owner's: kept out rather
        # than written beside the owner's words under a near-identical name.
        return "speaker-named-like-the-owner"
    return None


@dataclass(frozen=True)
class TurnFacts:
    """What is known about a finished turn when it is decided."""

    status: str | None  # the turn_end status; None if the record lacks one
    has_text: bool  # the speaker's message was logged with its text
    has_reply: bool  # a final assistant line exists
    speaker: str | None  # as loopd logged it (None: absent, null, or several people)
    log_unreadable: bool  # a line of the session's log bxmem could not read came before the turn's end
    untrusted_by_log: bool  # any tool_result of the session so far was labelled untrusted
    log_class: str  # the highest label class of the session's tool results so far
    untrusted_by_broker: bool
    broker_class: str
    secret_in_text: bool  # a known-prefix secret in the speaker's text or the reply


@dataclass(frozen=True)
class Route:
    role: Role | None  # None: nowhere
    reason: str
    session_class: str  # the session's class (higher of brokerd's and the labels'), recorded with the turn
    peer: str | None = None  # the speaker's peer, when the turn goes somewhere


class LogLabels(NamedTuple):
    """What a session's log says of it, up to some line."""

    untrusted: bool
    trust_class: str
    unreadable: dict | None  # the first line bxmem could not read ({"line", "why"}), if any


CLEAN_LOG = LogLabels(False, "public", None)


def after_line(labels: LogLabels, untrusted: bool, trust_class: str, unreadable: dict | None = None) -> LogLabels:
    """The session's log labels after one more labelled line (docs/design.md, "Deciding"):

    | the line                               | untrusted         | class            | unreadable      |
    | a tool result with a readable label    | sticky: or-ed in  | the higher       | as before       |
    | a line bxmem cannot read (`unreadable`) | yes (labels.UNREADABLE_LINE: untrusted, secret) | the first one |

    Labels only ever rise: a session untrusted, secret or unreadable stays so."""
    return LogLabels(
        labels.untrusted or untrusted, higher_class(labels.trust_class, trust_class), labels.unreadable or unreadable
    )


def log_labels(at_end: LogLabels, now: LogLabels, late: bool) -> LogLabels:
    """The log's labels a turn is decided with (a late one: docs/design.md, "Deciding").

    | decided                        | takes the log's labels                   |
    | on time                        | up to and including the turn's end       |
    | late (brokerd did not answer)  | as of now, like brokerd's: never lower   |

    So a late decision can only move a turn towards untrusted or nowhere; a
    line unreadable since its end makes a late turn unreadable too."""
    if not late:
        return at_end
    return after_line(at_end, now.untrusted, now.trust_class, now.unreadable)


def route_turn(facts: TurnFacts, agent_peer: str, owner_peer: str | None = None) -> Route:
    """Where a finished turn goes (docs/design.md, "Deciding"),
    the first row that holds deciding:

    | the turn's session at its end                         | goes to   | reason                  |
    | its log holds a line bxmem could not read, before     | nowhere   | log-unreadable          |
    | the turn's end (untrusted and secret from that line)  |           |                         |
    | not completed                                         | nowhere   | turn-not-completed      |
    | no user text                                          | nowhere   | no-user-text            |
    | no final reply                                        | nowhere   | no-final-reply          |
    | class secret (or a class nobody knows)                | nowhere   | secret-session          |
    | no speaker, or incomplete speaker information         | nowhere   | no-speaker              |
    | the speaker is no one's peer (`speaker_peer`)         | nowhere   | its reason              |
    | the text holds a known-prefix secret                  | nowhere   | secret-in-text          |
    | untrusted (read untrusted content), public or private | untrusted | untrusted-session       |
    | clean, class public or private                        | trusted   | clean                   |

    Untrusted if either brokerd or loopd's labels say so; the class is the
    higher of brokerd's and the labels', computed here once and recorded with
    the turn whatever its route. A public turn goes where a private one does:
    public records where a result came from, not a permission.
    """
    session_class = higher_class(facts.broker_class, facts.log_class)

    def nowhere(reason: str) -> Route:
        return Route(None, reason, session_class)

    if facts.log_unreadable:
        # First: what the log says of the turn (its status, text, reply) cannot be relied on.
        return nowhere("log-unreadable")
    if facts.status != "completed":
        return nowhere("turn-not-completed")
    if not facts.has_text:
        return nowhere("no-user-text")
    if not facts.has_reply:
        return nowhere("no-final-reply")
    if session_class == "secret":
        return nowhere("secret-session")
    if facts.speaker is None:
        return nowhere("no-speaker")
    peer, why = speaker_peer(facts.speaker, agent_peer, owner_peer)
    if peer is None:
        return nowhere(why or "speaker-not-a-peer-name")
    if facts.secret_in_text:
        return nowhere("secret-in-text")
    if facts.untrusted_by_broker or facts.untrusted_by_log:
        return Route("untrusted", "untrusted-session", session_class, peer)
    return Route("trusted", "clean", session_class, peer)


def send_veto(speaker_text: str, reply: str) -> str | None:
    """Why a decided turn may not leave after all, read back at send time: its
    texts hold a known-prefix secret (a log rewritten since the decision, or a
    rule added since). None: it may go."""
    rule = find_secret(speaker_text) or find_secret(reply)
    return f"holds a secret ({rule})" if rule else None


# --- memory writes (docs/design.md, "Memory writes") ---------------------------------

IDENTITY_FILES = ("memory.md", "user.md")
MAX_CONCLUSION_CHARS = 65_535


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
    action: dict = {"do": "conclude", "about": about, "field": field}
    if index is not None:
        action["index"] = index
    return action


@dataclass(frozen=True)
class EditFacts:
    """What is known about a journalled edit's texts when it is decided (mirror
    gathers it: `edit_facts`)."""

    live: Mapping[str, str]  # a text the edit names -> the ref (`edit:<id>#<i>`) of its live conclusion
    entry_secret: str | None = None  # the secret rule the entry matches, if any
    entry_chars: int | None = None  # the entry's length once neutralised; None: no entry text


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def plan_edit(record: dict, facts: EditFacts) -> EditPlan:
    """Where an edit goes (docs/design.md, "Memory writes"), then `veto_texts`:

    | journalled edit                              | in Honcho                                      |
    | identity add (memory.md or user.md)          | a conclusion in the trusted workspace          |
    | identity replace                             | the old entry's conclusion deleted, new created |
    | identity remove, or dropped by consolidate   | its conclusion deleted                         |
    | moved out of identity by consolidate         | nothing: its conclusion is already there       |
    | a trusted note                               | a conclusion in the trusted workspace          |
    | an untrusted note                            | a message in the fleet workspace               |
    | a flagged note                               | nothing: it stays local                        |

    `facts.live` names the ref of the live conclusion for each text the record
    names (about the file's subject, `about_for`), where one was written.
    Undo is `plan_undo`.
    """
    return veto_texts(_route_edit(record, facts.live.get), facts)


def _route_edit(record: dict, live_ref) -> EditPlan:
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
        ref = live_ref(old) if isinstance(old, str) else None
        actions: tuple[dict, ...] = ({"do": "unconclude", "of": ref},) if ref else ()
        reason = "identity-replace" if ref else "identity-replace; old entry was never mirrored"
        return EditPlan("trusted", reason, actions + (_conclude(about, "entry"),))
    if op == "identity_remove":
        entry = record.get("entry")
        ref = live_ref(entry) if isinstance(entry, str) else None
        if ref is None:
            return EditPlan(None, "removed-entry-was-never-mirrored")
        return EditPlan("trusted", "identity-remove", ({"do": "unconclude", "of": ref},))
    if op == "consolidate":
        dropped = _list(record.get("dropped"))
        refs = [live_ref(entry) for entry in dropped if isinstance(entry, str)]
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


def veto_texts(plan: EditPlan, facts: EditFacts) -> EditPlan:
    """Entries that cannot or must not become conclusions or fleet messages stay local:

    | the entry a conclusion or fleet message would carry     | reason                             |
    | missing                                                 | no-entry                           |
    | holds a known-prefix secret                             | secret-in-entry (<rule>)           |
    | a conclusion: empty, or over 65,535 characters          | entry-not-1-to-65535-characters    |
    """
    writes = [a["do"] for a in plan.actions if a["do"] in ("conclude", "fleet-message")]
    if not writes:
        return plan
    if facts.entry_chars is None:
        return EditPlan(None, "no-entry")
    if facts.entry_secret:
        return EditPlan(None, f"secret-in-entry ({facts.entry_secret})")
    if "conclude" in writes and not 1 <= facts.entry_chars <= MAX_CONCLUSION_CHARS:
        return EditPlan(None, f"entry-not-1-to-{MAX_CONCLUSION_CHARS}-characters")
    return plan


def plan_undo(target_item: str, target: dict | None, already_undone: bool) -> EditPlan:
    """Undo of an edit (docs/design.md, "Memory writes"): its conclusions deleted, any it had
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
