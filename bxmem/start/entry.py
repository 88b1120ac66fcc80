"""The `bxmem` console script: the idle check first, then the lean path or typer, all inside errors.boundary."""

from __future__ import annotations

import os
import sys

from bxmem.start.idle import idle_exit
from bxmem.start.lean_argv import Parsed, parse
from bxmem.start.registry import BY_NAME


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    parsed = parse(argv)
    if parsed is not None:
        idle = idle_exit(parsed)
        if idle is not None:
            return idle
        if not _shows_progress(parsed):
            from bxmem.errors import boundary  # deferred: idle
            from bxmem.start.lean_path import run as run_lean  # deferred: idle

            return boundary(run_lean, parsed, as_json=bool(parsed.options.get("json")))
    from bxmem.cli.app import run_cli  # deferred: lean

    return run_cli(argv[1:])


def _shows_progress(parsed: Parsed) -> bool:
    """A command whose progress bar a person at a terminal would see goes to the CLI, which alone loads rich (the
    same output; typer's start-up is nothing beside a backlog)."""
    return BY_NAME[parsed.command].progress and not parsed.options.get("quiet") and os.isatty(2)


def console() -> None:
    """The console script (and `python -m bxmem`): main, then leave without the
    interpreter's teardown. A send or decide run ends holding its outbox, index and
    ledger view (100,000 objects and more at a backlog), and freeing each one at
    exit is paid by every run of a drain (docs/performance.md). Nothing of ours
    waits for exit: the ledger and state are fsynced when written, the threads are
    daemons (abandoned at exit anyway), and output and the log are flushed here.
    An exception (SystemExit included) leaves the ordinary way."""
    code = main()
    try:
        logging = sys.modules.get("logging")  # never imported for it: the idle path has none
        if logging is not None:
            logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        from bxmem.errors import closed_stdout, stdout_closed  # deferred: idle

        if stdout_closed():
            code = closed_stdout(code)
        os._exit(code)
    except (OSError, ValueError):  # a closed or broken stream: the interpreter's own exit reports it
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()
