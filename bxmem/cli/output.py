"""What the commands the CLI runs print (the lean ones print through commands/lean_commands.py).
rich is imported by the functions that use it: `--help` loads this module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from typer import echo

from bxmem import runbooks
from bxmem.commands.lean_commands import emit_json
from bxmem.commands.recall import render_plain
from bxmem.config.loader import read_key
from bxmem.errors import BxmemError, ExitCode
from bxmem.store.files import write_bytes

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class BacklogProgress:
    """A progress bar over a long backlog when a person is watching (stderr is a
    terminal); nothing at all when a timer runs the job. Entered, it is the
    callback decide reports its progress to, or None."""

    THRESHOLD_BYTES = 4 << 20

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self):
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.THRESHOLD_BYTES:
                return
            from rich.progress import (  # deferred: help
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("deciding the backlog"), BarColumn(), DownloadColumn(), TimeRemainingColumn(), transient=True
            )
            self.bar.start()
            self.task = self.bar.add_task("decide", total=total)
        assert self.task is not None  # added with the bar
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


CONFIG_SCHEMA = "bxmem.config/1"  # `config check --json` (bxmem/schemas/config.schema.json)


def _home_warning(config) -> str | None:
    """A home that is not there is no fault of the file, but every job would stop on it (exit 78)."""
    try:
        config.paths.require_home()
    except BxmemError as exc:
        return exc.one_line()
    return None


def config_check(config, as_json: bool) -> int:
    """`bxmem config check`: the resolved paths and workspaces (never a key), and
    what is legal but likely a mistake (live_checks.partial_keys) as a warning."""
    from bxmem.commands.live_checks import partial_keys  # deferred: command

    workspaces = []
    for ws in config.workspaces():
        read_key(ws)  # raises ConfigInvalid for an unreadable or exposed key file
        workspaces.append({"role": ws.role, "workspace": ws.name, "key": str(ws.key_file) if ws.key_file else None})
    result = {
        "schema": CONFIG_SCHEMA,
        "config": str(config.path),
        "config_exists": config.path.exists(),
        "home": str(config.paths.home),
        "run": str(config.paths.run),
        "ledger": str(config.paths.ledger),
        "broker_socket": str(config.paths.broker_socket),
        "mode": "local-only" if config.local_only else "honcho",
        "honcho_url": config.honcho.url if config.honcho else None,
        "agent": config.honcho.agent if config.honcho else None,
        "owner": config.honcho.owner if config.honcho else None,
        "workspaces": workspaces,
        "send_batch": config.send.batch,
        "warnings": [w for w in (partial_keys(config), _home_warning(config)) if w],
    }
    if as_json:
        emit_json(result)
        return ExitCode.OK
    lines = [f"config: {result['config']}" + ("" if result["config_exists"] else " (absent: defaults, local-only)")]
    lines += [f"{name}: {result[name]}" for name in ("home", "run", "ledger", "broker_socket", "mode")]
    if config.honcho:
        lines += [f"honcho: {config.honcho.url} as agent {config.honcho.agent}, owner {config.honcho.owner}"]
        for ws in workspaces:
            key = f"key from {ws['key']}" if ws["key"] else "no key"
            lines.append(f"  {ws['role']}: {ws['workspace']} ({key})")
    else:
        lines.append("local-only: no [honcho] section, nothing will be sent")
    lines += [f"warning: {w}" for w in result["warnings"]]
    sys.stdout.write("\n".join(lines) + "\n")
    return ExitCode.OK


def _echo(text: str) -> None:
    """Through typer's echo: off a terminal it strips ANSI escapes (say from an item
    id Honcho holds)."""
    echo(text)


def show(result, as_json: bool) -> int:
    """undo, ask and audit: the result's JSON object or its lines on stdout; its exit code."""
    if as_json:
        emit_json(result.as_json())
    else:
        for line in result.lines():
            _echo(line)
    return result.exit_code


def show_metrics(text: str, to: Path | None) -> int:
    """`bxmem metrics`: on stdout, or in place of `to` whole (a temporary file beside it,
    renamed over it, as node_exporter's textfile collector asks), readable by its reader."""
    if to is None:
        sys.stdout.write(text)
    else:
        write_bytes(to, text.encode(), mode=0o644)
    return ExitCode.OK


