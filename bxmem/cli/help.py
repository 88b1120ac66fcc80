"""What `--help` prints, as plain text: no rich, so help stays cheap and reads the same in a terminal, a pipe
and docs/cli.md. A command names its group with typer's `rich_help_panel=`; `apply` runs once all are declared.
"""

from __future__ import annotations

import inspect
import re

import typer
from typer.core import TyperCommand, TyperGroup

# The groups `bxmem --help` lists, in this order (a command's rich_help_panel names one).
START = "Start here"
TIMER_JOBS = "Timer jobs (systemd runs these every few seconds)"
OWNER = "The owner's commands"
AGENT = "The agent's tools (the host runs these for the model)"
GROUPS = (START, TIMER_JOBS, OWNER, AGENT)

#: Where a command's examples start in its docstring: every line after it is one example.
EXAMPLES = "Examples:"

#: What `bxmem` alone prints: where a new owner starts. A command named here that this
#: build does not have is left out (start/registry.py is the list).
FIRST_STEPS = (
    ("bxmem demo", "every job on built-in sample data, in a temporary home: nothing to set up"),
    ("bxmem init", "write bxmem.toml for this agent and make the Boxmaker home"),
    ("bxmem doctor", "check the setup end to end: the config, each key, brokerd, Honcho, the units"),
    ("bxmem units install", "run the jobs under systemd, for the home and config you have"),
)


def first_sentence(text: str | None) -> str:
    """The help's first sentence, whole: up to the first full stop that ends one
    (followed by a space or the end), within the first paragraph."""
    paragraph = " ".join(inspect.cleandoc(text or "").split("\n\n", 1)[0].split())
    found = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)", paragraph)
    return paragraph[: found.start() + 1] if found else paragraph


def split_examples(text: str | None) -> tuple[str, list[str]]:
    """The help text without its examples, and the examples (one command line each)."""
    body, marker, rest = inspect.cleandoc(text or "").partition(EXAMPLES)
    return body.rstrip(), [line.strip() for line in rest.splitlines() if line.strip()] if marker else []


def first_steps(known: set[str]) -> str:
    rows = [(command, what) for command, what in FIRST_STEPS if command.removeprefix("bxmem ") in known]
    width = max(len(command) for command, _ in rows)
    return (
        "bxmem: memory sync for a Boxmaker agent host.\n\nStart here:\n"
        + "".join(f"  {command:{width}}  {what}\n" for command, what in rows)
        + "\nbxmem --help lists every command; bxmem COMMAND --help says more, with examples.\n"
    )


def _argument_name(param) -> str:
    name = param.metavar or param.name.upper()
    return name + ("..." if param.nargs != 1 else "")


class HelpCommand(TyperCommand):
    """A command's help: usage without types, the text, arguments and options, examples."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_help_text(self, ctx, formatter) -> None:
        body, _examples = split_examples(self.help)
        if body:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(body)

    def format_options(self, ctx, formatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                if not getattr(param, "hidden", False):
                    said = getattr(param, "help", None) or ""
                    arguments.append((_argument_name(param), said + ("  [required]" if param.required else "")))
            else:
                record = param.get_help_record(ctx)
                if record is not None:
                    options.append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        if options:
            with formatter.section("Options"):
                formatter.write_dl(options)

    def format_epilog(self, ctx, formatter) -> None:
        _body, examples = split_examples(self.help)
        if examples:
            with formatter.section(EXAMPLES.rstrip(":")):
                for example in examples:  # as typed: never wrapped
                    formatter.write(f"{'':>{formatter.current_indent}}{example}\n")


class HelpGroup(TyperGroup):
    """A group's help: its commands in their groups, each with its whole first sentence."""

    def format_commands(self, ctx, formatter) -> None:
        rows: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            panel = getattr(command, "rich_help_panel", None) if ctx.parent is None else None
            rows.setdefault(panel or "Commands", []).append((name, first_sentence(command.help)))
        for panel in sorted(rows, key=lambda p: GROUPS.index(p) if p in GROUPS else len(GROUPS)):
            with formatter.section(panel):
                formatter.write_dl(rows[panel], col_max=16)


def apply(app: typer.Typer) -> None:
    """Every command and group of `app` (and its groups') with the help above."""
    app.info.cls = HelpGroup
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # typer's default: a command that asked for its own keeps it
            command.cls = HelpCommand
    for group in app.registered_groups:
        assert group.typer_instance is not None
        apply(group.typer_instance)
