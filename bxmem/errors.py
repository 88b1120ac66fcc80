"""Typed errors, the exit codes they map to, and the one boundary every command runs inside.
Imports only the standard library and the registry: the lean path loads it.
"""

from __future__ import annotations

import json
import os
import sys

from bxmem.start.registry import COMMANDS


class ExitCode:
    """Exit statuses of every bxmem command; docs/cli.md is generated from MEANINGS and COMMAND_EXITS below. Plain
    ints rather than an IntEnum: the lean paths do not load `enum`."""

    OK = 0
    ERROR = 1
    USAGE = 2
    DEGRADED = 3
    ATTENTION = 4
    NOT_FOUND = 5
    REFUSED = 6
    UNAVAILABLE = 7
    INTEGRITY = 8
    # sysexits' EX_CONFIG
    CONFIG = 78
    # 128 + SIGINT, as a shell reports it
    INTERRUPTED = 130

    @classmethod
    def members(cls) -> list[tuple[str, int]]:
        return [(name, value) for name, value in vars(cls).items() if name.isupper()]


MEANINGS = {
    ExitCode.OK: "done",
    ExitCode.ERROR: "an unexpected failure (a bug, or the machine refused: disk full, read-only home)",
    ExitCode.USAGE: "the command line was wrong",
    ExitCode.DEGRADED: "done, but degraded: brokerd or Honcho did not answer, a session log could not be read, or decide ran "
    "out of its run budget "
    "(`send`: an outage, a workspace whose key is refused, items in doubt waiting to be looked up); "
    "work waits for a later run, nothing lost (`demo`: what Honcho was not sent goes with the demo's "
    "temporary home, unless --keep kept it)",
    ExitCode.ATTENTION: "the owner's attention is needed: `sync` (failed items, items held by the configuration, a "
    "workspace this agent wrote in another role, a refused key or a key file send would refuse, a "
    "long outage, brokerd unavailable, a session log decide cannot read, the last audit's "
    "discrepancies), `send` (it holds items the "
    "configuration no longer lets go where they were decided to; the rest was sent), `audit` (a "
    "discrepancy between Honcho and the ledger, not accepted), `doctor` (a check failed: each "
    "failed line names its runbook entry)",
    ExitCode.NOT_FOUND: "something named on the command line does not exist (an edit, an outbox item, an audit finding)",
    ExitCode.REFUSED: "understood but cannot be done (an undo of an undo, an edit already undone, `ask` or `audit` "
    "while local-only, an outbox item that cannot be dropped, resent or re-routed as asked, an "
    "`outbox` command or `sync --retry-failed` while a send holds the outbox); nothing written",
    ExitCode.UNAVAILABLE: "no source answered: `recall` / `ask` (not even the local index), `audit` (Honcho did not "
    "answer; the audit is incomplete), `doctor` (Honcho did not answer; what needs it was not "
    "checked)",
    ExitCode.INTEGRITY: "an artifact's bytes failed their integrity check (missing, truncated or replaced): `artifact "
    "resolve` and `export` give no path or copy, `verify` names each (see: bxmem runbook "
    "artifact-integrity-failed)",
    ExitCode.CONFIG: "the configuration is invalid or missing (see: bxmem runbook honcho-config-invalid), or the Boxmaker "
    "home it names does not exist (see: bxmem runbook home-missing); nothing was read or written",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}

_EVERY = (ExitCode.OK, ExitCode.ERROR, ExitCode.USAGE, ExitCode.CONFIG, ExitCode.INTERRUPTED)
COMMAND_EXITS = {
    command.name: _EVERY + tuple(getattr(ExitCode, code) for code in command.exits) for command in COMMANDS
}


def cite_runbook(entry: str) -> str:
    """How every line that names a runbook entry names it: a command that prints
    the entry (`bxmem runbook`), so the owner can open it wherever bxmem is installed."""
    return f" (see: bxmem runbook {entry})"


class BxmemError(Exception):
    """An error with a one-line, secret-free message for the owner."""

    exit_code = ExitCode.ERROR
    runbook: str | None = None

    def one_line(self) -> str:
        text = " ".join(str(self).split())
        if self.runbook:
            text += cite_runbook(self.runbook)
        return text


class ConfigInvalid(BxmemError):
    exit_code = ExitCode.CONFIG
    runbook = "honcho-config-invalid"


class HomeMissing(ConfigInvalid):
    """The Boxmaker home is not there (a wrong HOME, user or BOXMAKER_HOME): nothing
    is read from another place or created in its stead (store/paths.py's require_home)."""

    runbook = "home-missing"


