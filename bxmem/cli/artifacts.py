"""`bxmem artifact` on the command line. record and resolve also take their options after `-- NAME` (the
host's argv): there each option takes the next word as its value, whatever it holds, so no value reads as an option.
"""

from __future__ import annotations

import typer

from bxmem.cli import output
from bxmem.cli.common import JSON_OPTION, exits, global_options_too, setup
from bxmem.errors import UsageError

artifact_app = typer.Typer(
    help="Artifact memory: exact results kept on this host, found again by recall, resolved "
    "only after an integrity check.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

SESSION_HELP = "The running session's id, from the host (never from the model's arguments)."
IDS_HELP = "Experiment ids (exp_...) or artifact ids (art_...), as list and recall show them."
_RECORD_TAIL = {
    "--title": "title",
    "--summary": "summary",
    "--tag": "tags",
    "--source-version": "source_version",
    "--query-fingerprint": "query_fingerprint",
    "--media-type": "media_type",
}
_RESOLVE_TAIL = {"--source-version": "source_version"}


def _tail(words: list[str], allowed: dict[str, str], given: dict) -> dict:
    """The options after the name: `--option VALUE` pairs, each value the next word."""
    out = dict(given)
    at = 0
    while at < len(words):
        word = words[at]
        key = allowed.get(word)
        if key is None:
            raise UsageError(f"{word!r} after the name is not one of {', '.join(allowed)} (one name, then options)")
        if at + 1 >= len(words):
            raise UsageError(f"{word} needs a value")
        value = words[at + 1]
        if key == "tags":
            out["tags"] = [*out.get("tags", []), value]
        elif out.get(key) is not None:
            raise UsageError(f"{word} is given twice")
        else:
            out[key] = value
        at += 2
    return out


@artifact_app.command("record")
@exits
@global_options_too
def artifact_record(
    ctx: typer.Context,
    words: list[str] = typer.Argument(
        ...,
        metavar="NAME",
        help="A file directly in sessions/SESSION/exports/; the options may follow it (after --, each takes the next word).",
    ),
    session: str = typer.Option(..., "--session", metavar="ID", help=SESSION_HELP),
    title: str | None = typer.Option(None, "--title", metavar="T", help="At most 200 characters."),
    summary: str | None = typer.Option(
        None, "--summary", metavar="S", help="At most 2,000 characters; without one the card is not sent to Honcho."
    ),
    tags: list[str] = typer.Option(
        [], "--tag", metavar="T", help="Repeatable: at most 20, each at most 80 characters."
    ),
    source_version: str | None = typer.Option(
        None, "--source-version", metavar="V", help="The version of what it was computed from (default: unknown)."
    ),
    query_fingerprint: str | None = typer.Option(
        None, "--query-fingerprint", metavar="SHA256", help="SHA-256 (lowercase hex) of the query or computation."
    ),
    media_type: str | None = typer.Option(None, "--media-type", metavar="TYPE", help="Default: from the name."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Keep an exported file: its bytes in the local store, its card in the outbox for Honcho.

    The host runs it for the model's artifact_record tool, with the running
    session's id; NAME is a file directly inside that session's exports/.

    Examples:
    bxmem artifact record --session 3f2a91 --json -- cohort.csv --title "Response by cohort" --summary "Week 12"
    bxmem artifact record --session 3f2a91 --tag cohort --source-version v2 -- report.md
    """
    from bxmem.commands import artifact  # deferred: command

    given = {
        "title": title,
        "summary": summary,
        "tags": tags,
        "source_version": source_version,
        "query_fingerprint": query_fingerprint,
        "media_type": media_type,
    }
    options = _tail(words[1:], _RECORD_TAIL, given)
    config = setup(ctx, "artifact")
    result = artifact.record(
        config,
        session,
        words[0],
        title=options["title"] or "",
        summary=options["summary"] or "",
        tags=options["tags"],
        source_version=options["source_version"],
        query_fingerprint=options["query_fingerprint"],
        media_type=options["media_type"],
    )
    return output.show(result, as_json)


@artifact_app.command("resolve")
@exits
@global_options_too
def artifact_resolve(
    ctx: typer.Context,
    words: list[str] = typer.Argument(
        ..., metavar="ID", help="An experiment id (exp_...) or an artifact id (art_...)."
    ),
    session: str | None = typer.Option(None, "--session", metavar="ID", help=SESSION_HELP),
    source_version: str | None = typer.Option(
        None, "--source-version", metavar="V", help="The current version, to say whether the bytes are fresh or stale."
    ),
    as_json: bool = JSON_OPTION,
) -> int:
    """The exact bytes of a card on this host: a path, given only once their size and SHA-256 are checked.

    Examples:
    bxmem artifact resolve --json -- exp_abc
    bxmem artifact resolve --session 3f2a91 -- art_abc --source-version v2
    """
    from bxmem.commands import artifact  # deferred: command

    options = _tail(words[1:], _RESOLVE_TAIL, {"source_version": source_version})
    config = setup(ctx, "artifact")
    return output.show(artifact.resolve(config, words[0], options["source_version"], session), as_json)


@artifact_app.command("list")
@exits
@global_options_too
def artifact_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> int:
    """List the cards kept on this host, where each went, and the store's use of its quotas.

    Examples:
    bxmem artifact list
    bxmem artifact list --json
    """
    from bxmem.commands import artifact_owner  # deferred: command

    return output.show(artifact_owner.list_cards(setup(ctx, "artifact")), as_json)


@artifact_app.command("verify")
@exits
@global_options_too
def artifact_verify(
    ctx: typer.Context,
    ids: list[str] = typer.Argument(None, metavar="ID", help=IDS_HELP + " Default: all."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Hash every object against its cards; recover what records cut short left behind.

    Examples:
    bxmem artifact verify
    bxmem artifact verify exp_abc --json
    """
    from bxmem.commands import artifact_owner  # deferred: command

    return output.show(artifact_owner.verify(setup(ctx, "artifact"), ids or None), as_json)


@artifact_app.command("export")
@exits
@global_options_too
def artifact_export(
    ctx: typer.Context,
    ident: str = typer.Argument(..., metavar="ID", help=IDS_HELP),
    to: str = typer.Option(..., "--to", metavar="PATH", help="A new file (never one that exists)."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Copy an artifact's bytes out of the store, checked as they are copied.

    Examples:
    bxmem artifact export exp_abc --to ~/cohort.csv
    """
    from bxmem.commands import artifact_owner  # deferred: command

    return output.show(artifact_owner.export(setup(ctx, "artifact"), ident, to), as_json)


@artifact_app.command("rm")
@exits
@global_options_too
def artifact_rm(
    ctx: typer.Context,
    ids: list[str] = typer.Argument(None, metavar="ID", help=IDS_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would happen, write nothing."),
    as_json: bool = JSON_OPTION,
) -> int:
    """Remove cards and their bytes; a card already in Honcho gets a retraction beside it at the next send.

    Examples:
    bxmem artifact rm --dry-run exp_abc
    bxmem artifact rm exp_abc art_def
    """
    from bxmem.commands import artifact_owner  # deferred: command

    return output.show(artifact_owner.remove(setup(ctx, "artifact"), ids or [], dry_run), as_json)
