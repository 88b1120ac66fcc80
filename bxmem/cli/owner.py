"""`bxmem outbox` on the command line (commands/outbox_actions.py)."""

from __future__ import annotations

import typer

from bxmem.cli import output
from bxmem.cli.common import JSON_OPTION, exits, global_options_too, setup

outbox_app = typer.Typer(
    help="List the items that do not go by themselves, and get them out: drop, resend, reroute.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ITEMS_HELP = "Items as bxmem outbox list and bxmem sync name them (turn:SESSION:N, edit:ID)."
DRY_RUN = typer.Option(False, "--dry-run", help="Say what would happen, write nothing.")
ALL_FAILED = typer.Option(False, "--all-failed", help="Every failed item.")
ALL_HELD = typer.Option(False, "--all-held", help="Every item held by the configuration.")


@outbox_app.command("list")
@exits
@global_options_too
def outbox_list(
    ctx: typer.Context,
    everything: bool = typer.Option(False, "--all", help="Every item in the outbox, not only those held up."),
    as_json: bool = JSON_OPTION,
) -> int:
    """List the items that do not go by themselves (failed, held, in doubt, stopped), why, and the way out.

    Examples:
    bxmem outbox list
    bxmem outbox list --all --json
    """
    from bxmem.commands import outbox_actions  # deferred: command

    return output.show(outbox_actions.list_items(setup(ctx, "outbox"), everything), as_json)


@outbox_app.command("drop")
@exits
@global_options_too
def outbox_drop(
    ctx: typer.Context,
    items: list[str] = typer.Argument(None, metavar="ITEM", help=ITEMS_HELP),
    all_failed: bool = ALL_FAILED,
    all_held: bool = ALL_HELD,
    reason: str | None = typer.Option(
        None, "--reason", metavar="TEXT", help="Why (required; kept in the ledger, one line)."
    ),
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON_OPTION,
) -> int:
    """Take items out of the outbox for good: they are never sent.

    An item in doubt cannot be dropped until send has looked it up in Honcho.
    The reason is kept in the ledger.

    Examples:
    bxmem outbox drop turn:s-clean:4 --reason "sent by hand" --dry-run
    bxmem outbox drop --all-held --reason "the old workspace is gone"
    """
    from bxmem.commands import outbox_actions  # deferred: command

    return output.show(
        outbox_actions.act(
            setup(ctx, "outbox"),
            "drop",
            items or [],
            all_failed=all_failed,
            all_held=all_held,
            reason=reason,
            dry_run=dry_run,
        ),
        as_json,
    )


@outbox_app.command("resend")
@exits
@global_options_too
def outbox_resend(
    ctx: typer.Context,
    items: list[str] = typer.Argument(None, metavar="ITEM", help=ITEMS_HELP),
    all_failed: bool = ALL_FAILED,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON_OPTION,
) -> int:
    """Send failed items again, to a new Honcho session where Honcho deleted theirs.

    Never what Honcho holds already: an item it may hold is looked up first.

    Examples:
    bxmem outbox resend --all-failed --dry-run
    bxmem outbox resend turn:s-clean:3 turn:s-clean:4
    """
    from bxmem.commands import outbox_actions  # deferred: command

    return output.show(
        outbox_actions.act(setup(ctx, "outbox"), "resend", items or [], all_failed=all_failed, dry_run=dry_run), as_json
    )


@outbox_app.command("reroute")
@exits
@global_options_too
def outbox_reroute(
    ctx: typer.Context,
    items: list[str] = typer.Argument(None, metavar="ITEM", help=ITEMS_HELP),
    all_failed: bool = ALL_FAILED,
    all_held: bool = ALL_HELD,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON_OPTION,
) -> int:
    """Send held or failed items to the workspace that has their role now, never another role's.

    So never towards trusted: an untrusted turn goes only to the untrusted workspace.

    Examples:
    bxmem outbox reroute --all-held --dry-run
    bxmem outbox reroute edit:j-20261201-7
    """
    from bxmem.commands import outbox_actions  # deferred: command

    return output.show(
        outbox_actions.act(
            setup(ctx, "outbox"), "reroute", items or [], all_failed=all_failed, all_held=all_held, dry_run=dry_run
        ),
        as_json,
    )
