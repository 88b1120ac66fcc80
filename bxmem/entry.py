"""The `bxmem` console script.

Timers start `bxmem decide`, `bxmem mirror` and `bxmem send` every few
seconds. Most of those runs have nothing to do, so they are answered by the
stdlib-only fast path before the CLI (typer, rich, pydantic, httpx) is
imported at all. `bxmem recall`, which the agent runs on every memory tool
call, takes the lean path (lean.py) for the same reason. argv is parsed once
(grammar.py) for both; what grammar.py declines goes to typer. Errors from
either path meet the one boundary, errors.boundary.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from .grammar import parse

    parsed = parse(argv)
    if parsed is not None:
        from .fastpath import is_idle

        if is_idle(parsed):
            return 0
        from .errors import boundary
        from .lean import run as run_lean

        return boundary(run_lean, parsed)
    from .cli import run_cli

    return run_cli(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
