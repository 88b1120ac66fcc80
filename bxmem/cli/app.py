"""The command line: one small typer function per command over the typed core.

Every command is declared in start/registry.py (its name, exit codes and, for
the lean commands, options); here typer learns its arguments and help. The
cli/ package is the only one that imports typer or rich: this module and
cli/owner.py (the owner's `outbox` commands) declare the commands,
cli/common.py holds what both share, cli/output.py writes what they print.
Each command parses, calls the core, and hands the result to cli/output.py;
the lean commands call the same function the lean path runs
(commands/run.py). Everything it calls can be used and tested without it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from bxmem.cli import output
from bxmem.cli.artifacts import artifact_app
from bxmem.cli.common import CONFIG_HELP, JSON_OPTION, QUIET_HELP, VERBOSE_HELP, Options, exits, global_options_too
from bxmem.cli.common import setup as _setup
from bxmem.cli.owner import outbox_app
from bxmem.cli.progress import index_rebuild_bar
from bxmem.commands import run
from bxmem.commands.recall import DEFAULT_K, MAX_K
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
config_app = typer.Typer(help="Inspect bxmem's configuration.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(config_app, name="config")
index_app = typer.Typer(help="The local search index.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(index_app, name="index")
app.add_typer(outbox_app, name="outbox")
app.add_typer(artifact_app, name="artifact")


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
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    ctx.obj = Options(config=config, verbose=verbose, quiet=quiet)


@app.command()
@exits
@global_options_too
def decide(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Decide where each newly finished turn in loopd's logs goes, and record it in the ledger."""
    options: Options = ctx.obj
    return run.decide(config=options.config, json=as_json, verbose=options.verbose, quiet=options.quiet,
                      progress=output.BacklogProgress(options.quiet), index_progress=index_rebuild_bar)


@app.command()
@exits
@global_options_too
def send(ctx: typer.Context, as_json: bool = JSON_OPTION,
         now: bool = typer.Option(False, "--now", help="Try Honcho now, without waiting out the outage backoff (items "
                                                       "in doubt still wait to be looked up: nothing is sent twice).")) -> int:
    """Send one batch of the outbox (decided, not yet sent) to Honcho, oldest first."""
    options: Options = ctx.obj
    return run.send(config=options.config, json=as_json, verbose=options.verbose, quiet=options.quiet, now=now)


