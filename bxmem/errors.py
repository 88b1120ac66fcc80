"""Typed errors and the exit codes they map to.

The CLI is the only place that turns these into a line on stderr and an exit
status, so every command behaves the same way when something goes wrong.
Stdlib only: the idle fast path imports this module.
"""

from __future__ import annotations

class ExitCode:
    """Exit statuses of every bxmem command (documented in docs/cli.md).

    Plain ints rather than an IntEnum: `enum` costs the lean paths 4 ms.
    """

    OK = 0
    #: An unexpected failure: a bug, or the machine refused (disk full, read-only home).
    ERROR = 1
    #: The command line was wrong (typer's own usage errors use 2 as well).
    USAGE = 2
    #: The job did what it could, but something it needs did not answer
    #: (brokerd, Honcho): work is left for a later run. Nothing was lost.
    DEGRADED = 3
    #: `bxmem sync`: the owner's attention is needed (failed items, refused key,
    #: a long outage, brokerd unavailable).
    ATTENTION = 4
    #: Something named on the command line does not exist (an unknown edit id, say).
    NOT_FOUND = 5
    #: The request is understood but cannot be done (an undo of an undo, an edit
    #: already undone). Nothing was written.
    REFUSED = 6
    #: `bxmem recall` / `bxmem ask`: no source answered (not even the local index).
    UNAVAILABLE = 7
    #: The configuration is invalid (runbook honcho-config-invalid). sysexits EX_CONFIG.
    CONFIG = 78

    @classmethod
    def members(cls) -> list[tuple[str, int]]:
        return [(name, value) for name, value in vars(cls).items() if name.isupper()]


class BxmemError(Exception):
    """An error with a one-line, secret-free message for the owner."""

    exit_code = ExitCode.ERROR
    runbook: str | None = None

    def one_line(self) -> str:
        text = " ".join(str(self).split())
        if self.runbook:
            text += f" (runbook {self.runbook})"
        return text


class ConfigInvalid(BxmemError):
    exit_code = ExitCode.CONFIG
    runbook = "honcho-config-invalid"


class UsageError(BxmemError):
    exit_code = ExitCode.USAGE


class NotFound(BxmemError):
    exit_code = ExitCode.NOT_FOUND


class Refused(BxmemError):
    exit_code = ExitCode.REFUSED


class StorageError(BxmemError):
    """The home folder refused a write (full disk, read-only, permissions)."""

    exit_code = ExitCode.ERROR


def report(exc: BaseException) -> int:
    """The one error boundary's output: one line on stderr, and the exit code.

    A BxmemError says what the owner can do; an OSError is the machine
    refusing (disk, permissions) and is not a bug, so it gets a line too, not
    a traceback. Anything else is re-raised: a bug should show where it is.
    """
    import sys

    if isinstance(exc, BxmemError):
        sys.stderr.write(f"bxmem: error: {exc.one_line()}\n")
        return exc.exit_code
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"bxmem: error: {exc.strerror or exc}{where}\n")
        return ExitCode.ERROR
    raise exc
