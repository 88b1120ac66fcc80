"""The lean path for `bxmem recall`, which the agent runs as a tool call.

Parses the few arguments recall takes by hand and runs the core directly,
without typer (50 ms to import) or pydantic (the configuration comes from its
validated cache when the file has not changed). Anything it does not
recognise, `--help` included, returns None: the full CLI takes over and says
the same things the same way.
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


def run(argv: list[str]) -> int | None:
    words = argv[1:]
    if "recall" not in words:
        return None
    at = words.index("recall")
    options = _parse(words[:at] + words[at + 1 :])
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
