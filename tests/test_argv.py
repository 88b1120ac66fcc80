"""One grammar for the lean path and typer (issue 14, item 1).

start/lean_argv.py describes the lean commands' options once. Every command line it
accepts, generated here from its tables, must run the same way through the
lean path (bxmem.start.entry.main) and through typer forced (cli.run_cli): the same
stdout, the same stderr, the same exit code. The argv shapes come from the
tables, so an option added to start/lean_argv.py is tested without touching this file.
"""

from __future__ import annotations

import itertools
import json
import shutil

import pytest
import typer

from bxmem.cli import app as cli
from bxmem.commands import recall
from bxmem.start import entry
from bxmem.start.lean_argv import COMMANDS, GLOBAL, POSITIONAL, VALUED, parse

MISSING = "/nonexistent/bxmem.toml"


def _value(key: str, config: str) -> str:
    return {"config": config, "k": "3"}[key]


def _forms(name: str, key: str, config: str) -> list[list[str]]:
    """Each way start/lean_argv.py accepts the option written: flag, NAME VALUE, --NAME=VALUE."""
    if name not in VALUED:
        return [[name]]
    value = _value(key, config)
    return [[name, value]] + ([[f"{name}={value}"]] if name.startswith("--") else [])


def _place(command: str, chosen, tail: list[str], globals_first: bool) -> list[str]:
    before: list[str] = []
    after: list[str] = []
    for words, where in chosen:
        (before if where == "global" and globals_first else after).extend(words)
    if tail and tail[0] == "--":
        return ["bxmem", *before, command, *after, *tail]
    return ["bxmem", *before, command, *tail, *after]


def argv_shapes(config: str) -> list[list[str]]:
    """Every command with every option (each name and form) alone, every pair of
    distinct options in one form, globals before and after the command word,
    and the positional before, after or behind `--`."""
    shapes = []
    for command, own in COMMANDS.items():
        options = [(name, key, "global") for name, key in GLOBAL.items()] + [
            (name, key, "own") for name, key in own.items()
        ]
        positional = POSITIONAL.get(command)
        # several words are one query, options may fall between them, and `--` takes the rest
        tails = (
            [[]]
            if not positional
            else [
                ["backups"],
                ["backup", "plan"],
                ["backup", "-k", "5", "plan"],
                ["--", "-dash-query"],
                ["backup", "--", "-k", "plan"],
                [""],
            ]
        )

        singles = [[(form, where)] for name, key, where in options for form in _forms(name, key, config)]
        pairs = [
            [(_forms(a, ka, config)[-1], wa), (_forms(b, kb, config)[0], wb)]
            for (a, ka, wa), (b, kb, wb) in itertools.combinations(options, 2)
            if ka != kb
        ]
        chosen: list[tuple[list[str], str]]
        for chosen in [[]] + singles + pairs:
            for tail in tails:
                for globals_first in (True, False):
                    shapes.append(_place(command, chosen, tail, globals_first))
    unique = {tuple(s): s for s in shapes}
    return list(unique.values())


def test_the_shapes_are_what_the_lean_path_accepts(config_file):
    shapes = argv_shapes(str(config_file))
    assert len(shapes) > 200
    declined = [s for s in shapes if parse(s) is None]
    assert not declined, f"the generator made command lines start/lean_argv.py declines: {declined[:3]}"


def _run(fn, argv, capsys, home) -> tuple[str, str, int]:
    shutil.rmtree(home)
    home.mkdir()  # the same path every run: a log line names it
    code = fn(argv)
    out, err = capsys.readouterr()
    return out, err, code


# One test per command and config, so that parallel workers share them out.
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("config", ["named", "missing"])
def test_every_lean_command_line_runs_the_same_through_typer(config, command, config_file, home, capsys, monkeypatch):
    monkeypatch.setattr("bxmem.commands.recall.nonce", lambda: "n0nce")  # recall's frame is random otherwise
    path = str(config_file) if config == "named" else MISSING
    differ = []
    shapes = [argv for argv in argv_shapes(path) if command in argv]
    assert shapes
    for argv in shapes:
        lean = _run(entry.main, argv, capsys, home)
        full = _run(lambda a: cli.run_cli(a[1:]), argv, capsys, home)
        if lean != full:
            differ.append((argv, lean, full))
    assert not differ, f"{len(differ)} command lines differ, the first: {differ[0]}"


