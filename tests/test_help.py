"""Help that teaches: `bxmem --help` lists the commands in groups with their whole
first sentence, every command's help ends with examples that run as written, no
usage line shows a Python type, and `bxmem` alone says where to start. (Every
help text, exactly: docs/cli.md, generated and held to the code by tests/test_docs.py.)"""

from __future__ import annotations

import re
import shlex

import pytest
import typer
from helpers import bxmem_inprocess

from bxmem.cli import help as help_module
from bxmem.cli.app import app
from bxmem.start.registry import BY_NAME, COMMANDS


def help_of(*path: str) -> str:
    result = bxmem_inprocess(*path, "--help", env={"COLUMNS": "88"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def click_command(path: list[str]):
    command = typer.main.get_command(app)
    for word in path:
        assert isinstance(command, typer.core.TyperGroup), path
        command = command.commands[word]
    return command


def test_bxmem_alone_says_where_to_start():
    result = bxmem_inprocess()
    assert result.returncode == 0 and result.stderr == ""
    steps = [line.strip().split("  ")[0] for line in result.stdout.splitlines() if line.startswith("  bxmem ")]
    expected = ["bxmem demo", "bxmem init", *(["bxmem doctor"] if "doctor" in BY_NAME else []), "bxmem units install"]
    assert steps == expected
    if "doctor" not in BY_NAME:  # this build's own text, exactly (with doctor, one line more)
        assert result.stdout == (
            "bxmem: memory sync for a Boxmaker agent host.\n\n"
            "Start here:\n"
            "  bxmem demo           every job on built-in sample data, in a temporary home: nothing to set up\n"
            "  bxmem init           write bxmem.toml for this agent and make the Boxmaker home\n"
            "  bxmem units install  run the jobs under systemd, for the home and config you have\n\n"
            "bxmem --help lists every command; bxmem COMMAND --help says more, with examples.\n"
        )


def test_bxmem_help_lists_every_command_in_its_group_with_its_whole_first_sentence():
    text = help_of()
    sections = re.findall(r"^(\S[^\n]*):\n((?:  [^\n]*\n)+)", text, flags=re.M)
    titles = [title for title, _ in sections]
    assert titles == ["Options", *help_module.GROUPS]
    listed: dict[str, str] = {}
    for _title, body in sections[1:]:
        for name, sentence in re.findall(r"^  (\S+) +(.+(?:\n {4,}\S.*)*)", body, flags=re.M):
            listed[name] = " ".join(sentence.split())
    top = {name.split()[0] for name in BY_NAME}
    assert set(listed) == top
    for name, sentence in listed.items():
        assert sentence.endswith(".") and "..." not in sentence, (name, sentence)
        assert sentence == help_module.first_sentence(click_command([name]).help)
    groups = dict(sections[1:])
    for name in ("decide", "mirror", "send"):
        assert re.search(rf"^  {name} ", groups[help_module.TIMER_JOBS], flags=re.M)
    for name in ("recall", "ask", "tools"):
        assert re.search(rf"^  {name} ", groups[help_module.AGENT], flags=re.M)
    for name in ("sync", "outbox", "audit", "undo"):
        assert re.search(rf"^  {name} ", groups[help_module.OWNER], flags=re.M)


def test_the_first_sentence_is_cut_only_at_a_full_stop():
    first = help_module.first_sentence
    assert first("Do this (e.g. that). Then more.") == "Do this (e.g. that)."
    assert first("One line\nwrapped here. Second.") == "One line wrapped here."
    assert first("No stop at all\n\nA paragraph.") == "No stop at all"
    assert first("Version 1.2 is out. Yes.") == "Version 1.2 is out."


LEAVES = sorted(c.name for c in COMMANDS)


@pytest.mark.parametrize("name", LEAVES)
def test_every_command_has_examples_that_parse_as_written(name):
    command = click_command(name.split())
    _body, examples = help_module.split_examples(command.help)
    assert examples, f"bxmem {name} --help has no example"
    text = help_of(*name.split())
    assert text.rstrip("\n").endswith("\n".join(f"  {e}" for e in examples))  # the last section, each line whole
    for example in examples:
        words = shlex.split(example.replace('"$(command -v bxmem)"', "bxmem"))
        words = words[words.index("bxmem") :]  # after sudo
        cut = next((i for i, w in enumerate(words) if w in (">", "|")), len(words))
        rest = words[1:cut]
        while rest and rest[0].startswith("-"):  # global options before the command
            rest = rest[2:] if rest[0] == "--config" else rest[1:]
        assert " ".join(rest).startswith(name), (name, example)
        leaf = command.make_context(name, rest[len(name.split()) :], parent=None, resilient_parsing=False)
        assert leaf is not None


@pytest.mark.parametrize("name", LEAVES)
def test_no_usage_line_or_argument_shows_a_python_type(name):
    text = help_of(*name.split())
    usage = text.splitlines()[0]
    assert usage.startswith(f"Usage: bxmem {name} [OPTIONS]")
    assert not re.search(r"[{}<>]|list\[|\bstr\b|\bint\b|\bfloat\b", usage), usage
    arguments = re.search(r"^Arguments:\n((?:  .*\n)+)", text, flags=re.M)
    if arguments:
        assert not re.search(r"<[a-z\[\]]+>", arguments.group(1)), arguments.group(1)


def test_every_top_level_command_says_its_group():
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    commands = group.commands
    for name, command in commands.items():
        assert getattr(command, "rich_help_panel", None) in help_module.GROUPS, name
