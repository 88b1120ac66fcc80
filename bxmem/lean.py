"""The lean path for the commands that run most: `bxmem recall` (the agent's
tool call) and the timer jobs `decide`, `mirror` and `send` when they have work.

Parses the few arguments they take by hand and runs the core directly,
without typer (70 ms to import, pydantic included) or pydantic (the
configuration comes from its validated cache when the file has not changed).
Anything it does not recognise, `--help` included, returns None: the full CLI
takes over and says the same things the same way.
"""

from __future__ import annotations

import sys


def _parse(args: list[str]) -> dict | None:
    options: dict = {"k": 8, "json": False, "config": None, "query": None}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-k", "--config") and i + 1 < len(args):
            value = args[i + 1]
            if arg == "-k":
                if not value.isdigit():
                    return None
                options["k"] = int(value)
            else:
                options["config"] = value
            i += 2
            continue
        if arg.startswith("--config="):
            options["config"] = arg.split("=", 1)[1]
        elif arg == "--json":
            options["json"] = True
        elif arg in ("-q", "--quiet"):
            pass
        elif arg == "--" and i + 2 == len(args) and options["query"] is None:
            options["query"] = args[i + 1]
            break
        elif arg.startswith("-") or options["query"] is not None:
            return None  # --help, -v, anything else: the full CLI
        else:
            options["query"] = arg
        i += 1
    return options if options["query"] is not None else None


def _parse_job(args: list[str]) -> dict | None:
    options: dict = {"config_path": None, "as_json": False, "verbose": False, "quiet": False}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--config" and i + 1 < len(args):
            options["config_path"] = args[i + 1]
            i += 2
            continue
        if arg.startswith("--config="):
            options["config_path"] = arg.split("=", 1)[1]
        elif arg == "--json":
            options["as_json"] = True
        elif arg in ("-q", "--quiet"):
            options["quiet"] = True
        elif arg in ("-v", "--verbose"):
            options["verbose"] = True
        else:
            return None
        i += 1
    return options


def _run_job(name: str, args: list[str]) -> int | None:
    options = _parse_job(args)
    if options is None:
        return None
    from .errors import BxmemError
    from .jobs import JOBS

    try:
        return JOBS[name](**options)
    except BxmemError as exc:
        sys.stderr.write(f"bxmem: error: {exc.one_line()}\n")
        return exc.exit_code
    except OSError as exc:  # the machine refused (disk, permissions): one line, not a traceback
        sys.stderr.write(f"bxmem: error: {exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("bxmem: interrupted\n")
        return 130


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
        return _run_job(name, rest)
    if name != "recall":
        return None
    options = _parse(rest)
    if options is None:
        return None
    from . import config as config_module
    from . import recall as recall_module
    from .errors import BxmemError, ExitCode

    try:
        config = config_module.load(options["config"])
        result = recall_module.recall(config, options["query"], options["k"])
    except BxmemError as exc:
        sys.stderr.write(f"bxmem: error: {exc.one_line()}\n")
        return exc.exit_code
    if options["json"]:
        import json

        sys.stdout.write(json.dumps(recall_module.render_json(result), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(recall_module.render_plain(result) + "\n")
    return ExitCode.OK if result.answered else ExitCode.UNAVAILABLE