def test_typer_declares_every_option_of_the_grammar():
    group = typer.main.get_command(cli.app)
    assert isinstance(group, typer.core.TyperGroup)
    main_options = {opt for p in group.params for opt in p.opts}
    assert set(GLOBAL) <= main_options
    for command, own in COMMANDS.items():
        params = {opt: p for p in group.commands[command].params for opt in p.opts}
        for name in [*GLOBAL, *own]:
            assert name in params, f"bxmem {command} {name}: typer does not know it"
            param = params[name]
            assert isinstance(param, typer.core.TyperOption), f"bxmem {command} {name}: not an option"
            assert param.is_flag == (name not in VALUED), f"bxmem {command} {name}: flag or value differ"
    k = group.commands["recall"].params[[p.name for p in group.commands["recall"].params].index("k")]
    assert isinstance(k, typer.core.TyperOption)
    assert k.default is None and f"default {recall.DEFAULT_K}" in (k.help or "")  # absent is absent on both paths


@pytest.mark.parametrize(
    "argv, blamed",
    [
        (["decide", "-q", "--bogus"], "No such option: --bogus"),  # typer blamed -q
        (
            ["recall", "foo", "--config", "X", "-k", "x"],
            "-k must be a whole number from 1 to 100, not 'x'",
        ),  # typer said "No such option: --config"
        (["send", "--json", "-v", "--bogus"], "No such option: --bogus"),
    ],
)
def test_typer_blames_the_wrong_word_not_a_global_option(argv, blamed, capsys):
    assert parse(["bxmem", *argv]) is None
    assert entry.main(["bxmem", *argv]) == 2
    assert blamed in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "q", "-k=3"],  # click reads "=3"
        ["recall", "q", "-k", "²"],  # a digit int() refuses
        ["decide", "--config="],
        ["decide", "--config", ""],
        ["decide", "--config", "-q"],
        ["--json", "decide"],  # a command's option before the command
        ["recall"],
        ["recall", "--"],
        ["decide", "--json=yes"],
        ["-q", "--", "send"],
    ],
)
def test_shapes_typer_reads_otherwise_are_left_to_typer(argv):
    assert parse(["bxmem", *argv]) is None


@pytest.mark.parametrize("k", ["abc", "1.5", "0", "101", "-5", "\u0663", "\u00b2", " 3", ""])
def test_a_bad_k_is_one_line_on_every_path(k, capsys):
    """A -k that is not a whole number from 1 to 100 is the same one line on the lean path and
    typer's (never typer's usage block), whether it is not a number or out of range."""
    expected = f"bxmem: error: -k must be a whole number from 1 to 100, not {k!r}\n"
    for argv in (
        ["bxmem", "recall", "-k", k, "--", "q"],
        ["bxmem", "recall", "--json", "q", "-k", k],
        ["bxmem", "recall", f"-k={k}", "q"],
    ):
        for run in (entry.main, lambda a: cli.run_cli(a[1:])):
            code = run(argv)
            out, err = capsys.readouterr()
            shown = k if not argv[2].startswith("-k=") else f"={k}"  # click reads -k=3 as "=3"
            assert (code, err) == (2, expected.replace(repr(k), repr(shown))), argv
            if "--json" in argv:  # stdout is one JSON document, an error one here, saying the same
                assert json.loads(out)["error"]["message"] == err.removeprefix("bxmem: error: ").rstrip("\n")
            else:
                assert out == "", argv


def test_a_usage_error_is_one_line_naming_the_command_and_its_help(capsys):
    for argv, line in (
        (["ask"], "ask: Missing argument 'QUESTION' (bxmem ask --help)"),
        (["recall", "--bogus", "q"], "recall: No such option: --bogus"),
        (["nosuch"], "No such command 'nosuch' (bxmem --help)"),
    ):
        assert cli.run_cli(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"bxmem: error: {line}") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "argv, query",
    [
        (["recall", "backup", "plan"], "backup plan"),  # as a person types it: one query, not two arguments
        (["recall", "backup", "--json", "plan"], "backup plan"),
        (["recall", "--", "-k", "3"], "-k 3"),  # after `--` every word is the query's
        (["recall", "--json", "--", "what is -k?"], "what is -k?"),  # the agent's form, unchanged
    ],
)
def test_several_words_are_one_query(argv, query):
    parsed = parse(["bxmem", *argv])
    assert parsed is not None and parsed.options["query"] == query