@app.command()
@exits
@global_options_too
def mirror(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Decide what each new memory edit in memoryd's journal does in Honcho, and record it."""
    options: Options = ctx.obj
    return run.mirror(config=options.config, json=as_json, verbose=options.verbose, quiet=options.quiet,
                      index_progress=index_rebuild_bar)


@app.command()
@exits
@global_options_too
def undo(
    ctx: typer.Context,
    edit_id: str = typer.Argument(..., help="The journal id of the edit to take back."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would happen, write nothing."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Take back a memory edit: journal an undo and reverse it in Honcho at the next send."""
    from bxmem.commands import undo as undo_job  # deferred: command

    return output.show(undo_job.run(_setup(ctx, "undo"), edit_id, dry_run=dry_run), as_json)


@app.command()
@exits
@global_options_too
def recall(
    ctx: typer.Context,
    query: list[str] = typer.Argument(..., help="What to look for: plain words, one query (no search syntax)."),
    k: str | None = typer.Option(None, "-k", metavar="N", show_default=False,
                                 help=f"At most this many hits, interleaved across sources: 1 to {MAX_K}, default {DEFAULT_K}."),
    as_json: bool = JSON_OPTION,
    explain: bool = typer.Option(False, "--explain", help="After each hit, how it was found: the query's words it holds, "
                                                          "its rank by them and in Honcho's search (--json always says)."),
) -> int:
    """Search the local index and the fleet in parallel; label every hit so the caller can taint the session."""
    options: Options = ctx.obj
    # Several words are one query, as start/grammar.py joins them for the lean path.
    return run.recall(query=" ".join(query), config=options.config, k=k, json=as_json, explain=explain,
                      verbose=options.verbose, quiet=options.quiet)


@app.command()
@exits
@global_options_too
def ask(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="At most 2,000 characters."),
    workspace: list[str] = typer.Option([], "--workspace", "-w", metavar="NAME",
                                        help="own (default), untrusted, fleet, or an agent from [[honcho.read]]; repeatable."),
    reasoning: str = typer.Option("minimal", "--reasoning", metavar="LEVEL", help="minimal (default) or low."),
    deadline: float = typer.Option(160.0, "--deadline", metavar="SECONDS", hidden=True,
                                   help="The whole command's deadline (tests and the bench shorten it)."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Ask Honcho's dialectic about named workspaces (two chats at a time, 160 s in all); answers are labelled like recall hits."""
    from bxmem.commands import ask as ask_module  # deferred: command

    config = _setup(ctx, "ask")
    return output.show(ask_module.ask(config, question, workspace, reasoning, deadline), as_json)


@app.command()
@exits
@global_options_too
def tools(ctx: typer.Context, fmt: str = typer.Option("anthropic", "--format", metavar="FORMAT",
                                  help="anthropic (default: name, description, input_schema) or openai (function calling).")) -> int:
    """Print the tool definitions for the host's tools array, as JSON: recall, and ask_memory unless local-only.

    Generated from the configuration: ask_memory's workspaces are the names ask
    takes (own, untrusted, fleet and each [[honcho.read]] agent).
    """
    from bxmem.commands import tools as tools_module  # deferred: command

    config = _setup(ctx, "tools")
    return output.show_text(tools_module.render(config, fmt))  # compact: the bytes bench/run counts (pipe to jq to read)


SCHEMAS = ("recall", "ask", "send", "doctor", "artifact-record", "artifact-resolve", "error")


@app.command()
@exits
@global_options_too
def schema(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME",
                                                         help="Whose --json output: recall, ask, send, doctor, "
                                                              "artifact-record, artifact-resolve, or any command's "
                                                              "error document (error).")) -> int:
    """Print the JSON Schema of `recall`, `ask`, `artifact record` or `artifact resolve --json` (the contracts a host validates the output against), `send --json`, `doctor --json`, or the error document."""
    check_named(*config_source(ctx.obj.config))  # a schema needs no config, but a named one that is missing is a mistake to report
    if name not in SCHEMAS:
        raise UsageError(f"schema: there are schemas for {', '.join(SCHEMAS[:-1])} and {SCHEMAS[-1]}, not {name!r}")
    # The files the package ships (bxmem/schemas/), printed as they are.
    text = (Path(__file__).parent.parent / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
    return output.show_text(text.rstrip("\n"))


@app.command()
@exits
@global_options_too
def runbook(ctx: typer.Context,
            name: str | None = typer.Argument(None, metavar="NAME", help="The entry to print (default: list them).")) -> int:
    """Print a runbook entry: what a state bxmem reports means and what to do (log lines name the entry)."""
    check_named(*config_source(ctx.obj.config))  # needs no config, but a named one that is missing is a mistake
    return output.show_runbook(name)


@index_app.command("rebuild")
@exits
@global_options_too
def index_rebuild(ctx: typer.Context) -> int:
    """Rebuild the local index from the ledger, the logs and the journal."""
    from bxmem.commands import index_fold  # deferred: command
    from bxmem.store import index  # deferred: command

    config = _setup(ctx, "index")
    config.paths.require_home()
    config.paths.ensure_state_dir()
    applied, warning = index_fold.update(config.paths, rebuild=True, progress=index_rebuild_bar)
    if warning:
        raise BxmemError(warning)
    return output.index_rebuilt(applied, index.Index.for_state(config.paths.state).count())


@app.command()
@exits
@global_options_too
def sync(
    ctx: typer.Context,
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Send the failed items again (bxmem outbox resend --all-failed)."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Show where everything stands: outbox per workspace, failures, refused keys, outages, brokerd."""
    from bxmem.commands import sync as sync_module  # deferred: command

    config = _setup(ctx, "sync")
    requeued = sync_module.retry_failed(config) if retry_failed else None
    if requeued is not None and not as_json:
        output.sync_requeued(requeued)
    report = sync_module.status(config)
    if requeued is not None:
        report["requeued"] = requeued.as_json()
    return output.show_sync(report, as_json)


@app.command()
@exits
@global_options_too
def audit(ctx: typer.Context,
          accept: list[str] = typer.Option([], "--accept", metavar="ID",
                                           help="Accept this finding (its id, as audit lists it): later audits set it aside; repeatable."),
          reason: str | None = typer.Option(None, "--reason", metavar="TEXT", help="Why, with --accept (kept in the ledger)."),
          as_json: bool = JSON_OPTION) -> int:
    """Read the agent's own workspaces back from Honcho and hold them against the ledger."""
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


@app.command()
@exits
def demo(
    honcho: str | None = typer.Option(None, "--honcho", metavar="URL", help="Send to this Honcho server (default: local only)."),
    keep: Path | None = typer.Option(
        None, "--keep", metavar="DIR", help="Build the sample home in this new or empty directory and keep it."
    ),
) -> int:
    """Run decide, mirror and send on built-in sample data in a temporary home, and explain what happened.

    The temporary home is removed at the end unless --keep is given. With --honcho, each
    run sends to three new workspaces named for it, and prints their names; it never
    writes to a workspace an earlier run or a real agent uses.
    """
    from bxmem.demo.run import run_demo  # deferred: command
    from bxmem.log import log, setup  # deferred: command

    setup("demo", quiet=True)
    log.setLevel("ERROR")  # the demo explains its warnings (a late brokerd) itself
    return output.show_demo(run_demo(honcho, keep), honcho)


@app.command()
@exits
@global_options_too
def doctor(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Check the whole setup, one line each, with when: the config and the home and their modes, each key file and each key on Honcho, Honcho's clock, version and chat, brokerd, the units, the outbox, Honcho's queue.

    Honcho, brokerd and systemd are asked at once, each within 5 s (brokerd 2 s),
    so doctor waits 5.5 s at most for them; nothing is created or changed. Each
    failed line names the runbook entry that gets out of it. Exit 4 when a check
    failed, 7 when Honcho did not answer.
    """
    from bxmem.commands import doctor as doctor_module  # deferred: command

    config = _setup(ctx, "doctor")
    return output.show(doctor_module.run(config, ctx.obj.config), as_json)


@app.command()
@exits
@global_options_too
def metrics(ctx: typer.Context,
            to: Path | None = typer.Option(None, "--output", metavar="FILE",
                                           help="Write to FILE atomically (a temporary file beside it, renamed), "
                                                "mode 644, for node_exporter's textfile collector.")) -> int:
    """Print bxmem's state as Prometheus metrics (the outbox, the outage, refused keys, each job's last run, Honcho's queue), with no text, item id, key or path.

    Honcho's queue is read within 2 s; a Honcho that does not answer is a metric
    (bxmem_honcho_queue_up 0), not an error.
    """
    from bxmem.commands import metrics as metrics_module  # deferred: command

    config = _setup(ctx, "metrics")
    return output.show_metrics(metrics_module.render(config), to)


@config_app.command("check")
@exits
@global_options_too
def config_check(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Validate bxmem.toml and print the resolved paths and workspaces (never a key)."""
    return output.config_check(_setup(ctx, "config"), as_json)


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
    every other error (click's own is a usage block, a hint and a blank line); a
    command line with nothing after `bxmem` still gets the help."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="bxmem", standalone_mode=False)
    except _CLICK_ERROR as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]  # a click UsageError
            return int(exc.exit_code)  # type: ignore[attr-defined]
        raise UsageError(_usage_line(exc)) from None
    except typer.Abort:
        raise BxmemError("aborted") from None
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.ERROR)
    if code == ExitCode.INTERRUPTED:  # typer makes Ctrl-C a silent 130 (no command returns it): say it, as the lean path does
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