class KeyFileInvalid(ConfigInvalid):
    """A key file bxmem will not use (config.read_key). It stops only what needs
    that one workspace: send stops the workspace until the file changes, recall
    and ask report it unavailable; `config check` and a job that needs every
    key stop with exit 78."""

    def __init__(self, secret: str, file: object, problem: str, hint: str | None = None) -> None:
        self.secret, self.file = secret, file
        self.problem = problem  # short, and names no path: recall and ask give it as a reason
        super().__init__(f"secrets.{secret}: key file {file} {problem}" + (f": {hint}" if hint else ""))


class UsageError(BxmemError):
    exit_code = ExitCode.USAGE


class NotFound(BxmemError):
    exit_code = ExitCode.NOT_FOUND


class Refused(BxmemError):
    exit_code = ExitCode.REFUSED


class Incomplete(BxmemError):
    """A command that could not finish because a server did not answer (`audit`)."""

    exit_code = ExitCode.UNAVAILABLE


class IntegrityFailed(BxmemError):
    """An artifact whose stored bytes are not the ones recorded: never resolved, never exported."""

    exit_code = ExitCode.INTEGRITY
    runbook = "artifact-integrity-failed"


class StorageError(BxmemError):
    """The home folder refused a write (full disk, read-only, permissions)."""

    exit_code = ExitCode.ERROR


ERROR_SCHEMA = "bxmem.error/1"  # what stdout holds when a command run with --json fails


def boundary(fn, *args, as_json: bool = False) -> int:
    """The one error boundary, for the lean path and the CLI alike. With `as_json`, stdout is one JSON document
    whatever happens: an error is an error document too."""
    try:
        return fn(*args)
    except KeyboardInterrupt:
        sys.stderr.write("bxmem: interrupted\n")
        return _document(as_json, ExitCode.INTERRUPTED, "interrupted", None)
    except (BxmemError, OSError) as exc:
        return report(exc, as_json)
    except Exception as exc:
        # A bug: its traceback goes to stderr as ever, and a script still gets a document.
        _document(as_json, ExitCode.ERROR, f"unexpected {type(exc).__name__} (a bug: the traceback is on stderr)", None)
        raise


def exit_code_of(exc: BaseException) -> int:
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return exc.exit_code if isinstance(exc, BxmemError) else ExitCode.ERROR


def error_document(code: int, message: str, runbook: str | None) -> dict:
    """`{"schema": "bxmem.error/1", "error": {"code", "message", "runbook"}, "exit_code"}`:
    `code` the exit code's name (docs/cli.md), `message` the line stderr gets."""
    names = {value: name for name, value in ExitCode.members()}
    return {
        "schema": ERROR_SCHEMA,
        "error": {"code": names.get(code, "ERROR"), "message": message, "runbook": runbook},
        "exit_code": code,
    }


def _document(as_json: bool, code: int, message: str, runbook: str | None) -> int:
    if as_json:
        try:
            sys.stdout.write(json.dumps(error_document(code, message, runbook), indent=2, sort_keys=True) + "\n")
        except BrokenPipeError:  # nobody reads stdout any more: the line on stderr has said it
            _drop_stdout()
    return code


def closed_stdout(code: int) -> int:
    """`bxmem ... | head -1`, or a reader that failed (`| jq BAD`): quiet, as
    click (the CLI's other path) and coreutils are, never a traceback; the run's
    exit code, ERROR where it was OK (its output was lost). stdout goes to
    /dev/null, so that nothing after (the interpreter's last flush included)
    writes to the closed pipe again."""
    _drop_stdout()
    return code or ExitCode.ERROR


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll's POLLERR on it):
    a BrokenPipeError from a socket of ours is not this, and keeps its own line."""
    import select  # deferred: lean

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # no stdout, or not a file
        return False


def _drop_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def report(exc: BaseException, as_json: bool = False) -> int:
    """The one error boundary's output: one line on stderr and the exit code. An OSError is the machine refusing
    (disk, permissions), not a bug, so it gets a line too; anything else is re-raised: a bug should show where it
    is."""
    if isinstance(exc, BxmemError):
        sys.stderr.write(f"bxmem: error: {exc.one_line()}\n")
        return _document(as_json, exc.exit_code, exc.one_line(), exc.runbook)
    if isinstance(exc, BrokenPipeError) and stdout_closed():
        return closed_stdout(ExitCode.ERROR)
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"bxmem: error: {exc.strerror or exc}{where}\n")
        return _document(as_json, ExitCode.ERROR, f"{exc.strerror or exc}{where}", None)
    raise exc
