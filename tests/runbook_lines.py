"""A runbook citation as bxmem writes it, for the tests whose point is that a line cites
an entry: built from bxmem's own table (bxmem/runbooks.py), so a test cannot cite an entry
bxmem does not have. The citation's exact text is held once, in tests/test_docs.py."""

from __future__ import annotations

from bxmem.errors import cite_runbook
from bxmem.runbooks import ENTRIES


def cites(entry: str) -> str:
    """What a line ends with when it cites `entry`: " (see: bxmem runbook ENTRY)"."""
    assert entry in ENTRIES, f"bxmem has no runbook entry {entry!r}"
    return cite_runbook(entry)
