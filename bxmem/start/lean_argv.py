"""recall's and the timer jobs' command line, deliberately a strict subset of typer's so the two cannot disagree
(tests/test_argv.py); what it declines, None, typer parses. A short option's value is the next word (click reads
`-k=3` as "=3"). Imports only the registry: the idle check pays for every module it loads.
"""

from __future__ import annotations

from bxmem.start.registry import COMMANDS as _ALL
from bxmem.start.registry import GLOBAL_OPTIONS, GLOBAL_VALUED

#: Options every command takes, before or after the command word: name -> key.
GLOBAL = GLOBAL_OPTIONS
#: Each lean command's own options, after the command word: name -> key.
COMMANDS = {c.name: c.options for c in _ALL if c.options is not None}
#: Options that take a value (the rest are flags).
VALUED = frozenset(GLOBAL_VALUED).union(*(c.valued for c in _ALL))
#: The positional words a command takes, by the key they are joined under.
POSITIONAL = {c.name: c.positional for c in _ALL if c.positional}
#: A value must pass its check, or typer would convert it differently (or refuse it).
CHECKS = {"k": lambda value: value.isascii() and value.isdigit()}
#: The timer jobs, which the idle check may answer.
JOBS = tuple(c.name for c in _ALL if c.timer_job)


class Parsed:
    __slots__ = ("command", "options")

    def __init__(self, command: str, options: dict) -> None:
        self.command, self.options = command, options

    def __repr__(self) -> str:
        return f"Parsed({self.command!r}, {self.options!r})"


def parse(argv: list[str]) -> Parsed | None:
    words = argv[1:]
    command: str | None = None
    options: dict = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if command is None and not word.startswith("-"):
            if word not in COMMANDS:
                return None
            command = word
            i += 1
            continue
        own = COMMANDS[command] if command is not None else {}
        takes = POSITIONAL.get(command or "")
        if takes and word == "--":
            if i + 1 == len(words):
                return None  # nothing after it: typer says what is missing
            positional.extend(words[i + 1 :])
            break
        if takes and not word.startswith("-"):
            positional.append(word)
            i += 1
            continue
        name, equals, inline = word.partition("=")
        if not equals:
            name = word
        known = GLOBAL.get(name) or own.get(name)
        if known is None:
            return None
        if name in VALUED:
            if equals and not name.startswith("--"):
                return None  # -k=3: click's value would be "=3"
            value = inline if equals else (words[i + 1] if i + 1 < len(words) else "")
            if not value or value.startswith("-") or not CHECKS.get(known, _any)(value):
                return None
            options[known] = value
            i += 1 if equals else 2
            continue
        if equals:
            return None  # a flag with a value: typer says what is wrong
        options[known] = True
        i += 1
    if command is None:
        return None
    if command in POSITIONAL:
        if not positional:
            return None
        options[POSITIONAL[command]] = " ".join(positional)
    return Parsed(command, options)


def _any(value: str) -> bool:
    return True
