"""The three timer jobs as one function each: logging, configuration, the run,
and what it prints. Shared by the CLI and the lean path, so both behave alike.
"""

from __future__ import annotations

import json
import sys

from .errors import ExitCode


def emit_json(value: object) -> None:
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
        self.bar = None
        self.task = None

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
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


def decide(config_path=None, as_json: bool = False, verbose: bool = False, quiet: bool = False) -> int:
    from . import decide as job
    from .log import log

    config = setup("decide", config_path, verbose, quiet)
    with _backlog_progress(quiet) as progress:
        report = job.run(config, progress=progress)
    if report.busy:
        log.info("another decide is running; this one has nothing to do")
    if as_json:  # scripts get an object in every case
        emit_json({
            "busy": report.busy,
            "decided": dict(sorted(report.decided.items())),
            "undecided": report.undecided,
            "broker_problem": report.broker_problem,
            "skipped_lines": report.skipped_lines,
            "local_only": config.local_only,
        })
    if report.busy:
        return ExitCode.OK
    if not as_json and report.decided:
        by_role: dict[str, int] = {}
        for key, count in report.decided.items():
            role = key.split("/")[0]
            by_role[role] = by_role.get(role, 0) + count
        parts = ", ".join(f"{by_role[r]} {r if r != 'none' else 'nowhere'}" for r in ("trusted", "untrusted", "none") if r in by_role)
        log.info(f"decided {sum(by_role.values())} turn(s): {parts}" + ("; local-only, nothing will be sent" if config.local_only else ""))
    return ExitCode.DEGRADED if report.degraded else ExitCode.OK


def mirror(config_path=None, as_json: bool = False, verbose: bool = False, quiet: bool = False) -> int:
    from . import mirror as job
    from .log import log

    config = setup("mirror", config_path, verbose, quiet)
    report = job.run(config)
    if report.busy:
        log.info("another mirror is running; this one has nothing to do")
    if as_json:  # scripts get an object in every case
        emit_json({"busy": report.busy, "decided": dict(sorted(report.decided.items())),
                    "skipped_lines": report.skipped_lines, "local_only": config.local_only})
    if report.busy:
        return ExitCode.OK
    if not as_json and report.decided:
        total = sum(report.decided.values())
        nowhere = sum(n for key, n in report.decided.items() if key.startswith("none/"))
        log.info(f"decided {total} edit(s): {total - nowhere} to Honcho, {nowhere} stay local" + ("; local-only, nothing will be sent" if config.local_only else ""))
    return ExitCode.OK


def pending_count(config, report) -> tuple[int | None, str | None]:
    """The items still in the outbox after a send run, or None and why they were not counted.

    A run that waits out a backoff returns before it counts (it sends nothing);
    its count comes from the outbox checkpoint it saved on the way out, which
    is the ledger folded up to now.
    """
    if report.local_only:
        return None, "local-only: no [honcho] section, so there is no outbox"
    if report.busy:
        return None, "another send is running and holds the outbox"
    if report.waiting_until is None:
        return report.pending, None
    from .outbox import Outbox

    saved = Outbox.read_checkpoint(config.paths.state)
    if saved is None or not isinstance(saved.get("pending"), dict):
        return None, "the outbox checkpoint could not be read"
    return len(saved["pending"]), None


def send(config_path=None, as_json: bool = False, verbose: bool = False, quiet: bool = False) -> int:
    from . import send as job
    from .log import log

    config = setup("send", config_path, verbose, quiet)
    report = job.run(config)
    pending, not_counted = pending_count(config, report)
    if report.local_only:
        log.info("local-only: no [honcho] section in the configuration, nothing is sent")
    elif report.busy:
        log.info("another send is running; this one exits")
    if as_json:  # scripts get an object in every case
        emit_json({
            "local_only": report.local_only,
            "busy": report.busy,
            "sent": report.sent,
            "messages": report.messages,
            "requests": report.requests,
            "failed": report.failed,
            "pending": pending,
            "pending_not_counted": not_counted,
            "outage": report.outage,
            "waiting_until": report.waiting_until,
            "stopped": report.stopped,
        })
    if report.local_only or report.busy:
        return ExitCode.OK
    if not as_json and (report.sent or report.failed):
        log.info(f"sent {report.sent} item(s) in {report.requests} request(s); {report.failed} failed; {pending} pending")
    return ExitCode.DEGRADED if report.degraded else ExitCode.OK


JOBS = {"decide": decide, "mirror": mirror, "send": send}
