"""The `bxmem` console script.

Timers start `bxmem decide`, `bxmem mirror` and `bxmem send` every few
seconds. Most of those runs have nothing to do, so they are answered by the
stdlib-only fast path before the CLI (typer, rich, pydantic, httpx) is
imported at all. `bxmem recall`, which the agent runs on every memory tool
call, takes the lean path (start/lean.py) for the same reason. argv is parsed once
(start/grammar.py) for both; what start/grammar.py declines goes to typer. Errors from
either path meet the one boundary, errors.boundary.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from bxmem.start.grammar import parse

    parsed = parse(argv)
    if parsed is not None:
        from bxmem.start.idle import is_idle

        if is_idle(parsed):
            return 0
        from bxmem.errors import boundary
        from bxmem.start.lean import run as run_lean

        return boundary(run_lean, parsed, as_json=bool(parsed.options.get("json")))
    from bxmem.cli.app import run_cli

    return run_cli(argv[1:])


def console() -> None:
    """The console script (and `python -m bxmem`): main, then leave without the
    interpreter's teardown. A send or decide run ends holding its outbox, index and
    ledger view (100,000 objects and more at a backlog); freeing each one at exit
    cost 30-100 ms a run, which a drain of many runs paid every time. Nothing of
    ours waits for exit: the ledger and state are fsynced when written, the
    threads are daemons (abandoned at exit anyway), and output and the log are
    flushed here. An exception (SystemExit included) leaves the ordinary way."""
    code = main()
    try:
        logging = sys.modules.get("logging")  # never imported for it: the idle path has none
        if logging is not None:
            logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: let the interpreter report it as before
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()