def show_runbook(name: str | None) -> int:
    """`bxmem runbook [NAME]`: the entry as written, or the list of entries and where they are."""
    if name is not None:
        sys.stdout.write(runbooks.text(name))
        return ExitCode.OK
    _echo(f"The runbook: `bxmem runbook NAME` prints an entry (the files: {runbooks.folder()}).")
    width = max(map(len, runbooks.ENTRIES))
    for entry, about in runbooks.ENTRIES.items():
        _echo(f"  {entry:{width}}  {about}")
    return ExitCode.OK


def show_text(text: str) -> int:
    """A command whose output is one text (`tools`, `--version`)."""
    _echo(text)
    return ExitCode.OK


def index_rebuilt(applied: int, entries: int) -> int:
    return show_text(f"rebuilt the local index: {applied} turns and edits applied, {entries} entries")


def sync_requeued(result) -> None:
    """`sync --retry-failed`: said before the status, as the items go back (with --json,
    the status document carries it as `requeued` instead)."""
    n = len(result.items)
    _echo(f"re-queued {n} failed item(s); the next bxmem send sends them" if n else "no failed items")
    for i in result.items:
        if i.get("note"):
            _echo(f"  {i['item']}: {i['note']}")
    for i in result.left:
        _echo(f"  left in the failed list: {i['item']}: {i['why']}")


def show_sync(report: dict, as_json: bool) -> int:
    from bxmem.commands.sync import exit_code  # deferred: command

    if as_json:
        emit_json(report)
    else:
        render_sync(report)
    return exit_code(report)


def console():
    """rich for a person at a terminal. Off one (journald, a pipe, mail) nothing
    is wrapped or cut: a line is as long as what it says."""
    from rich.console import Console  # deferred: help

    tty = sys.stdout.isatty()
    return Console(highlight=False, soft_wrap=not tty, width=None if tty else 100_000)


def render_sync(report: dict, out=None) -> None:
    """sync's lines (sync.lines), escaped: a name like `[honcho]` is text, never markup."""
    from rich.markup import escape  # deferred: help

    from bxmem.commands.sync import lines  # deferred: command

    out = out or console()
    for line in lines(report):
        for word, style in (("attention", "bold red"), ("warning", "bold yellow")):
            if line.startswith(f"{word}: "):
                out.print(f"[{style}]{word}:[/{style}] {escape(line.removeprefix(f'{word}: '))}")
                break
        else:
            out.print(escape(line))


def show_demo(result, honcho: str | None) -> int:
    """`bxmem demo`: what happened to the sample home, for a person reading it."""
    from rich.markup import escape  # deferred: help
    from rich.table import Table  # deferred: help

    from bxmem.demo.sample import SESSIONS  # deferred: command

    out = console()
    where = "kept" if result.kept else "temporary, removed at the end; --keep DIR keeps it"
    out.print(f"[bold]bxmem demo[/bold]: sample Boxmaker home at {escape(str(result.home))} ({where})")
    if result.workspaces:  # named for this run, so the owner can find (and delete) exactly them
        out.print(f"this run's workspaces on {escape(honcho or '')}: {escape(', '.join(result.workspaces.values()))}")
    for session, (_state, _lines, why) in SESSIONS.items():
        out.print(f"  [cyan]{escape(session)}[/cyan]: {escape(why)}")
    out.print()
    for note in result.notes:
        out.print(f"- {escape(note)}")
    table = Table(title="Where each turn and memory edit went (from the ledger)")
    for column in ("session", "item", "destination", "why"):
        table.add_column(column)
    for row in result.rows:
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)
    out.print("\n[bold]bxmem sync[/bold] (the owner's view):")
    render_sync(result.sync, out)
    out.print("\n[bold]bxmem recall 'backups nightly' -k 3[/bold] (what the agent sees):")
    assert result.recall is not None  # run_demo sets it before it returns
    out.print(render_plain(result.recall), markup=False, highlight=False)
    out.print(
        "\nThe ledger (memory/honcho.jsonl) holds every decision and no text. "
        "A turn that read outside content never goes to the trusted workspace; a secret one goes nowhere."
    )
    if not result.kept:
        base = result.home.parent
        out.print(
            f"The temporary folder {escape(str(base))} "
            + ("could not be removed: remove it by hand." if base.exists() else "has been removed.")
        )
    return result.exit_code  # DEGRADED when Honcho did not answer: the demo did not do what was asked
