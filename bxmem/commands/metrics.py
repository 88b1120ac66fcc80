"""`bxmem metrics`: the Prometheus text format for node_exporter's textfile collector, closed by `# EOF`
(a comment to that parser). Never a text, an item id, a key or a path; a Honcho that does not answer is a
metric (`bxmem_honcho_queue_up 0`), not an error.
"""

from __future__ import annotations

from bxmem.commands import live_checks
from bxmem.commands import sync as sync_module
from bxmem.config.loader import Config, Key, read_key
from bxmem.errors import KeyFileInvalid
from bxmem.formats.timestamps import parse_time
from bxmem.honcho.api import monotonic
from bxmem.start.lean_argv import JOBS
from bxmem.start.version import __version__
from bxmem.store import job_runs

QUEUE_TIMEOUT_S = 2.0
QUEUE_STATES = ("pending", "in_progress", "completed")


class Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.samples: list[tuple[dict[str, str], float]] = []

    def add(self, value: float, **labels: str) -> Family:
        self.samples.append((labels, value))
        return self

    def text(self) -> str:
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]
        for labels, value in self.samples:
            inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
            lines.append(f"{self.name}{{{inner}}} {_number(value)}" if inner else f"{self.name} {_number(value)}")
        return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0")


def _at(value: object) -> float:
    """A time from the ledger as a timestamp, 0 when there is none (Prometheus' own convention)."""
    return parse_time(value) or 0.0


def _queue(url: str, workspace: str, key: Key | None) -> dict[str, int]:
    from bxmem.honcho.client import ReadClient  # deferred: command

    with ReadClient(
        url,
        workspace,
        key,
        connect_timeout=QUEUE_TIMEOUT_S,
        read_timeout=QUEUE_TIMEOUT_S,
        ends_by=monotonic() + QUEUE_TIMEOUT_S,
        ends_by_name=None,
    ) as client:
        return client.queue_status()


def honcho_queues(config: Config) -> dict[str, dict[str, int] | None]:
    if config.honcho is None:
        return {}
    url = config.honcho.url
    jobs: dict = {}
    unread: dict[str, None] = {}
    for ws in config.workspaces():
        if ws.role.startswith("read:"):
            continue
        try:
            key = read_key(ws)
        except KeyFileInvalid:
            unread[ws.name] = None  # not asked: the key file is refused (sync and doctor say why)
            continue
        jobs[ws.name] = (QUEUE_TIMEOUT_S, lambda name=ws.name, key=key: _queue(url, name, key))
    found = {name: value if how == "ok" else None for name, (how, value) in live_checks.parallel(jobs).items()}
    return {**found, **unread}  # type: ignore[dict-item]


