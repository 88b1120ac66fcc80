"""The lean commands (the three timer jobs and recall) as one function each:
logging, configuration, the run, and what it prints. Shared by the CLI and
the lean path, so both behave alike; the only place their output is written.
"""

from __future__ import annotations

import sys

from .errors import ExitCode

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def emit_json(value: object) -> None:
    import json  # not at import time: the lean recall without --json does not need it

    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def setup(job: str, config_path, verbose: bool, quiet: bool):
    from . import config as config_module
    from .log import setup

    setup(job, verbose=verbose, quiet=quiet)
    return config_module.load(config_path)


class _backlog_progress:
    """A progress bar over a long backlog when a person is watching (stderr is a
    terminal); nothing at all when a timer runs the job."""

    THRESHOLD_BYTES = 4 << 20

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self):
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.THRESHOLD_BYTES:
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("deciding the backlog"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                                transient=True)
            self.bar.start()
            self.task = self.bar.add_task("decide", total=total)
        assert self.task is not None  # added with the bar
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


def finish(report, config, as_json: bool) -> int:
    """The one place a timer job's outcome is printed: the report's notice
    (busy, local-only), then its JSON object or its one-line summary; the
    report's exit code."""
    from .log import log

    notice = report.notice()
    if notice:
        log.info(notice)
    if as_json:
        emit_json(report.as_json(config))
    else:
        line = report.summary(config)
        if line:
            log.info(line)
    return report.exit_code


def decide(config_path=None, as_json: bool = False, verbose: bool = False, quiet: bool = False) -> int:
    from . import decide as job

    config = setup("decide", config_path, verbose, quiet)
    with _backlog_progress(quiet) as progress:
        report = job.run(config, progress=progress)
    return finish(report, config, as_json)


def mirror(config_path=None, as_json: bool = False, verbose: bool = False, quiet: bool = False) -> int:
    from . import mirror as job

    config = setup("mirror", config_path, verbose, quiet)
    return finish(job.run(config), config, as_json)


def send(config_path=None, as_json: bool = False, verbose: bool = False, quiet: bool = False) -> int:
    from . import send as job

    config = setup("send", config_path, verbose, quiet)
    return finish(job.run(config), config, as_json)


def recall(config_path, query: str, k: int | None, as_json: bool, verbose: bool = False, quiet: bool = False) -> int:
    """`bxmem recall`: the hits as JSON or as labelled plain text; UNAVAILABLE when no source answered.
    k None: recall.DEFAULT_K (the only place the default is written)."""
    from . import config as config_module
    from . import recall as recall_module

    # No logging set up: recall logs nothing, and `logging` would cost the agent's every call ~5 ms.
    config = config_module.load(config_path)
    result = recall_module.recall(config, query) if k is None else recall_module.recall(config, query, k)
    if as_json:
        emit_json(recall_module.render_json(result))
    else:
        sys.stdout.write(recall_module.render_plain(result) + "\n")
    return ExitCode.OK if result.answered else ExitCode.UNAVAILABLE


def config_check(config, as_json: bool) -> int:
    """`bxmem config check`: the resolved paths and workspaces (never a key)."""
    from .config import read_key

    workspaces = []
    for ws in config.workspaces():
        read_key(ws)  # raises ConfigInvalid for an unreadable or exposed key file
        workspaces.append({"role": ws.role, "workspace": ws.name, "key": str(ws.key_file) if ws.key_file else None})
    result = {
        "config": str(config.path),
        "config_exists": config.path.exists(),
        "home": str(config.paths.home),
        "run": str(config.paths.run),
        "ledger": str(config.paths.ledger),
        "broker_socket": str(config.paths.broker_socket),
        "mode": "local-only" if config.local_only else "honcho",
        "honcho_url": config.honcho.url if config.honcho else None,
        "agent": config.honcho.agent if config.honcho else None,
        "owner": config.honcho.owner if config.honcho else None,
        "workspaces": workspaces,
        "send_batch": config.send.batch,
    }
    if as_json:
        emit_json(result)
        return ExitCode.OK
    lines = [f"config: {result['config']}" + ("" if result["config_exists"] else " (absent: defaults, local-only)")]
    lines += [f"{name}: {result[name]}" for name in ("home", "run", "ledger", "broker_socket", "mode")]
    if config.honcho:
        lines += [f"honcho: {config.honcho.url} as agent {config.honcho.agent}, owner {config.honcho.owner}"]
        for ws in workspaces:
            key = f"key from {ws['key']}" if ws["key"] else "no key"
            lines.append(f"  {ws['role']}: {ws['workspace']} ({key})")
    else:
        lines.append("local-only: no [honcho] section, nothing will be sent")
    sys.stdout.write("\n".join(lines) + "\n")
    return ExitCode.OK


JOBS = {"decide": decide, "mirror": mirror, "send": send}
