"""The lean path for the commands that run most: `bxmem recall` (the agent's
tool call) and the timer jobs `decide`, `mirror` and `send` when they have work.

Runs the core directly on the command line start/grammar.py parsed, without typer
(70 ms to import, pydantic included) or pydantic (the configuration comes
from its validated cache when the file has not changed). Whatever start/grammar.py
declines, `--help` included, goes to the full CLI, which says the same
things the same way. Imports nothing at import time: the job or recall
module comes in only when it runs.
"""

from __future__ import annotations


def run(parsed) -> int:
    """Run a grammar.Parsed command; errors are left to the one boundary (errors.boundary)."""
    options = parsed.options
    if parsed.command == "recall":
        from bxmem.cli.output import recall

        return recall(options.get("config"), options["query"], options.get("k"), bool(options.get("json")),
                      verbose=bool(options.get("verbose")), quiet=bool(options.get("quiet")))
    from bxmem.cli.output import JOBS

    return JOBS[parsed.command](options.get("config"), as_json=bool(options.get("json")),
                                verbose=bool(options.get("verbose")), quiet=bool(options.get("quiet")))
