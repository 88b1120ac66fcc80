"""The runbook's entries (top-level `runbook/*.md`, carried by every install, so `bxmem runbook NAME` works
wherever bxmem is installed), and how a line cites one (errors.cite_runbook).
"""

from __future__ import annotations

from pathlib import Path

from bxmem.errors import NotFound
from bxmem.start.locations import shipped

# Each entry, and what it is about in one line (`bxmem runbook` lists them).
ENTRIES = {
    "honcho-unreachable": "Honcho does not answer: sends wait and are retried, nothing is lost",
    "honcho-send-refused": "Honcho (or bxmem itself) refused an item: it is marked failed",
    "honcho-key-refused": "Honcho refused a workspace's key: sends to it stop until the key file changes",
    "broker-state-unavailable": "brokerd cannot answer: finished turns wait undecided",
    "log-unreadable": "a session log cannot be read (permissions, an I/O error): its turns wait undecided",
    "honcho-config-invalid": "bxmem.toml or a key file cannot be used: the jobs stop with exit 78",
    "honcho-held-by-config": "items wait that the configuration no longer lets go where they were decided",
    "honcho-in-doubt": "an item's request got no answer: it is looked up in Honcho before anything is sent again",
    "honcho-session-deleted": "Honcho deleted a session bxmem writes to: its turns fail until resent or dropped",
    "audit-missing": "audit: a message the ledger records as sent is not in Honcho",
    "audit-duplicate": "audit: a part of an item is in Honcho more than once",
    "audit-misrouted": "audit: an item is in a workspace its decision did not name",
    "audit-role-changed": "audit: an item is where it was decided, but that workspace's role has changed since",
    "audit-not-recorded": "audit: a message carries a bxmem item the ledger never sent",
    "audit-foreign-agent-message": "audit: a message under this agent's peer that its bxmem did not write",
    "audit-missing-conclusion": "audit: a conclusion the ledger says is live is not in Honcho",
    "audit-unexpected-conclusion": "audit: a conclusion of the agent's or owner's peer that bxmem did not write",
    "audit-duplicate-conclusion": "audit: a conclusion is in Honcho twice (a create stored after bxmem looked for it)",
    "honcho-workspace-reused": "a workspace holds what this agent wrote to it in another role: nothing more is written to it",
    "artifact-integrity-failed": "an artifact's stored bytes are not the ones recorded: it is never resolved or exported",
    "artifact-quota": "the artifact store is at a bound (one artifact's size, all bytes, cards): records are refused",
    "artifact-not-queued": "a card is kept on this host but its decision is not yet in the outbox (a record cut short)",
    "honcho-auth-off": "doctor: Honcho answers without a key, so it takes any key and checks none",
    "honcho-version": "doctor: Honcho has neither workspace chat nor peer chat: ask cannot work with it",
    "clock-off": "doctor: this host's clock and Honcho's are a minute or more apart",
    "file-permissions": "doctor: the config, the home or the ledger can be changed by someone else, or is missing",
    "units-not-running": "doctor: a job's timer is not installed, enabled or running, or its last run failed",
    "owner-name": "turns are decided nowhere because the speaker's name reads as the owner's or the agent's",
    "home-missing": "the Boxmaker home is not there: every command stops with exit 78 and creates nothing",
    "clock-wrong": "times bxmem stored lie in the future: the clock was ahead, or is behind; no wait outlasts its bound",
    "ledger-rewritten": "the ledger was restored, edited or replaced in place: bxmem folded it again, sending nothing twice",
    "state-rewritten": "a file in memory/bxmem/ was changed outside bxmem: it is rebuilt, nothing lost or sent twice",
}


def folder() -> Path:
    """Where the entries are: the package's copy, or the checkout's runbook/."""
    return Path(shipped("runbook"))


def text(entry: str) -> str:
    if entry not in ENTRIES:
        raise NotFound(f"no runbook entry {entry!r}; the entries are: {', '.join(ENTRIES)}")
    return (folder() / f"{entry}.md").read_text(encoding="utf-8")
