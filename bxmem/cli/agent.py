"""The agent's tools on the command line: `recall`, `ask`, `tools` and `schema`."""

from __future__ import annotations

from pathlib import Path

import typer

from bxmem.cli import output
from bxmem.cli.common import JSON_OPTION, Options, exits, global_options_too
from bxmem.cli.common import setup as _setup
from bxmem.commands import lean_commands
from bxmem.commands.recall import DEFAULT_K, MAX_K
from bxmem.errors import UsageError
from bxmem.store.paths import check_named, config_source


@exits
@global_options_too
def recall(
    ctx: typer.Context,
    query: list[str] = typer.Argument(
        ..., metavar="QUERY", show_default=False, help="What to look for: plain words, one query (no search syntax)."
    ),
    k: str | None = typer.Option(
        None,
        "-k",
        metavar="N",
        show_default=False,
        help=f"At most this many hits, interleaved across sources: 1 to {MAX_K}, default {DEFAULT_K}.",
    ),
    as_json: bool = JSON_OPTION,
    explain: bool = typer.Option(
        False,
        "--explain",
        help="After each hit, how it was found: the query's words it holds, "
        "its rank by them and in Honcho's search (--json always says).",
    ),
) -> int:
    """Search the local index and the fleet for what the agent remembers, labelling every hit.

    Each source answers under its own time limit. The label says how trusted and
    how secret the hits are: the host copies it into the tool result, so that
    brokerd taints the session (docs/agent-tools.md).

    Examples:
    bxmem recall restic backups
    bxmem recall --explain restic backups
    bxmem recall --json -k 5 -- "where do the backups go?"
    """
    options: Options = ctx.obj
    # Several words are one query, as start/lean_argv.py joins them for the lean path.
    return lean_commands.recall(
        query=" ".join(query),
        config=options.config,
        k=k,
        json=as_json,
        explain=explain,
        verbose=options.verbose,
        quiet=options.quiet,
    )


@exits
@global_options_too
def ask(
    ctx: typer.Context,
    question: str = typer.Argument(..., metavar="QUESTION", help="At most 2,000 characters."),
    workspace: list[str] = typer.Option(
        [],
        "--workspace",
        "-w",
        metavar="NAME",
        help="own (default), untrusted, fleet, or an agent from [[honcho.read]]; repeatable.",
    ),
    reasoning: str = typer.Option("minimal", "--reasoning", metavar="LEVEL", help="minimal (default) or low."),
    deadline: float = typer.Option(
        160.0,
        "--deadline",
        metavar="SECONDS",
        hidden=True,
        help="The whole command's deadline (tests and the bench shorten it).",
    ),
    as_json: bool = JSON_OPTION,
) -> int:
    """Ask Honcho's dialectic a question about the agent's memory, and label each answer as recall labels hits.

    Two chats run at a time, 160 s for the whole command.

    Examples:
    bxmem ask "what units does the owner prefer?"
    bxmem ask -w fleet --json "is the vendor's v2 deprecated?"
    """
    from bxmem.commands import ask as ask_module  # deferred: command

    config = _setup(ctx, "ask")
    return output.show(ask_module.ask(config, question, workspace, reasoning, deadline), as_json)


@exits
@global_options_too
def tools(
    ctx: typer.Context,
    fmt: str = typer.Option(
        "anthropic",
        "--format",
        metavar="FORMAT",
        help="anthropic (default: name, description, input_schema) or openai (function calling).",
    ),
) -> int:
    """Print the tool definitions for the host's tools array, as JSON: recall, and ask_memory unless local-only.

    Generated from the configuration: ask_memory's workspaces are the names ask
    takes (own, untrusted, fleet and each [[honcho.read]] agent).

    Examples:
    bxmem tools
    bxmem tools --format openai
    """
    from bxmem.commands import tools as tools_module  # deferred: command

    config = _setup(ctx, "tools")
    return output.show_text(
        tools_module.render(config, fmt)
    )  # compact: the bytes bench/run counts (pipe to jq to read)


#: Every --json output's JSON Schema (bxmem/schemas/NAME.schema.json), by NAME: whose output it is.
#: A command's output is its first word's (`outbox list` → outbox, `config check` → config).
SCHEMAS = {
    "recall": "recall --json: the hits and the label a host copies into the tool result",
    "ask": "ask --json: the answers and the label, as recall's",
    "decide": "decide --json: what one run decided, and what holds the rest up",
    "mirror": "mirror --json: what one run did with memoryd's journal",
    "send": "send --json: what one run sent, and what holds the outbox up",
    "doctor": "doctor --json: every check, what it found and when",
    "undo": "undo --json: what taking back an edit did or would do",
    "sync": "sync --json: where everything stands",
    "audit": "audit --json: every discrepancy between Honcho and the ledger",
    "outbox": "outbox list|drop|resend|reroute --json",
    "config": "config check --json: the configuration as resolved",
    "artifact-record": "artifact record --json: what was kept, and whether Honcho will index its card",
    "artifact-resolve": "artifact resolve --json: the checked path of an artifact's exact bytes, and its freshness",
    "artifact-list": "artifact list --json: every card kept here, and where its index item stands",
    "artifact-verify": "artifact verify --json: every object hashed, what failed, what was repaired",
    "artifact-export": "artifact export --json: where the checked bytes were copied",
    "artifact-rm": "artifact rm --json: what was (or would be) removed, here and in Honcho",
    "error": "what any command's --json prints when it fails",
}


def schema_text(name: str) -> str:
    """The schema as the package ships it (bxmem/schemas/)."""
    return (Path(__file__).parent.parent / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")


@exits
@global_options_too
def schema(
    ctx: typer.Context,
    name: str | None = typer.Argument(
        None,
        metavar="NAME",
        show_default=False,
        help="Whose output: a command (decide, sync, outbox, config, ...), or error. Without it, the list.",
    ),
) -> int:
    """Print the JSON Schema of a command's --json output, the contract a host or script checks it against.

    Every --json document carries "schema": "bxmem.NAME/VERSION"; the version goes
    up when a field changes meaning or goes away, never when one is added.

    Examples:
    bxmem schema
    bxmem schema sync > sync.schema.json
    """
    check_named(
        *config_source(ctx.obj.config)
    )  # a schema needs no config, but a named one that is missing is a mistake to report
    if name is None:
        return output.show_text("\n".join(f"  {known:8} {what}" for known, what in SCHEMAS.items()))
    if name not in SCHEMAS:
        raise UsageError(f"schema: no schema {name!r}; the schemas are: {', '.join(SCHEMAS)}")
    return output.show_text(schema_text(name).rstrip("\n"))
