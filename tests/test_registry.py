"""The command registry (bxmem/start/registry.py) is the one list of commands:
typer declares exactly its commands and runs the functions it names, the lean
grammar, the idle check and the exit table are read from it, and a decide a
person watches goes to the CLI, whose progress bar it is."""

from __future__ import annotations

import inspect
import os
import sys

import pytest
import typer
from helpers import write_log

from bxmem.cli import app as cli
from bxmem.errors import COMMAND_EXITS, ExitCode
from bxmem.start import entry, lean_argv, registry
from bxmem.start.registry import COMMANDS


def resolve(target: str):
    module, _, function = target.partition(":")
    __import__(module)
    return getattr(sys.modules[module], function)


def typer_commands() -> dict[str, object]:
    """Each leaf command typer knows, by its full name: its callback, unwrapped."""
    found = {}

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs is None:
            found[" ".join(path)] = inspect.unwrap(command.callback)
            return
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli.app), [])
    return found


def test_typer_declares_exactly_the_registered_commands():
    assert sorted(typer_commands()) == sorted(c.name for c in COMMANDS)
    assert len(registry.BY_NAME) == len(COMMANDS)  # no name twice


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.options is None], ids=lambda c: c.name)
def test_a_command_only_typer_parses_runs_the_function_the_registry_names(command):
    assert typer_commands()[command.name] is inspect.unwrap(resolve(command.run))


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.options is not None], ids=lambda c: c.name)
def test_a_lean_command_runs_a_plain_function_taking_every_option_it_parses(command):
    function = resolve(command.run)
    assert function.__module__ == "bxmem.commands.lean_commands"  # no typer, no rich
    keys = {*registry.GLOBAL_OPTIONS.values(), *command.options.values()} | ({command.positional} - {None})
    parameters = inspect.signature(function).parameters
    assert keys <= set(parameters), keys - set(parameters)
    assert all(parameters[key].kind is inspect.Parameter.KEYWORD_ONLY for key in keys)


def test_the_grammar_and_the_exit_table_are_the_registry_read():
    lean = [c for c in COMMANDS if c.options is not None]
    assert {c.name: c.options for c in lean} == lean_argv.COMMANDS
    assert lean_argv.JOBS == ("decide", "mirror", "send")
    assert lean_argv.POSITIONAL == {"recall": "query"}
    assert {"--config", "-k"} == lean_argv.VALUED
    every = {ExitCode.OK, ExitCode.ERROR, ExitCode.USAGE, ExitCode.CONFIG, ExitCode.INTERRUPTED}
    for command in COMMANDS:
        assert set(COMMAND_EXITS[command.name]) == every | {getattr(ExitCode, name) for name in command.exits}
    assert set(COMMAND_EXITS) == set(registry.BY_NAME)


def test_the_registry_names_only_exit_codes_that_exist():
    names = {name for name, _value in ExitCode.members()}
    for command in COMMANDS:
        assert set(command.exits) <= names, command


@pytest.mark.parametrize(
    "argv, watched, via_cli",
    [
        (["bxmem", "decide"], True, True),
        (["bxmem", "decide", "--json"], True, True),
        (["bxmem", "decide", "-q"], True, False),  # --quiet shows no bar
        (["bxmem", "decide"], False, False),
        (["bxmem", "mirror"], True, True),  # the index rebuild's bar
        (["bxmem", "mirror"], False, False),
        (["bxmem", "send"], True, False),  # no bar: send never refreshes the index
        (["bxmem", "recall", "backups"], True, False),
    ],
)
def test_a_job_a_person_watches_goes_to_the_cli(argv, watched, via_cli, monkeypatch):
    """Its progress bar is rich's, which the lean path never loads."""
    ran = []
    monkeypatch.setattr(os, "isatty", lambda fd: watched and fd == 2)

    def run_cli(args):
        ran.append(("cli", args))
        return 0

    def run_lean(parsed):
        ran.append(("lean", parsed.command))
        return 0

    monkeypatch.setattr(cli, "run_cli", run_cli)
    monkeypatch.setattr("bxmem.start.lean_path.run", run_lean)
    assert entry.main(argv) == 0
    assert [how for how, _what in ran] == ["cli" if via_cli else "lean"]


@pytest.mark.parametrize("job", ["decide", "mirror"])
def test_the_cli_jobs_give_the_index_refresh_its_rebuild_bar_and_the_lean_path_none(job, home, brokerd, monkeypatch):
    """A rebuild of the local index at a job's refresh (a corrupt index, or another
    version's) shows cli/progress.py's bar to a person at a terminal; the lean path has none."""
    from bxmem.cli.progress import index_rebuild_bar
    from bxmem.commands import index_fold
    from bxmem.commands import lean_commands as run_module

    given = []
    monkeypatch.setattr(index_fold, "refresh", lambda paths, progress=None, deadline=None: given.append(progress))
    cli.run_cli([job])
    getattr(run_module, job)()
    assert given == [index_rebuild_bar, None]


def test_the_cli_decide_shows_its_progress_bar_at_a_terminal(home, brokerd, monkeypatch):
    """A backlog over the threshold, stderr a terminal: rich's bar, through the CLI."""
    from bxmem.cli import output
    from bxmem.demo.sample import turn_lines

    write_log(home, "s", turn_lines(1, "the restic backups", "run nightly"))
    monkeypatch.setattr(output.BacklogProgress, "THRESHOLD_BYTES", 0)
    master, slave = os.openpty()
    terminal = os.fdopen(slave, "w")
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(sys, "stdout", terminal)  # rich draws on stdout, as a person's terminal is both
    try:
        code = cli.run_cli(["decide"])
        terminal.flush()
    finally:
        terminal.close()
    shown = os.read(master, 65536).decode(errors="replace")
    os.close(master)
    assert code in COMMAND_EXITS["decide"]
    assert "deciding the backlog" in shown
