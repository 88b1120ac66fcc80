"""`bxmem init`, `units`, `doctor` and `metrics` on the command line; only init asks at a terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from bxmem.cli import output
from bxmem.cli.common import JSON_OPTION, Options, exits, global_options_too, setup
from bxmem.errors import ExitCode, UsageError
from bxmem.start import locations

units_app = typer.Typer(
    help="Generate the systemd units for this host, and install, enable or remove them.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

USER = typer.Option(False, "--user", help="Your own user manager, ~/.config/systemd/user (the default).")
SYSTEM = typer.Option(
    False, "--system", help="The system manager, /etc/systemd/system, the jobs run as you (User=); run it with sudo."
)


def _at_a_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


@exits
@global_options_too
def init(
    ctx: typer.Context,
    url: str | None = typer.Option(None, "--url", metavar="URL", help="The Honcho server (http:// or https://)."),
    local_only: bool = typer.Option(False, "--local-only", help="No Honcho: every job runs, nothing is sent."),
    agent: str | None = typer.Option(None, "--agent", metavar="NAME", help="This agent's peer in Honcho."),
    owner: str | None = typer.Option(
        None, "--owner", metavar="NAME", help="The owner, as they are named in chats (default at a terminal: you)."
    ),
    trusted: str | None = typer.Option(None, "--trusted", metavar="WORKSPACE", help="Default: AGENT-trusted."),
    untrusted: str | None = typer.Option(None, "--untrusted", metavar="WORKSPACE", help="Default: AGENT-untrusted."),
    fleet: str | None = typer.Option(None, "--fleet", metavar="WORKSPACE", help="Default: fleet."),
    keys: str | None = typer.Option(
        None,
        "--keys",
        metavar="DIR",
        help="A folder holding honcho-trusted.key, honcho-untrusted.key and honcho-fleet.key (auth on).",
    ),
    home: str | None = typer.Option(
        None, "--home", metavar="DIR", help="The Boxmaker home (default: $BOXMAKER_HOME, else ~/.local/share/boxmaker)."
    ),
    run_dir: str | None = typer.Option(None, "--run", metavar="DIR", help="brokerd's run folder (default: HOME/run)."),
) -> int:
    """Write bxmem.toml for one agent and make the Boxmaker home, then say what to run next.

    The configuration goes where every command looks for it (--config, else
    $BXMEM_CONFIG, else ~/.config/boxmaker/bxmem.toml), never over one that is
    there. Each value comes from its option; at a terminal, init asks for the ones
    not given. Off a terminal it asks nothing: --url (or --local-only), --agent and
    --owner are then needed.

    Examples:
    bxmem init
    bxmem init --url http://honcho.example:8000 --agent boxmaker0 --owner kyle --keys ~/.config/boxmaker
    bxmem init --local-only
    """
    from bxmem.commands import init as init_core  # deferred: command
    from bxmem.start.registry import BY_NAME  # deferred: command
    from bxmem.store.paths import config_source  # deferred: command

    options: Options = ctx.obj
    if url and local_only:
        raise UsageError("init: --url or --local-only, not both")
    if not url and not local_only:
        if not _at_a_terminal():
            raise UsageError(
                "init: name the Honcho server with --url URL, or --local-only (off a terminal, init asks nothing)"
            )
        url = typer.prompt("Honcho server URL (empty: local-only, nothing is sent)", default="", show_default=False)
    if url and _at_a_terminal():
        agent = agent or typer.prompt("This agent's name, its peer in Honcho", default=init_core.default_agent())
        owner = owner or typer.prompt("The owner's name, as chats name them", default=init_core.default_owner() or None)
        if keys is None:
            keys = (
                typer.prompt(
                    "A folder of key files, for a server with auth on (empty: none)", default="", show_default=False
                )
                or None
            )
    answers = init_core.Answers(
        url=url or None,
        agent=agent,
        owner=owner,
        trusted=trusted,
        untrusted=untrusted,
        fleet=fleet,
        home=home,
        run=run_dir,
        keys=keys,
    )
    config, _named_by = config_source(options.config)
    done = init_core.run(init_core.plan(config, answers))
    check = (
        ("bxmem doctor", "check the setup end to end")
        if "doctor" in BY_NAME
        else ("bxmem config check", "check the configuration and the key files")
    )
    steps = [
        check,
        ("bxmem units install", "run the jobs under systemd, as you (--system: the system manager)"),
        ("bxmem sync", "see where everything stands"),
    ]
    if config != Path(locations.default_config_path()):
        steps = [(f"export BXMEM_CONFIG={config}", "so every command finds it (units install tells the units)"), *steps]
    for line in done.lines(steps):
        output.show_text(line)
    return ExitCode.OK


@exits
@global_options_too
def units_print(ctx: typer.Context, user: bool = USER, system: bool = SYSTEM) -> int:
    """Print the units as install would write them, each after a line naming its file.

    They are the templates bxmem ships with this host's bxmem, Boxmaker home and
    configuration in them (ExecStart=, ReadWritePaths=, the .path units' paths,
    Environment= where the units would otherwise find others).

    Examples:
    bxmem units print
    bxmem units print --system
    """
    from bxmem.commands import units  # deferred: command

    where_to = units.target(units.scope_of(user, system), writing=False)
    generated = units.generate(where_to, units.resolve(where_to, ctx.obj.config))
    text = "\n".join(f"# {where_to.unit_dir / name}\n{unit}" for name, unit in generated.items())
    return output.show_text(text.rstrip("\n"))


@exits
@global_options_too
def units_install(
    ctx: typer.Context,
    user: bool = USER,
    system: bool = SYSTEM,
    optional: bool = typer.Option(
        False, "--optional", help="Enable the optional timers too (bxmem metrics, for node_exporter)."
    ),
) -> int:
    """Write the units for this host, then enable and start the timers and .path units.

    Run it again after an upgrade or a change of home or configuration: it writes
    them anew. What it wrote is listed for units uninstall.

    Examples:
    bxmem units install
    sudo "$(command -v bxmem)" units install --system
    """
    from bxmem.commands import units  # deferred: command

    where_to = units.target(units.scope_of(user, system))
    done = units.install(where_to, units.resolve(where_to, ctx.obj.config), optional)
    for line in done.lines():
        output.show_text(line)
    return ExitCode.OK


@exits
@global_options_too
def units_uninstall(ctx: typer.Context, user: bool = USER, system: bool = SYSTEM) -> int:
    """Disable and stop what units install enabled, and remove exactly the files it wrote.

    The Boxmaker home, the ledger and the configuration stay.

    Examples:
    bxmem units uninstall
    sudo "$(command -v bxmem)" units uninstall --system
    """
    from bxmem.commands import units  # deferred: command
    from bxmem.store.paths import check_named, config_source  # deferred: command

    check_named(*config_source(ctx.obj.config))  # needs no config, but a named one that is missing is a mistake
    done = units.uninstall(units.target(units.scope_of(user, system)))
    for line in done.lines():
        output.show_text(line)
    return ExitCode.OK


@exits
@global_options_too
def doctor(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """Check the whole setup, one line each, with when: the config and the home and their modes, each key file and each key on Honcho, Honcho's clock, version and chat, brokerd, the units, the outbox, Honcho's queue.

    Honcho, brokerd and systemd are asked at once, each within 5 s (brokerd 2 s),
    so doctor waits 5.5 s at most for them; nothing is created or changed. Each
    failed line names the runbook entry that gets out of it. Exit 4 when a check
    failed, 7 when Honcho did not answer.

    Examples:
    bxmem doctor
    bxmem doctor --json
    """
    from bxmem.commands import doctor as doctor_module  # deferred: command

    config = setup(ctx, "doctor")
    return output.show(doctor_module.run(config, ctx.obj.config), as_json)


@exits
@global_options_too
def metrics(
    ctx: typer.Context,
    to: Path | None = typer.Option(
        None,
        "--output",
        metavar="FILE",
        help="Write to FILE atomically (a temporary file beside it, renamed), "
        "mode 644, for node_exporter's textfile collector.",
    ),
) -> int:
    """Print bxmem's state as Prometheus metrics (the outbox, the outage, refused keys, each job's last run, Honcho's queue), with no text, item id, key or path.

    Honcho's queue is read within 2 s; a Honcho that does not answer is a metric
    (bxmem_honcho_queue_up 0), not an error.

    Examples:
    bxmem metrics
    bxmem metrics --output /var/lib/prometheus/node-exporter/bxmem.prom
    """
    from bxmem.commands import metrics as metrics_module  # deferred: command

    config = setup(ctx, "metrics")
    return output.show_metrics(metrics_module.render(config), to)


units_app.command("print")(units_print)
units_app.command("install")(units_install)
units_app.command("uninstall")(units_uninstall)
