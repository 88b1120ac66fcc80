"""The runbook: what to do about each state bxmem reports, shipped inside the
package (bxmem/runbook/*.md), so `bxmem runbook NAME` can print an entry
wherever bxmem is installed (pipx, uv, a checkout). Every log line, error and
`sync` attention line that cites an entry names that command
(errors.cite_runbook).
"""

from __future__ import annotations

from pathlib import Path

from .errors import NotFound

# Each entry, and what it is about in one line (`bxmem runbook` lists them).
ENTRIES = {
    "honcho-unreachable": "Honcho does not answer: sends wait and are retried, nothing is lost",
    "honcho-send-refused": "Honcho (or bxmem itself) refused an item: it is marked failed",
    "honcho-key-refused": "Honcho refused a workspace's key: sends to it stop until the key file changes",
    "broker-state-unavailable": "brokerd cannot answer: finished turns wait undecided",
    "honcho-config-invalid": "bxmem.toml or a key file cannot be used: the jobs stop with exit 78",
    "honcho-held-by-config": "items wait that the configuration no longer lets go where they were decided",
}


def folder() -> Path:
    """Where the installed entries are (package data beside this module)."""
    return Path(__file__).resolve().parent / "runbook"


def text(entry: str) -> str:
    if entry not in ENTRIES:
        raise NotFound(f"no runbook entry {entry!r}; the entries are: {', '.join(ENTRIES)}")
    return (folder() / f"{entry}.md").read_text(encoding="utf-8")

