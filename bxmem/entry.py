"""The `bxmem` console script.

Timers start `bxmem decide`, `bxmem mirror` and `bxmem send` every few
seconds. Most of those runs have nothing to do, so they are answered by the
stdlib-only fast path before the CLI (typer, rich, pydantic, httpx) is
imported at all. `bxmem recall`, which the agent runs on every memory tool
call, takes the lean path (lean.py) for the same reason.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from .fastpath import is_idle

    if is_idle(argv):
        return 0
    from .lean import run as run_lean

    handled = run_lean(argv)
    if handled is not None:
        return handled
    from .cli import run_cli

    return run_cli(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