def families(config: Config, now: float | None = None) -> list[Family]:
    report = sync_module.status(config, now=now, check=False, prepare=False)
    state = config.paths.state
    out = [
        Family("bxmem_build_info", "gauge", "bxmem's version, as a label; always 1.").add(1, version=__version__),
        Family("bxmem_local_only", "gauge", "1 when bxmem is local-only (no [honcho] section): nothing is sent.").add(
            1 if config.local_only else 0
        ),
    ]
    info = Family("bxmem_workspace_info", "gauge", "Each configured Honcho workspace and its role; always 1.")
    for ws in config.workspaces():
        info.add(1, workspace=ws.name, role=ws.role)
    out.append(info)

    pending = Family(
        "bxmem_outbox_pending_items", "gauge", "Items decided and not yet sent, not held, by workspace and kind."
    )
    oldest = Family(
        "bxmem_outbox_oldest_pending_age_seconds",
        "gauge",
        "Age of the oldest pending item of each workspace; 0 when none is pending.",
    )
    doubt = Family(
        "bxmem_outbox_in_doubt_items", "gauge", "Items whose request got no answer, looked up before any is sent again."
    )
    behind = Family("bxmem_outbox_behind_in_doubt_items", "gauge", "Items waiting behind an item in doubt.")
    refused = Family(
        "bxmem_key_refused",
        "gauge",
        "1 while sends to the workspace stop because its key is refused (by Honcho or bxmem).",
    )
    refused_now = {entry["workspace"] for entry in report["keys_refused"]}
    for name, ws in report["workspaces"].items():
        pending.add(ws["pending_turns"], workspace=name, kind="turn").add(
            ws["pending_edits"], workspace=name, kind="edit"
        )
        oldest.add(ws["oldest_pending_age_s"] or 0.0, workspace=name)
        doubt.add(ws["in_doubt"], workspace=name)
        behind.add(ws["waiting_behind"], workspace=name)
        refused.add(1 if name in refused_now else 0, workspace=name)
    for name in sorted(refused_now - set(report["workspaces"])):
        refused.add(1, workspace=name or "")
    failed = Family(
        "bxmem_outbox_failed_items", "gauge", "Items that failed and wait for the owner (bxmem outbox resend or drop)."
    )
    by_ws: dict[str, int] = {name: 0 for name in report["workspaces"]}
    for item in report["failed"]:
        by_ws[item["workspace"] or ""] = by_ws.get(item["workspace"] or "", 0) + 1
    for name, count in by_ws.items():
        failed.add(count, workspace=name)
    held = Family(
        "bxmem_outbox_held_items",
        "gauge",
        "Items the configuration holds (no longer lets go where they were decided), by workspace and reason.",
    )
    for group in report["held"]:
        held.add(group["turns"] + group["edits"], workspace=group["workspace"] or "", reason=group["reason"] or "")
    out += [
        pending,
        oldest,
        doubt,
        behind,
        failed,
        held,
        refused,
        Family("bxmem_outbox_sent_items_total", "counter", "Items sent to Honcho, each counted once.").add(
            report["sent_items"]
        ),
        Family("bxmem_outbox_dropped_items_total", "counter", "Items the owner dropped (bxmem outbox drop).").add(
            report["dropped_items"]
        ),
    ]

    outage = report["outage"]
    out += [
        Family("bxmem_honcho_outage", "gauge", "1 while send records Honcho as unreachable (backing off).").add(
            1 if outage else 0
        ),
        Family(
            "bxmem_honcho_outage_since_timestamp_seconds", "gauge", "When the outage began; 0 when there is none."
        ).add(_at(outage and outage["since"])),
        Family(
            "bxmem_honcho_next_try_timestamp_seconds",
            "gauge",
            "When send next tries Honcho in an outage; 0 when there is none.",
        ).add(_at(outage and outage["next_try_at"])),
    ]
    broker = report["broker"]
    out += [
        Family("bxmem_broker_undecided_turns", "gauge", "Finished turns decide has not decided yet.").add(
            broker["undecided_turns"]
        ),
        Family("bxmem_broker_unavailable", "gauge", "1 while decide records brokerd as unable to answer.").add(
            1 if broker["unavailable_since"] else 0
        ),
        Family(
            "bxmem_broker_unavailable_since_timestamp_seconds",
            "gauge",
            "When brokerd stopped answering; 0 when it answers.",
        ).add(_at(broker["unavailable_since"])),
        Family("bxmem_logs_unreadable", "gauge", "Session logs decide cannot read (their turns wait).").add(
            len(report["logs_unreadable"])
        ),
        Family("bxmem_ledger_malformed_lines", "gauge", "Ledger lines the outbox fold skipped as malformed.").add(
            report["ledger_malformed_lines"]
        ),
    ]

    last = Family(
        "bxmem_job_last_run_timestamp_seconds",
        "gauge",
        "When each timer job last ended a run that had work (idle runs record nothing).",
    )
    took = Family("bxmem_job_last_run_duration_seconds", "gauge", "How long that run took.")
    code = Family(
        "bxmem_job_last_exit_code", "gauge", "That run's exit status (docs/cli.md; 3 is degraded, 4 attention)."
    )
    for job in JOBS:
        run, _why = job_runs.load(state, job)
        if run is not None:
            last.add(run["ended_at"], job=job)
            took.add(run["duration_s"], job=job)
            code.add(run["exit_code"], job=job)
    out += [last, took, code]

    audit = report["audit"]
    out.append(
        Family("bxmem_audit_last_run_timestamp_seconds", "gauge", "When bxmem audit last ran; 0 when never.").add(
            _at(audit and audit.get("at"))
        )
    )
    found = Family(
        "bxmem_audit_discrepancies",
        "gauge",
        "Discrepancies the last bxmem audit found and the owner has not accepted, by kind.",
    )
    for kind, count in ((audit or {}).get("discrepancies") or {}).items():
        found.add(count, kind=kind)
    out.append(found)

    if config.honcho is not None:
        up = Family(
            "bxmem_honcho_queue_up",
            "gauge",
            f"1 when Honcho answered the workspace's queue status within {QUEUE_TIMEOUT_S:g} s, else 0.",
        )
        units = Family(
            "bxmem_honcho_queue_work_units",
            "gauge",
            "Honcho's derivation work for the workspace, by state (completed: since Honcho's last cleanup).",
        )
        for name, queue in honcho_queues(config).items():
            up.add(0 if queue is None else 1, workspace=name)
            for state_name, count in (queue or {}).items():
                if state_name in QUEUE_STATES:
                    units.add(count, workspace=name, state=state_name)
        out += [up, units]
    return out


def render(config: Config, now: float | None = None) -> str:
    return "".join(f.text() for f in families(config, now) if f.samples) + "# EOF\n"
