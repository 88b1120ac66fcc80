"""Which workspaces `bxmem ask` asks, with what tag (the configuration's, held to what the ledger says
this agent wrote there: `as_written`), and whose memory it asks by peer chat on a server without workspace chat.
"""

from __future__ import annotations

from dataclasses import dataclass

from bxmem.config.loader import Config
from bxmem.errors import Refused, UsageError
from bxmem.store.workspace_roles import tainting_notes
from bxmem.trust.labels import MEMORY, OWN_LABELS, TAINTED, read_tag

PEERS_AT_MOST = 6


@dataclass
class Target:
    name: str  # as the caller named it
    role: str  # config role
    tag: str
    trust_class: str
    note: str | None = None  # why it is not tagged as configured (as_written)


def targets(config: Config, names: list[str]) -> list[Target]:
    if config.honcho is None:
        raise Refused("bxmem is local-only (no [honcho] section): there is no workspace to ask")
    known = {
        "own": Target("own", "trusted", *OWN_LABELS["trusted"]),
        "untrusted": Target("untrusted", "untrusted", *OWN_LABELS["untrusted"]),
        "fleet": Target("fleet", "fleet", *OWN_LABELS["fleet"]),
    }
    for source in config.honcho.read:
        known[source.agent] = Target(source.agent, f"read:{source.agent}", read_tag(source.trust), source.trust_class)
    chosen = []
    for name in names or ["own"]:
        if name not in known:
            raise UsageError(f"unknown workspace name {name!r} (known: {', '.join(known)})")
        if known[name] not in chosen:
            chosen.append(known[name])
    # A keyless workspace is asked without a key (config.keyless_among_keyed): a server with auth on answers 401, that
    # workspace's unavailable line.
    return as_written(config, chosen)


def as_written(config: Config, chosen: list[Target]) -> list[Target]:
    """Those tagged memory held to what the ledger says this agent wrote there (workspace_roles)."""
    trusted = {config.workspace(t.role).name: t for t in chosen if t.tag == MEMORY}
    if trusted:
        for ws, why in tainting_notes(config.paths.state, config.paths.ledger, trusted).items():
            trusted[ws].tag, trusted[ws].note = TAINTED, why
    return chosen


def peers_to_ask(config: Config, target: Target, listed: list[str]) -> tuple[list[str], int]:
    """Whose memory is in the workspace, as workspace chat would search it: in the agent's own workspaces the owner's
    peer and the agent's; in another agent's and the fleet every peer (the fleet holds each agent's notes under
    its own), that agent's and the owner's first. Only listed peers: a chat on a missing peer would create it.
    Returns the peers and how many were left out."""
    assert config.honcho is not None
    listed = list(dict.fromkeys(listed))  # a peer listed twice is asked once
    if target.role in ("trusted", "untrusted"):
        return [p for p in (config.honcho.owner, config.honcho.agent) if p in listed], 0
    first = [target.role.removeprefix("read:"), config.honcho.owner] if target.role.startswith("read:") else []
    ordered = [p for p in first if p in listed] + [p for p in listed if p not in first]
    return ordered[:PEERS_AT_MOST], max(0, len(ordered) - PEERS_AT_MOST)
