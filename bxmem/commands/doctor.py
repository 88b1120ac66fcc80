"""`bxmem doctor`. Honcho, brokerd and systemd are asked at once, each under its own deadline
(live_checks.parallel), within BOUND_S together. Nothing is created or changed anywhere: every request is a read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bxmem.commands import live_checks
from bxmem.commands.doctor_checks import JOBS, Check, honcho_lines, keys_and_queues, problem, unit_lines
from bxmem.commands.recall import HONCHO_TIMEOUT_S
from bxmem.config.loader import Config, Key, read_key
from bxmem.errors import ExitCode, KeyFileInvalid
from bxmem.honcho.api import monotonic
from bxmem.sources import brokerd, unit_state
from bxmem.store import path_modes
from bxmem.store.ledger import now_iso
from bxmem.store.paths import config_source

SCHEMA = "bxmem.doctor/1"
# Every outside question is asked at once, each within its deadline: the longest, and
# the half second live_checks.parallel gives a thread past it, bound the whole wait.
BOUND_S = max(HONCHO_TIMEOUT_S, brokerd.TIMEOUT_S, unit_state.TIMEOUT_S) + 0.5
STATUSES = ("ok", "warning", "failed", "not-checked")
PROBE_WORKSPACE = "bxmem-doctor"  # the route probes' path: a GET answered before any workspace is looked up


@dataclass
class DoctorResult:
    config: str
    named_by: str | None
    mode: str
    honcho_url: str | None
    checked_at: str
    took_s: float = 0.0
    checks: list[Check] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {status.replace("-", "_"): sum(1 for c in self.checks if c.status == status) for status in STATUSES}

    @property
    def exit_code(self) -> int:
        """UNAVAILABLE when Honcho did not answer (what needs it was not checked), else
        ATTENTION when any check failed."""
        if any(c.check == "honcho" and c.status == "failed" for c in self.checks):
            return ExitCode.UNAVAILABLE
        return ExitCode.ATTENTION if any(c.status == "failed" for c in self.checks) else ExitCode.OK

    def as_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "checked_at": self.checked_at,
            "took_s": round(self.took_s, 3),
            "config": {"path": self.config, "named_by": self.named_by},
            "mode": self.mode,
            "honcho_url": self.honcho_url,
            "bound_s": BOUND_S,
            "checks": [c.as_json() for c in self.checks],
            "counts": self.counts(),
            "exit_code": self.exit_code,
        }

    def lines(self) -> list[str]:
        counts = self.counts()
        summary = (
            f"doctor: {len(self.checks)} checks in {self.took_s:.1f} s: {counts['ok']} ok, {counts['warning']} "
            f"warning(s), {counts['failed']} failed, {counts['not_checked']} not checked"
        )
        return [c.text() for c in self.checks] + [summary]


# --- what is looked at here ------------------------------------------------------------


def _local(config: Config, named_by: str | None) -> list[Check]:
    out = []
    at = now_iso()
    found, problems = path_modes.config_file(config.path)
    who = f"named by {named_by}" if named_by else "the default path"
    if problems:
        line = f"config {config.path} ({who}): {found}: {'; '.join(problems)}"
    elif found is None:
        line = f"config {config.path} ({who}): no file there: local-only"
    else:
        line = f"config {config.path} ({who}): {found}: valid, and no one else can change it"
    out.append(
        Check(
            "config", None, "failed" if problems else "ok", line, at, runbook="file-permissions" if problems else None
        )
    )
    facts, problems = path_modes.home(config.paths)
    out.append(
        Check(
            "home",
            None,
            "failed" if problems else "ok",
            f"home {config.paths.home}: " + ("; ".join(problems) if problems else ", ".join(facts)),
            now_iso(),
            runbook="file-permissions" if problems else None,
        )
    )
    for key in live_checks.keys(config):
        ws = key["workspace"]
        if key["file"] is None:
            out.append(
                Check(
                    "key-file",
                    ws,
                    "ok",
                    f"key file for {ws}: none configured ({key['secret']}); requests go without a key",
                    now_iso(),
                )
            )
        elif key["ok"]:
            out.append(
                Check(
                    "key-file",
                    ws,
                    "ok",
                    f"key file for {ws}: {key['secret']} {key['file']}: a regular file "
                    "of this user's, mode 600, one key",
                    key["checked_at"],
                )
            )
        else:
            out.append(
                Check(
                    "key-file",
                    ws,
                    "failed",
                    f"key file for {ws}: {key['problem']}",
                    key["checked_at"],
                    runbook="honcho-key-refused",
                )
            )
    partial = live_checks.partial_keys(config)
    if partial:
        out.append(Check("keys", None, "warning", partial, now_iso(), runbook="honcho-key-refused"))
    return out


# --- what is asked at once ------------------------------------------------------------------


def _clock(url: str) -> tuple[str | None, float, float]:
    from bxmem.honcho.client import health  # deferred: command

    before = time.time()
    date = health(url, HONCHO_TIMEOUT_S)
    return date, before, time.time()


def _queue(url: str, workspace: str, key: Key | None) -> dict[str, int]:
    from bxmem.honcho.client import ReadClient  # deferred: command

    with ReadClient(
        url,
        workspace,
        key,
        connect_timeout=HONCHO_TIMEOUT_S,
        read_timeout=HONCHO_TIMEOUT_S,
        ends_by=monotonic() + HONCHO_TIMEOUT_S,
        ends_by_name=None,
    ) as client:
        return client.queue_status()


def _version(url: str) -> str | None:
    from bxmem.honcho.client import server_version  # deferred: command

    return server_version(url, HONCHO_TIMEOUT_S)


def _route(url: str, path: str) -> bool | None:
    from bxmem.honcho.client import has_route  # deferred: command

    return has_route(url, path, HONCHO_TIMEOUT_S)


def unit_names() -> list[str]:
    return [f"bxmem-{job}.{kind}" for job in JOBS for kind in ("timer", "service", "path")] + [
        "bxmem-metrics.timer",
        "bxmem-metrics.service",
    ]


def _jobs(config: Config, keys: dict[str, Key | None]) -> dict:
    jobs: dict = {
        "brokerd": (brokerd.TIMEOUT_S, lambda: live_checks.ask_brokerd(config, live_checks.PROBE_SESSION)),
        "units": (unit_state.TIMEOUT_S, lambda: unit_state.read(unit_names())),
    }
    if config.honcho is None:
        return jobs
    url = config.honcho.url
    jobs["health"] = (HONCHO_TIMEOUT_S, lambda: _clock(url))
    jobs["version"] = (HONCHO_TIMEOUT_S, lambda: _version(url))
    jobs["workspace-chat"] = (HONCHO_TIMEOUT_S, lambda: _route(url, f"/v3/workspaces/{PROBE_WORKSPACE}/chat"))
    jobs["peer-chat"] = (
        HONCHO_TIMEOUT_S,
        lambda: _route(url, f"/v3/workspaces/{PROBE_WORKSPACE}/peers/{PROBE_WORKSPACE}/chat"),
    )
    for name, key in keys.items():
        jobs[f"key:{name}"] = (HONCHO_TIMEOUT_S, lambda name=name, key=key: _queue(url, name, key))
    keyed = [name for name, key in keys.items() if key is not None]
    if keyed:  # does the server ask for a key at all? A keyless read of one workspace's queue says
        jobs["keyless"] = (HONCHO_TIMEOUT_S, lambda: _queue(url, keyed[0], None))
    return jobs


def _brokerd(outcome: tuple[str, object], at: str) -> Check:
    S = brokerd.TIMEOUT_S
    if outcome[0] == "ok":
        return Check("brokerd", None, "ok", "brokerd: answering (a session-state question)", at, S)
    return Check(
        "brokerd", None, "failed", f"brokerd: cannot answer: {problem(outcome, S)}", at, S, "broker-state-unavailable"
    )


def _outbox(config: Config) -> Check:
    from bxmem.commands import sync  # deferred: command

    at = now_iso()
    report = sync.status(config, check=False, prepare=False)  # creates and changes nothing
    pending = sum(ws["pending_turns"] + ws["pending_edits"] for ws in report["workspaces"].values())
    oldest = min(
        (ws for ws in report["workspaces"].values() if ws["oldest_pending"]),
        key=lambda ws: ws["oldest_pending_at"] or "",
        default=None,
    )
    held = sum(g["turns"] + g["edits"] for g in report["held"])
    doubt = sum(len(entry["items"]) for entry in report["in_doubt"])
    data = {
        "pending": pending,
        "failed": len(report["failed"]),
        "held": held,
        "in_doubt": doubt,
        "oldest_pending": oldest and oldest["oldest_pending"],
        "oldest_pending_age_s": oldest and oldest["oldest_pending_age_s"],
    }
    first = f", the oldest {oldest['oldest_pending']} ({oldest['oldest_pending_at']})" if oldest else ""
    line = (
        f"outbox: {pending} item(s) pending{first}; {data['failed']} failed, {held} held, {doubt} in doubt; "
        f"sent {report['sent_items']}, last at {report['last_sent'] or 'never'}"
    )
    verdict = report["verdict"]
    if verdict["state"] == "clear":
        return Check("outbox", None, "ok", line, at, data=data)
    status = "failed" if verdict["state"] == "attention" else "warning"
    return Check(
        "outbox", None, status, f"{line}: bxmem sync: {verdict['line']}", at, runbook=verdict["runbook"], data=data
    )


def run(config: Config, explicit_config=None) -> DoctorResult:
    started, checked_at = time.monotonic(), now_iso()
    _path, named_by = config_source(explicit_config)
    result = DoctorResult(
        str(config.path),
        named_by,
        "local-only" if config.local_only else "honcho",
        config.honcho.url if config.honcho else None,
        checked_at,
    )
    # The keys first (read here, once, by the one reader), then everything outside at once.
    keys: dict[str, Key | None] = {}
    refused: set[str] = set()
    for ws in config.workspaces():
        try:
            keys[ws.name] = read_key(ws)
        except KeyFileInvalid:
            refused.add(ws.name)
    jobs = _jobs(config, keys)
    at = now_iso()
    got: dict = {}
    import threading  # deferred: command

    asker = threading.Thread(target=lambda: got.update(live_checks.parallel(jobs)), daemon=True)
    asker.start()
    result.checks += _local(config, named_by)  # while the questions are out
    outbox = _outbox(config)
    asker.join(BOUND_S + 1.0)
    missing = {name: ("timeout", None) for name in jobs if name not in got}
    got.update(missing)
    if config.honcho is None:
        result.checks.append(
            Check("honcho", None, "not-checked", "Honcho: local-only (no [honcho] section), nothing is sent", None)
        )
    else:
        result.checks += honcho_lines(config, got, at)
        if got["health"][0] == "ok":
            result.checks += keys_and_queues(config, keys, refused, got, at)
        else:
            result.checks.append(
                Check("key", None, "not-checked", "keys on Honcho, its queue: Honcho did not answer", None)
            )
    result.checks.append(_brokerd(got["brokerd"], at))
    result.checks += unit_lines(got["units"], at)
    result.checks.append(outbox)
    result.took_s = time.monotonic() - started
    return result
