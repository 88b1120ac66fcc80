"""The typer app: one small function per command over the typed core, declared once in start/registry.py."""

from __future__ import annotations

from pathlib import Path

import typer

from bxmem.cli import agent, help, output
from bxmem.cli.artifacts import artifact_app
from bxmem.cli.common import CONFIG_HELP, JSON_OPTION, QUIET_HELP, VERBOSE_HELP, Options, exits, global_options_too
from bxmem.cli.common import setup as _setup
from bxmem.cli.help import AGENT, OWNER, START, TIMER_JOBS
from bxmem.cli.host import doctor, init, metrics, units_app
from bxmem.cli.owner import outbox_app
from bxmem.cli.progress import index_rebuild_bar
from bxmem.commands import lean_commands
from bxmem.errors import BxmemError, ExitCode, Incomplete, Refused, UsageError, boundary
from bxmem.start.version import __version__
from bxmem.store.paths import check_named, config_source

app = typer.Typer(
    name="bxmem",
    help="Memory sync for a Boxmaker agent host: loopd's turns and memoryd's edits to Honcho, "
    "without anything a session read from outside reaching memory the fleet trusts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: stable for docs/cli.md, readable in any terminal
)
config_app = typer.Typer(
    help="Check bxmem's configuration and show what it resolves to.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(config_app, name="config", rich_help_panel=START)
app.add_typer(units_app, name="units", rich_help_panel=START)
index_app = typer.Typer(
    help="Rebuild the local search index that recall reads.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(index_app, name="index", rich_help_panel=OWNER)
app.add_typer(outbox_app, name="outbox", rich_help_panel=OWNER)
app.add_typer(artifact_app, name="artifact", rich_help_panel=OWNER)


def _version(value: bool) -> None:
    if value:
        output.show_text(f"bxmem {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    config: Path | None = typer.Option(None, "--config", metavar="PATH", help=CONFIG_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = Options(config=config, verbose=verbose, quiet=quiet)


@app.command(rich_help_panel=TIMER_JOBS)
@exits
@global_options_too
def decide(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Decide where each newly finished turn in loopd's logs goes, and record it in the ledger.

    brokerd's labels and loopd's together decide it: the trusted workspace, the
    untrusted one, or nowhere, and why. A timer runs it every few seconds; a run
    with nothing new costs about a bare interpreter start.

    Examples:
    bxmem decide
    bxmem decide --json
    """
    options: Options = ctx.obj
    return lean_commands.decide(
        config=options.config,
        json=as_json,
        verbose=options.verbose,
        quiet=options.quiet,
        progress=output.BacklogProgress(options.quiet),
        index_progress=index_rebuild_bar,
    )


@app.command(rich_help_panel=TIMER_JOBS)
@exits
@global_options_too
def send(
    ctx: typer.Context,
    as_json: bool = JSON_OPTION,
    now: bool = typer.Option(
        False,
        "--now",
        help="Try Honcho now, without waiting out the outage backoff (items "
        "in doubt still wait to be looked up: nothing is sent twice).",
    ),
) -> int:
    """Send one batch of the outbox (decided, not yet sent) to Honcho, oldest first.

    Every run says what holds the rest up: an outage, a refused key, items in
    doubt or held by the configuration (bxmem sync shows them all).

    Examples:
    bxmem send
    bxmem send --now --json
    """
    options: Options = ctx.obj
    return lean_commands.send(
        config=options.config, json=as_json, verbose=options.verbose, quiet=options.quiet, now=now
    )


@app.command(rich_help_panel=TIMER_JOBS)
@exits
@global_options_too
def mirror(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Decide what each new memory edit in memoryd's journal does in Honcho, and record it.

    Identity entries and trusted notes become conclusions, untrusted notes
    fleet messages; flagged notes stay local.

    Examples:
    bxmem mirror
    bxmem mirror --json
    """
    options: Options = ctx.obj
    return lean_commands.mirror(
        config=options.config,
        json=as_json,
        verbose=options.verbose,
        quiet=options.quiet,
        index_progress=index_rebuild_bar,
    )


@app.command(rich_help_panel=OWNER)
@exits
@global_options_too
def undo(
    ctx: typer.Context,
    edit_id: str = typer.Argument(..., metavar="EDIT_ID", help="The journal id of the edit to take back."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would happen, write nothing."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Take back a memory edit: journal an undo and reverse it in Honcho at the next send.

    Its conclusions are deleted (and any it deleted written again), a fleet note
    gets a retraction beside it, and an edit not sent yet is never sent.

    Examples:
    bxmem undo j-20261201-7 --dry-run
    bxmem undo j-20261201-7
    """
    from bxmem.commands import undo as undo_job  # deferred: command

    return output.show(undo_job.run(_setup(ctx, "undo"), edit_id, dry_run=dry_run), as_json)


app.command("recall", rich_help_panel=AGENT)(agent.recall)
app.command("ask", rich_help_panel=AGENT)(agent.ask)
app.command("tools", rich_help_panel=AGENT)(agent.tools)
app.command("schema", rich_help_panel=AGENT)(agent.schema)


@app.command(rich_help_panel=OWNER)
@exits
@global_options_too
def runbook(
    ctx: typer.Context,
    name: str | None = typer.Argument(
        None, metavar="NAME", show_default=False, help="The entry to print (default: list them)."
    ),
) -> int:
    """Print a runbook entry: what a state bxmem reports means, and what to do about it.

    Every log line, error and attention line that needs the owner names its entry.

    Examples:
    bxmem runbook
    bxmem runbook honcho-unreachable
    """
    check_named(*config_source(ctx.obj.config))  # needs no config, but a named one that is missing is a mistake
    return output.show_runbook(name)


@index_app.command("rebuild")
@exits
@global_options_too
def index_rebuild(ctx: typer.Context) -> int:
    """Rebuild the local index from the ledger, the logs and the journal.

    decide and mirror keep it up to date; a rebuild is for an index deleted or damaged.

    Examples:
    bxmem index rebuild
    """
    from bxmem.commands import index_fold  # deferred: command
    from bxmem.store import index  # deferred: command

    config = _setup(ctx, "index")
    config.paths.require_home()
    config.paths.ensure_state_dir()
    applied, warning = index_fold.update(config.paths, rebuild=True, progress=index_rebuild_bar)
    if warning:
        raise BxmemError(warning)
    return output.index_rebuilt(applied, index.Index.for_state(config.paths.state).count())


@app.command(rich_help_panel=OWNER)
@exits
@global_options_too
def sync(
    ctx: typer.Context,
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Send the failed items again (bxmem outbox resend --all-failed)."
    ),
    as_json: bool = JSON_OPTION,
) -> int:
    """Show where everything stands: the outbox per workspace, what holds items up, and what needs the owner.

    brokerd, Honcho and the key files are checked as it reports, with the time;
    each attention line names its runbook entry and the command that gets out of
    it, and sync then exits 4.

    Examples:
    bxmem sync
    bxmem sync --json
    bxmem sync --retry-failed
    """
    from bxmem.commands import sync as sync_module  # deferred: command

    config = _setup(ctx, "sync")
    requeued = sync_module.retry_failed(config) if retry_failed else None
    if requeued is not None and not as_json:
        output.sync_requeued(requeued)
    report = sync_module.status(config)
    if requeued is not None:
        report["requeued"] = requeued.as_json()
    return output.show_sync(report, as_json)


@app.command(rich_help_panel=OWNER)
@exits
@global_options_too
def audit(
    ctx: typer.Context,
    accept: list[str] = typer.Option(
        [],
        "--accept",
        metavar="ID",
        help="Accept this finding (its id, as audit lists it): later audits set it aside; repeatable.",
    ),
    reason: str | None = typer.Option(
        None, "--reason", metavar="TEXT", help="Why, with --accept (kept in the ledger)."
    ),
    as_json: bool = JSON_OPTION,
) -> int:
    """Read the agent's own workspaces back from Honcho and hold them against the ledger.

    Every discrepancy gets an id; --accept sets one aside for good, with the
    owner's reason kept in the ledger.

    Examples:
    bxmem audit
    bxmem audit --accept missing:boxmaker0-trusted:turn:s-clean:1#0 --reason "deleted on purpose"
    """
    from bxmem.commands import audit as audit_module  # deferred: command
    from bxmem.honcho.client import HonchoError  # deferred: command

    config = _setup(ctx, "audit")
    if config.local_only:
        raise Refused("bxmem is local-only (no [honcho] section): there is nothing to audit")
    if accept and not reason:
        raise UsageError("audit --accept: say why with --reason TEXT (it is kept in the ledger)")
    try:
        report = audit_module.audit(config)
    except HonchoError as exc:
        raise Incomplete(f"audit incomplete: {exc}") from None
    if accept:
        audit_module.accept(config, report, accept, reason)
    return output.show(report, as_json)


@app.command(rich_help_panel=START)
@exits
def demo(
    honcho: str | None = typer.Option(
        None, "--honcho", metavar="URL", help="Send to this Honcho server (default: local only)."
    ),
    keep: Path | None = typer.Option(
        None, "--keep", metavar="DIR", help="Build the sample home in this new or empty directory and keep it."
    ),
) -> int:
    """Run decide, mirror and send on built-in sample data in a temporary home, and explain what happened.

    The temporary home is removed at the end unless --keep is given. With --honcho, each
    run sends to three new workspaces named for it, and prints their names; it never
    writes to a workspace an earlier run or a real agent uses.

    Examples:
    bxmem demo
    bxmem demo --honcho http://127.0.0.1:8000
    bxmem demo --keep /tmp/bxmem-demo
    """
    from bxmem.demo.run import run_demo  # deferred: command
    from bxmem.log import log, setup  # deferred: command

    setup("demo", quiet=True)
    log.setLevel("ERROR")  # the demo explains its warnings (a late brokerd) itself
    return output.show_demo(run_demo(honcho, keep), honcho)


app.command("init", rich_help_panel=START)(init)  # after the demo: what a newcomer tries first comes first
app.command("doctor", rich_help_panel=START)(doctor)
app.command("metrics", rich_help_panel=TIMER_JOBS)(metrics)


@config_app.command("check")
@exits
@global_options_too
def config_check(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Validate bxmem.toml and print the resolved paths and workspaces (never a key).

    Each key file is read as every command reads it; what is legal but likely a
    mistake is a warning.

    Examples:
    bxmem config check
    bxmem --config ~/.config/boxmaker/other.toml config check --json
    """
    return output.config_check(_setup(ctx, "config"), as_json)


help.apply(app)  # every command declared: give each the help cli/help.py prints


def run_cli(args: list[str]) -> int:
    """typer's parse and run, inside the one error boundary (errors.boundary). A
    command line asking for --json gets a JSON document on stdout whatever fails,
    a usage error before typer has read the option included."""
    return boundary(_run_typer, args, as_json=wants_json(args))


def wants_json(args: list[str]) -> bool:
    """--json among the options: before a `--`, after which every word is text."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


# click's exception classes, found from one typer exports: typer has vendored click
# (typer._click) since 0.2x, and used the click package before.
_CLICK_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _run_typer(args: list[str]) -> int:
    """typer's parse and run. A usage error is one line, through the boundary like
    every other error (click's own is a usage block, a hint and a blank line);
    `bxmem` alone says where to start, a group alone (`bxmem outbox`) gets its help."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="bxmem", standalone_mode=False)
    except _CLICK_ERROR as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            if not args:  # `bxmem` alone: where a new owner starts
                from bxmem.start.registry import BY_NAME  # deferred: help

                return output.show_text(
                    help.first_steps({name.split()[0] for name in BY_NAME} | set(BY_NAME)).rstrip("\n")
                )
            exc.show()  # type: ignore[attr-defined]  # a click UsageError
            return int(exc.exit_code)  # type: ignore[attr-defined]
        raise UsageError(_usage_line(exc)) from None
    except typer.Abort:
        raise BxmemError("aborted") from None
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.ERROR)
    if (
        code == ExitCode.INTERRUPTED
    ):  # typer makes Ctrl-C a silent 130 (no command returns it): say it, as the lean path does
        raise KeyboardInterrupt
    return code if isinstance(code, int) else ExitCode.OK


def _usage_line(exc) -> str:
    """`recall: Missing argument 'query' (bxmem recall --help)`: what click says, where, and where help is."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    where = ctx.command_path.removeprefix("bxmem").strip()
    return f"{where + ': ' if where else ''}{message} ({ctx.command_path} --help)"
