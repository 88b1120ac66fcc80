"""Whether a pending item may still go where it was decided to, under today's configuration (docs/design.md,
"Sending"); otherwise it is held with a stable reason. Pure, like trust/rules.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from bxmem.trust.rules import peer_problem
from bxmem.trust.send_retry import ALONE

WRITE_ROLES = ("trusted", "untrusted", "fleet")

# The held reasons: stable names that `sync --json` reports and owner commands key on.
READ_SOURCE = "read-source"  # the workspace is configured as a [[honcho.read]] source
NOT_CONFIGURED = "not-configured"  # the workspace is none of this agent's workspaces now
ROLE_CHANGED = "role-changed"  # the workspace is one of ours, in another role
ROLE_UNKNOWN = "role-unknown"  # the decision records no role that can be checked
BEHIND_HELD_EDIT = "behind-held-edit"  # an edit that names a held edit (removes or undoes what it writes)
WORKSPACE_REUSED = "workspace-reused"  # the workspace holds what this agent wrote to it in another role
# the speaker rules' reasons (rules.speaker_peer) for a turn's peer under the agent and owner configured now
PEER_IS_THE_AGENT = "speaker-is-the-agent"
PEER_LIKE_THE_OWNER = "speaker-named-like-the-owner"
PEER_NOT_A_NAME = "speaker-not-a-peer-name"  # the decision records no peer id (a damaged ledger line)
NO_WRITES: Mapping[str, Mapping[str, str]] = {}


@dataclass(frozen=True)
class Held:
    """Why an item does not go: the workspace it would write to, the role its
    decision recorded, and the workspace's role in the configuration now
    (trusted, untrusted, fleet, `read:<agent>`, or None: not configured).
    `written_as` and `first`: the other role a reused workspace was written as,
    and the first item written so; `peer`: a refused turn's speaker peer."""

    reason: str
    workspace: str | None
    role: str | None
    now: str | None
    written_as: str | None = None
    first: str | None = None
    peer: str | None = None

    def explain(self) -> str:
        """One clause, no text and no key: what the configuration says now."""
        ws = self.workspace
        if self.reason == READ_SOURCE:
            return f"{ws} is now configured as a read source ({self.now}); bxmem never writes to it"
        if self.reason == NOT_CONFIGURED and ws is None:
            return "its decision names no workspace bxmem can read (a damaged ledger line)"
        if self.reason == NOT_CONFIGURED:
            return f"{ws} is not one of this agent's workspaces in the configuration any more"
        if self.reason == ROLE_CHANGED:
            return f"{ws} is now this agent's {self.now} workspace, not its {self.role} one"
        if self.reason == BEHIND_HELD_EDIT:
            return "it names an earlier edit that is held (what it removes or undoes), and waits behind it"
        if self.reason == WORKSPACE_REUSED:
            return (
                f"{ws} already holds what this agent wrote to it as its {self.written_as} workspace (the first: "
                f"{self.first}); bxmem never writes one workspace in two roles"
            )
        if self.reason == PEER_IS_THE_AGENT:
            return (
                f"its speaker's peer {self.peer} reads as the agent's own name now: written, a person's words "
                "would be taken for the agent's"
            )
        if self.reason == PEER_LIKE_THE_OWNER:
            return f"its speaker's peer {self.peer} reads as the owner's name now, and is not the owner's peer"
        if self.reason == PEER_NOT_A_NAME:
            return "its decision records no speaker peer that can be checked (a damaged ledger line)"
        return f"its decision records no role for {ws} that can be checked"


def roles_of(workspaces: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name: role for role, name in workspaces}


def check_write(
    workspace: object,
    recorded_role: object,
    roles: Mapping[str, str],
    written: Mapping[str, Mapping[str, str]] = NO_WRITES,
) -> Held | None:
    """May something decided for `recorded_role` be written to `workspace` now?
    `written` is what the ledger says each workspace was written as ({workspace:
    {role: the first item written so}}, store/workspace_roles.py).

    | the workspace now                                   | held, reason      |
    | a [[honcho.read]] source                            | read-source       |
    | not configured at all                               | not-configured    |
    | the decision recorded no write role                 | role-unknown      |
    | one of ours, in another role                        | role-changed      |
    | one of ours, in the role decided, but this agent    | workspace-reused  |
    | wrote it as another role before                     |                   |
    | one of ours, in the role decided, written only so   | no: it may go     |
    """
    name = workspace if isinstance(workspace, str) else None
    now = roles.get(name) if name is not None else None
    role = recorded_role if isinstance(recorded_role, str) else None
    if now is not None and now not in WRITE_ROLES:
        return Held(READ_SOURCE, name, role, now)
    if now is None:
        return Held(NOT_CONFIGURED, name, role, None)
    if role not in WRITE_ROLES:
        return Held(ROLE_UNKNOWN, name, role, now)
    if now != role:
        return Held(ROLE_CHANGED, name, role, now)
    assert name is not None  # `now` came from it
    for other, first in sorted((written.get(name) or {}).items()):
        if other != role:
            return Held(WORKSPACE_REUSED, name, role, now, written_as=other, first=first)
    return None


def _peer_held(why: str, peer: object, workspace: object, role: object, roles: Mapping[str, str]) -> Held:
    """A turn held because its speaker's peer may not be written now (rules.peer_problem)."""
    name = workspace if isinstance(workspace, str) else None
    return Held(
        why,
        name,
        role if isinstance(role, str) else None,
        roles.get(name) if name is not None else None,
        peer=peer if isinstance(peer, str) else None,
    )


