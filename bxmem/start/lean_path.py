"""Runs the command start/registry.py names, on what start/lean_argv.py parsed, without typer or pydantic.
The command's module is imported by name when it runs: at its top this module imports the registry alone.
"""

from __future__ import annotations

import sys

from bxmem.start.registry import BY_NAME


def run(parsed) -> int:
    """Run a grammar.Parsed command; errors are left to the one boundary (errors.boundary)."""
    module, _, function = BY_NAME[parsed.command].run.partition(":")
    __import__(module)  # the one command's module: a recall loads none of the jobs' modules, nor they recall's
    return getattr(sys.modules[module], function)(**parsed.options)
