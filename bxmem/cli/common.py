"""What the typer commands share: the exit code, global options after the command's name, --json, the configuration."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path

import typer

from bxmem.commands import lean_commands
from bxmem.start.registry import GLOBAL_OPTIONS


def exits(func):
    """Commands return an ExitCode; typer's standalone mode wants it raised."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        raise typer.Exit(int(func(*args, **kwargs) or 0))

    return wrapper


@dataclass
class Options:
    config: Path | None
    verbose: bool
    quiet: bool


# The global options, as start/registry.py names them (tests/test_argv.py holds the two together).
CONFIG_HELP = "bxmem.toml to use (default: $BXMEM_CONFIG, else the user config dir)."
VERBOSE_HELP, QUIET_HELP = "Log debug lines too.", "Log only notices (an outage's end), warnings and errors."
_NAMES = {
    key: sorted((name for name, k in GLOBAL_OPTIONS.items() if k == key), key=len)
    for key in set(GLOBAL_OPTIONS.values())
}


def global_options_too(func):
    """Let a command take the global options after its name as well (`bxmem
    decide -q`), as the lean path's grammar (start/lean_argv.py) does: without them typer would
    refuse a command line the lean path runs. Hidden: --help lists them once,
    on bxmem itself. A value given after the command wins, as the later one does."""
    extra = [
        inspect.Parameter(
            "config_after",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Path | None,
            default=typer.Option(None, *_NAMES["config"], metavar="PATH", hidden=True, help=CONFIG_HELP),
        ),
        inspect.Parameter(
            "verbose_after",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(False, *_NAMES["verbose"], hidden=True, help=VERBOSE_HELP),
        ),
        inspect.Parameter(
            "quiet_after",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(False, *_NAMES["quiet"], hidden=True, help=QUIET_HELP),
        ),
    ]

    @functools.wraps(func)
    def wrapper(*args, config_after=None, verbose_after=False, quiet_after=False, **kwargs):
        ctx = kwargs.get("ctx") or next(a for a in args if isinstance(a, typer.Context))
        options: Options = ctx.obj
        ctx.obj = Options(
            config=config_after or options.config,
            verbose=options.verbose or verbose_after,
            quiet=options.quiet or quiet_after,
        )
        return func(*args, **kwargs)

    signature = inspect.signature(func, eval_str=True)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *extra])  # type: ignore[attr-defined]
    return wrapper


def setup(ctx: typer.Context, job: str):
    """Logging for the job, then the validated configuration (or ConfigInvalid)."""
    options: Options = ctx.obj
    return lean_commands.setup(job, options.config, options.verbose, options.quiet)


JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON on stdout.")