def writable(workspace: str, roles: Mapping[str, str]) -> bool:
    return roles.get(workspace) in WRITE_ROLES


def writes_of(
    decision: Mapping, conclusions: Mapping[str, dict], fleet: Mapping[str, dict]
) -> list[tuple[object, object]]:
    """Every (workspace, role) an item would write to: the one its decision names,
    and for an edit the workspace of each conclusion it deletes or writes again
    (trusted) and of each fleet note it retracts (fleet), for a card's retraction
    the card's workspace (the role decided), which may be another workspace than
    the item's own when the configuration changed in between."""
    writes: list[tuple[object, object]] = [(decision.get("ws"), decision.get("role"))]
    actions = (decision.get("actions") or []) if decision.get("kind") in ALONE else []
    for action in actions:
        if not isinstance(action, dict):
            continue
        if action.get("do") in ("unconclude", "reconclude"):
            target = conclusions.get(action.get("of"))  # type: ignore[arg-type]
            if target is not None:
                writes.append((target.get("ws"), "trusted"))
        elif action.get("do") == "retract":  # a fleet note's retraction goes beside the note
            note = fleet.get(action.get("of"))  # type: ignore[arg-type]
            if note is not None:
                writes.append((note.get("ws"), "fleet"))
        elif action.get("do") == "retract-card":  # beside the card, in the workspace of the role it went as
            card = fleet.get(action.get("of"))  # type: ignore[arg-type]
            if card is not None:
                writes.append((card.get("ws"), decision.get("role")))
    return writes


def check_item(
    writes: Iterable[tuple[object, object]],
    roles: Mapping[str, str],
    written: Mapping[str, Mapping[str, str]] = NO_WRITES,
) -> Held | None:
    """The first write that may not happen now, or None when all may."""
    for workspace, role in writes:
        held = check_write(workspace, role, roles, written)
        if held is not None:
            return held
    return None


@dataclass
class Holds:
    """The outbox's items held by the configuration, in outbox order."""

    held: dict[str, Held] = field(default_factory=dict)

    def groups(self, kind_of: Callable[[str], str]) -> list[dict]:
        """Counts by (workspace, recorded role, role now, reason): what sync and send report."""
        out: dict[tuple, dict] = {}
        for item, why in self.held.items():
            key = (why.workspace, why.role, why.now, why.reason, why.written_as, why.peer)
            group = out.setdefault(
                key,
                {
                    "workspace": why.workspace,
                    "role": why.role,
                    "now": why.now,
                    "reason": why.reason,
                    "explain": why.explain(),
                    "turns": 0,
                    "edits": 0,
                    "cards": 0,
                    "oldest": item,
                },
            )
            kind = kind_of(item)
            group["edits" if kind == "edit" else "cards" if kind == "card" else "turns"] += 1
        return list(out.values())


def depends_on(decision: Mapping) -> set[str]:
    """The earlier edits an edit names: whose conclusion it deletes or writes again,
    whose note it retracts, which edit it undoes."""
    named: set[str] = set()
    for action in decision.get("actions") or []:
        for key in ("of", "undoes"):
            ref = action.get(key) if isinstance(action, dict) else None
            if isinstance(ref, str):
                named.add(ref.rpartition("#")[0])
    if isinstance(decision.get("target"), str):
        named.add(decision["target"])
    return named


@dataclass(frozen=True)
class Now:
    """What an item is checked against at send time: each workspace's role now (`roles_of`), what the ledger says
    each was written as, and the agent's and owner's peer ids as configured."""

    roles: Mapping[str, str]
    written: Mapping[str, Mapping[str, str]]
    agent: str
    owner: str | None


def hold_pending(
    pending: Iterable[tuple[str, object, object, str, object]],
    now: Now,
    decision_of: Callable[[str], Mapping],
    conclusions: Mapping[str, dict],
    fleet: Mapping[str, dict],
) -> Holds:
    """Which pending items (item, workspace, recorded role, kind, peer), in outbox order, are held. An edit that
    names a held edit (`depends_on`) waits behind it, so edits never overtake what they refer to; other edits go
    on."""
    holds = Holds()
    roles, written = now.roles, now.written
    # What check_write lets go: one of ours, in its role, written as no other.
    fine = {
        (name, role)
        for name, role in roles.items()
        if role in WRITE_ROLES and not set(written.get(name) or ()) - {role}
    }
    problems: dict[object, str | None] = {}  # a run has few speakers: each is checked once
    for item, workspace, role, kind, peer in pending:
        fast = kind not in ALONE and isinstance(workspace, str) and isinstance(role, str) and (workspace, role) in fine
        why = None if fast else check_write(workspace, role, roles, written)  # fast: a set lookup, not a call
        if why is None and kind not in ALONE:  # a turn: its speaker's peer too (edits and cards are the agent's)
            key = peer if isinstance(peer, str) else None
            if key not in problems:
                problems[key] = peer_problem(key, now.agent, now.owner) if key is not None else PEER_NOT_A_NAME
            problem = problems[key]
            if problem is not None:
                why = _peer_held(problem, peer, workspace, role, roles)
        if why is None and kind in ALONE:
            decision = decision_of(item)
            why = check_item(writes_of(decision, conclusions, fleet), roles, written)
            if why is None and depends_on(decision) & holds.held.keys():
                why = Held(
                    BEHIND_HELD_EDIT,
                    workspace if isinstance(workspace, str) else None,
                    role if isinstance(role, str) else None,
                    roles.get(workspace) if isinstance(workspace, str) else None,
                )
        if why is not None:
            holds.held[item] = why
    return holds
