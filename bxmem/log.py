"""One line per event on stderr, with sd-daemon priority prefixes under systemd (JOURNAL_STREAM), and a
NOTICE level for the end of what a warning or error began. Callers pass ids, counts, statuses and reasons
only: never message text, a key or an HTTP error body.
"""

from __future__ import annotations

import logging
import os
import sys

from bxmem.errors import cite_runbook
from bxmem.runbooks import ENTRIES as RUNBOOK_ENTRIES

log = logging.getLogger("bxmem")

NOTICE = 25  # between INFO and WARNING, as syslog's notice is
logging.addLevelName(NOTICE, "NOTICE")

_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, NOTICE: 5, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


def notice(message: str) -> None:
    """Something a warning or an error began is over: the owner sees it under --quiet too."""
    log.log(NOTICE, message)


def runbook(entry: str) -> str:
    """The citation a log line ends with: a command the owner can run to read the entry."""
    if entry not in RUNBOOK_ENTRIES:
        raise ValueError(f"no runbook entry {entry!r}")
    return cite_runbook(entry)


def _stderr_is_journal() -> bool:
    stream = os.environ.get("JOURNAL_STREAM", "")
    try:
        device, inode = (int(x) for x in stream.split(":"))
        st = os.fstat(sys.stderr.fileno())
    except (ValueError, OSError):
        return False
    return (st.st_dev, st.st_ino) == (device, inode)


class _Formatter(logging.Formatter):
    def __init__(self, job: str, journal: bool) -> None:
        super().__init__()
        self.job = job
        self.journal = journal

    def format(self, record: logging.LogRecord) -> str:
        message = " ".join(record.getMessage().split())  # one line, always
        level = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        prefix = f"<{_PRIORITY.get(record.levelno, 6)}>" if self.journal else ""
        return f"{prefix}bxmem {self.job}: {level}{message}"


def setup(job: str, verbose: bool = False, quiet: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(job, _stderr_is_journal()))
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.DEBUG if verbose else NOTICE if quiet else logging.INFO)
