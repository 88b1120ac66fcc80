"""The lean commands, one function each, for the lean path and the CLI alike, so both behave the same.
Options come as keyword arguments named as in start/registry.py. Output is plain (no typer or rich), and a job's
module is imported by the function that runs it, so no command pays for another's.
"""

from __future__ import annotations

import json as json_module
import sys
import time

from bxmem.config import loader as config_module
from bxmem.errors import ExitCode, exit_code_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from os import PathLike

    from bxmem.config.loader import Config

    ConfigPath = str | PathLike[str] | None
    #: The CLI's progress bar: entered, a callback (done, total) or None.
    Progress = AbstractContextManager[Callable[[int, int], None] | None] | None


def emit_json(value: object) -> None:
    sys.stdout.write(json_module.dumps(value, indent=2, sort_keys=True) + "\n")


def setup(job: str, config: ConfigPath, verbose: bool, quiet: bool) -> Config:
    from bxmem.log import setup as setup_log  # deferred: lean (recall never loads logging)

    setup_log(job, verbose=verbose, quiet=quiet)
    return config_module.load(config)


def finish(report, config: Config, as_json: bool) -> int:
    """The one place a timer job's outcome is printed: the report's notice
    (busy, local-only), then its JSON object or its one-line summary; the
    report's exit code."""
    from bxmem.log import log  # deferred: lean (loaded by setup, which every job runs first)

    notice = report.notice()
    if notice:
        log.info(notice)
    if as_json:
        emit_json(report.as_json(config))
    else:
        lines = report.summary(config)
        for line in [lines] if isinstance(lines, str) else lines or []:
            log.info(line)
    return report.exit_code


def recorded(job: str, loaded: Config, as_json: bool, work: Callable[[], object]) -> int:
    """work() -> the job's report, printed; the run recorded for `bxmem metrics` however it ends, unless it found the
    job's lock taken (the idle check answers the runs without work)."""
    from bxmem.store import job_runs  # deferred: lean

    started, code, busy = time.time(), ExitCode.ERROR, False
    try:
        report = work()
        busy = bool(getattr(report, "busy", False))
        code = finish(report, loaded, as_json)
        return code
    except BaseException as exc:
        code = exit_code_of(exc)
        raise
    finally:
        if not busy:
            job_runs.save(loaded.paths.state, job, code, started, time.time())


def decide(
    *,
    config: ConfigPath = None,
    json: bool = False,
    verbose: bool = False,
    quiet: bool = False,
    progress: Progress = None,
    index_progress=None,
) -> int:
    """`progress`: the CLI's bar over a long backlog; `index_progress`: over a rebuild of the local index."""
    from bxmem.commands import decide as job  # deferred: lean

    loaded = setup("decide", config, verbose, quiet)

    def work():
        if progress is None:
            return job.run(loaded, index_progress=index_progress)
        with progress as update:
            return job.run(loaded, progress=update, index_progress=index_progress)

    return recorded("decide", loaded, json, work)


def mirror(
    *, config: ConfigPath = None, json: bool = False, verbose: bool = False, quiet: bool = False, index_progress=None
) -> int:
    from bxmem.commands import mirror as job  # deferred: lean

    loaded = setup("mirror", config, verbose, quiet)
    return recorded("mirror", loaded, json, lambda: job.run(loaded, index_progress=index_progress))


def send(
    *, config: ConfigPath = None, json: bool = False, verbose: bool = False, quiet: bool = False, now: bool = False
) -> int:
    """`now`: without waiting out the outage backoff (never the in-doubt wait)."""
    from bxmem.commands.send import job  # deferred: lean

    loaded = setup("send", config, verbose, quiet)
    return recorded("send", loaded, json, lambda: job.run(loaded, now=now))


def recall(
    *,
    query: str,
    config: ConfigPath = None,
    k: str | None = None,
    json: bool = False,
    explain: bool = False,
    verbose: bool = False,
    quiet: bool = False,
) -> int:
    """`k`: as written after -k, None when absent (recall.parse_k is the one check, and the default). `explain`: each
    hit's explanation after it, for a person (--json always has it)."""
    from bxmem.commands import recall as recall_module  # deferred: command (the timer jobs never recall)

    count = recall_module.parse_k(k)  # before the configuration: bad input is said first, on every path
    # No logging set up: recall logs nothing, and the agent calls it on every memory tool call.
    loaded = config_module.load(config)
    # Not "no local index yet" (exit 7), which is what a run as the wrong user, or
    # with the wrong HOME, would otherwise say to the model while looking normal.
    loaded.paths.require_home()
    result = recall_module.recall(loaded, query, count)
    if json:
        emit_json(recall_module.render_json(result))
    else:
        sys.stdout.write(recall_module.render_plain(result, explain=explain) + "\n")
    return recall_module.exit_code(result)
