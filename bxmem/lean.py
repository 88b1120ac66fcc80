"""The lean path for the commands that run most: `bxmem recall` (the agent's
tool call) and the timer jobs `decide`, `mirror` and `send` when they have work.

Parses the few arguments they take by hand and runs the core directly,
without typer (70 ms to import, pydantic included) or pydantic (the
configuration comes from its validated cache when the file has not changed).
Anything it does not recognise, `--help` included, returns None: the full CLI
takes over and says the same things the same way. Imports nothing but `sys`:
the idle fast path uses `parse` and `command_at` too.
"""

from __future__ import annotations

import sys

FLAGS = {"--json": "json", "-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}


def parse(args: list[str], valued: tuple[str, ...] = ("--config",), flags: tuple[str, ...] = (),
          positional: bool = False) -> dict | None:
    """{"--config": "x", "json": True, "query": "..."} for the options given, or
    None when anything else is there (the full CLI then handles it)."""
    options: dict = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, _, inline = arg.partition("=")
        if name in valued and (inline or i + 1 < len(args)):
            options[name] = inline if inline else args[i + 1]
            i += 1 if inline else 2
            continue
        if arg in flags:
            options[FLAGS[arg]] = True
        elif positional and arg == "--" and i + 2 == len(args) and "query" not in options:
            options["query"] = args[i + 1]
            break
        elif positional and not arg.startswith("-") and "query" not in options:
            options["query"] = arg
        else:
            return None
        i += 1
    return options


def command_at(words: list[str]) -> int | None:
    """Where the command word is: the first word that is neither an option nor
    the value of --config."""
    i = 0
    while i < len(words):
        if words[i] == "--config":
            i += 2
            continue
        if not words[i].startswith("-"):
            return i
        i += 1
    return None


def run(argv: list[str]) -> int | None:
    words = argv[1:]
    at = command_at(words)
    if at is None:
        return None
    name, rest = words[at], words[:at] + words[at + 1 :]
    if name in ("decide", "mirror", "send"):
        options = parse(rest, flags=("--json", "-q", "--quiet", "-v", "--verbose"))
        return None if options is None else _guarded(_run_job, name, options)
    if name == "recall":
        options = parse(rest, valued=("--config", "-k"), flags=("--json", "-q", "--quiet"), positional=True)
        if options is None or "query" not in options or not options.get("-k", "8").isdigit():
            return None
        return _guarded(_run_recall, options)
    return None


def _guarded(fn, *args) -> int:
    from .errors import ExitCode, report

    try:
        return fn(*args)
    except KeyboardInterrupt:
        sys.stderr.write("bxmem: interrupted\n")
        return ExitCode.INTERRUPTED
    except Exception as exc:
        return report(exc)


def _run_job(name: str, options: dict) -> int:
    from .jobs import JOBS

    return JOBS[name](options.get("--config"), as_json=bool(options.get("json")),
                      verbose=bool(options.get("verbose")), quiet=bool(options.get("quiet")))


def _run_recall(options: dict) -> int:
    from . import config as config_module
    from . import recall as recall_module
    from .errors import ExitCode

    config = config_module.load(options.get("--config"))
    result = recall_module.recall(config, options["query"], int(options.get("-k", "8")))
    if options.get("json"):
        import json

        sys.stdout.write(json.dumps(recall_module.render_json(result), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(recall_module.render_plain(result) + "\n")
    return ExitCode.OK if result.answered else ExitCode.UNAVAILABLE
