"""The lean path for the commands that run most: `bxmem recall` (the agent's
tool call) and the timer jobs `decide`, `mirror` and `send` when they have work.

Runs the function start/registry.py names for the command, on the options
start/lean_argv.py parsed, without typer or pydantic (the configuration comes
from its validated cache when the file has not changed). Whatever
start/lean_argv.py declines, `--help` included, goes to the full CLI, which says
the same things the same way. The function's module is imported by name, only
when it runs: at its top this module imports the registry alone.
"""

from __future__ import annotations

import sys

from bxmem.start.registry import BY_NAME


def run(parsed) -> int:
    """Run a grammar.Parsed command; errors are left to the one boundary (errors.boundary)."""
    module, _, function = BY_NAME[parsed.command].run.partition(":")
    __import__(module)  # the one command's module: a recall loads none of the jobs' modules, nor they recall's
    return getattr(sys.modules[module], function)(**parsed.options)
