"""Every bxmem command, written once: name, function, exit codes and, for the lean commands, options; the
typer commands are held to it by tests/test_registry.py. Imports nothing: the idle check reads it every run.
"""

from __future__ import annotations

#: Options every command takes, before or after the command word: name -> key.
GLOBAL_OPTIONS = {"--config": "config", "-v": "verbose", "--verbose": "verbose", "-q": "quiet", "--quiet": "quiet"}
#: The global options that take a value (the rest are flags).
GLOBAL_VALUED = ("--config",)


class Command:
    """One command.

    `run` is "module:function". For a lean command (one with `options`) it is
    the plain function the lean path and the CLI both call, with the parsed
    options as keyword arguments named by their keys; for any other command it
    is the typer command function, which only the CLI runs.

    `exits` names the exit codes (errors.ExitCode's names) the command may end
    with besides the ones every command may (errors.COMMAND_EXITS adds those).

    `options` (name -> key), `valued` and `positional` are the lean grammar's:
    None for a command only typer parses. `timer_job`: a timer fires it, so the
    idle check may answer it. `progress`: at a terminal it may show a progress bar (a backlog, an index rebuild),
    which is rich's, so a run a person watches goes to the full CLI.
    """

    __slots__ = ("name", "run", "exits", "options", "valued", "positional", "timer_job", "progress")

    def __init__(
        self,
        name: str,
        run: str,
        exits: tuple[str, ...] = (),
        *,
        options: dict[str, str] | None = None,
        valued: tuple[str, ...] = (),
        positional: str | None = None,
        timer_job: bool = False,
        progress: bool = False,
    ) -> None:
        self.name, self.run, self.exits = name, run, exits
        self.options, self.valued, self.positional = options, valued, positional
        self.timer_job, self.progress = timer_job, progress

    def __repr__(self) -> str:
        return f"Command({self.name!r}, {self.run!r})"


_RUN = "bxmem.commands.lean_commands"
_APP = "bxmem.cli.app"
_OWNER = "bxmem.cli.owner"
_AGENT = "bxmem.cli.agent"
_HOST = "bxmem.cli.host"
_ARTIFACT = "bxmem.cli.artifacts"
_JSON = {"--json": "json"}

COMMANDS = (
    Command("decide", f"{_RUN}:decide", ("DEGRADED",), options=_JSON, timer_job=True, progress=True),
    Command("mirror", f"{_RUN}:mirror", options=_JSON, timer_job=True, progress=True),
    Command("send", f"{_RUN}:send", ("DEGRADED", "ATTENTION"), options={**_JSON, "--now": "now"}, timer_job=True),
    Command(
        "recall",
        f"{_RUN}:recall",
        ("UNAVAILABLE",),
        options={"--json": "json", "-k": "k", "--explain": "explain"},
        valued=("-k",),
        positional="query",
    ),
    Command("undo", f"{_APP}:undo", ("NOT_FOUND", "REFUSED")),
    Command("ask", f"{_AGENT}:ask", ("REFUSED", "UNAVAILABLE")),
    # REFUSED: --retry-failed while a send holds the outbox.
    Command("sync", f"{_APP}:sync", ("ATTENTION", "REFUSED")),
    Command("audit", f"{_APP}:audit", ("ATTENTION", "NOT_FOUND", "REFUSED", "UNAVAILABLE")),
    Command("outbox list", f"{_OWNER}:outbox_list"),
    Command("outbox drop", f"{_OWNER}:outbox_drop", ("NOT_FOUND", "REFUSED")),
    Command("outbox resend", f"{_OWNER}:outbox_resend", ("NOT_FOUND", "REFUSED")),
    Command("outbox reroute", f"{_OWNER}:outbox_reroute", ("NOT_FOUND", "REFUSED")),
    # record: a file that is not there (NOT_FOUND), refused (not a regular file, changed while read, over a quota,
    # artifact memory off); resolve, export, verify: bytes that fail their integrity check (INTEGRITY).
    Command("artifact record", f"{_ARTIFACT}:artifact_record", ("NOT_FOUND", "REFUSED")),
    Command("artifact resolve", f"{_ARTIFACT}:artifact_resolve", ("NOT_FOUND", "REFUSED", "INTEGRITY")),
    Command("artifact list", f"{_ARTIFACT}:artifact_list"),
    Command("artifact verify", f"{_ARTIFACT}:artifact_verify", ("NOT_FOUND", "INTEGRITY")),
    Command("artifact export", f"{_ARTIFACT}:artifact_export", ("NOT_FOUND", "REFUSED", "INTEGRITY")),
    Command("artifact rm", f"{_ARTIFACT}:artifact_rm", ("NOT_FOUND", "REFUSED")),
    Command("tools", f"{_AGENT}:tools"),
    Command("schema", f"{_AGENT}:schema"),
    # USAGE (as every command): a --honcho that is not a URL; DEGRADED: a Honcho that did not answer.
    Command("demo", f"{_APP}:demo", ("DEGRADED",)),
    Command("config check", f"{_APP}:config_check"),
    Command("index rebuild", f"{_APP}:index_rebuild"),
    Command("runbook", f"{_APP}:runbook", ("NOT_FOUND",)),
    # REFUSED: a configuration is there already (never written over), or a --keys file is missing.
    Command("init", f"{_HOST}:init", ("REFUSED",)),
    # REFUSED: no Boxmaker home for the units (init makes it), --system not under sudo, a path a unit cannot hold.
    Command("units print", f"{_HOST}:units_print", ("REFUSED",)),
    Command("units install", f"{_HOST}:units_install", ("REFUSED",)),
    Command("units uninstall", f"{_HOST}:units_uninstall", ("REFUSED",)),
    # ATTENTION: a check failed; UNAVAILABLE: Honcho did not answer (what needs it was not checked).
    Command("doctor", f"{_HOST}:doctor", ("ATTENTION", "UNAVAILABLE")),
    Command("metrics", f"{_HOST}:metrics"),
)

BY_NAME = {command.name: command for command in COMMANDS}
