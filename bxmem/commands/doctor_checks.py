"""One line of `bxmem doctor` (Check), and the lines made from what Honcho and systemd answered."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from bxmem.commands.recall import HONCHO_TIMEOUT_S
from bxmem.config.loader import Config, Key
from bxmem.errors import ExitCode, cite_runbook
from bxmem.honcho.api import BadAnswer, HonchoError, KeyRefused
from bxmem.sources import unit_state
from bxmem.trust import printed_fields

# Clocks further apart than this get a failed line (runbook clock-off): turns reach
# Honcho with their times from loopd's logs, so the fleet's order and recall's dates
# are off by as much. The Date header has whole seconds; a minute leaves no doubt.
CLOCK_OFF_S = 60.0
JOBS = ("decide", "mirror", "send")  # the timer jobs whose units doctor needs; metrics' are optional
ENABLED = ("enabled", "enabled-runtime", "linked", "linked-runtime", "alias")


@dataclass
class Check:
    check: str  # what kind of check: config, home, key-file, honcho, clock, ...
    subject: str | None  # the workspace or job it was about, or None
    status: str  # ok, warning, failed, not-checked
    line: str  # what was checked and what was found
    checked_at: str | None
    deadline_s: float | None = None
    runbook: str | None = None
    data: dict = field(default_factory=dict)  # the figures the line gives, for scripts

    def as_json(self) -> dict:
        return dict(self.__dict__)

    def text(self) -> str:
        word = "not checked" if self.status == "not-checked" else self.status
        when = (
            ""
            if self.checked_at is None
            else f" (checked {self.checked_at}" + (f", {self.deadline_s:g} s deadline)" if self.deadline_s else ")")
        )
        cite = cite_runbook(self.runbook) if self.runbook and self.status in ("failed", "warning") else ""
        return f"{word}: {self.line}{when}{cite}"


def problem(outcome: tuple[str, object], deadline: float) -> str:
    how, value = outcome
    if how == "timeout":
        return f"no answer within {deadline:g} s"
    if isinstance(value, HonchoError):
        if value.kind == "timed out":
            return f"no answer within {deadline:g} s"
        return f"{value.operation}: {value.kind}"
    return str(value) or type(value).__name__


def honcho_lines(config: Config, got: dict, at: str) -> list[Check]:
    assert config.honcho is not None
    S = HONCHO_TIMEOUT_S
    url = config.honcho.url
    out = []
    how, value = got["health"]
    if how != "ok":
        why = problem(got["health"], S)
        out.append(
            Check("honcho", None, "failed", f"Honcho at {url}: not answering: {why}", at, S, "honcho-unreachable")
        )
        out.append(Check("clock", None, "not-checked", "clock against Honcho's: Honcho did not answer", None))
        return out
    out.append(Check("honcho", None, "ok", f"Honcho at {url}: answering (/health ok)", at, S))
    out.append(_clock_check(value, at))
    how, value = got["version"]
    if how == "ok":
        version = printed_fields.token(value) if value else None
        out.append(
            Check(
                "version",
                None,
                "ok",
                f"Honcho's version: {version}" if version else "Honcho's version: not published (no /openapi.json)",
                at,
                S,
                data={"version": version},
            )
        )
    else:
        out.append(Check("version", None, "not-checked", f"Honcho's version: {problem(got['version'], S)}", at, S))
    out.append(_chat_check(got, at))
    return out


def _clock_check(found: tuple[str | None, float, float], at: str) -> Check:
    date, before, after = found
    try:
        server = parsedate_to_datetime(date).timestamp() if date else None
    except (TypeError, ValueError):
        server = None
    if server is None:
        return Check(
            "clock",
            None,
            "not-checked",
            "clock against Honcho's: its /health answer has "
            + ("no Date header" if not date else "a Date header that is not a date"),
            at,
        )
    # Date has whole seconds: the server's clock was within [server, server + 1) when it answered.
    offset = (before + after) / 2 - (server + 0.5)
    give = 0.5 + (after - before) / 2
    data = {"offset_s": round(offset, 3), "uncertainty_s": round(give, 3), "limit_s": CLOCK_OFF_S}
    ahead = "ahead of" if offset > 0 else "behind"
    if abs(offset) >= CLOCK_OFF_S:
        return Check(
            "clock",
            None,
            "failed",
            f"clock against Honcho's: this host's is {abs(offset):.0f} s {ahead} "
            f"Honcho's (its Date header; {CLOCK_OFF_S:g} s allowed)",
            at,
            runbook="clock-off",
            data=data,
        )
    return Check(
        "clock",
        None,
        "ok",
        f"clock against Honcho's: within {max(abs(offset), give):.0f} s (its Date header; {CLOCK_OFF_S:g} s allowed)",
        at,
        data=data,
    )


def _chat_check(got: dict, at: str) -> Check:
    S = HONCHO_TIMEOUT_S
    found = {name: got[name][1] if got[name][0] == "ok" else None for name in ("workspace-chat", "peer-chat")}
    data = {"workspace_chat": found["workspace-chat"], "peer_chat": found["peer-chat"]}
    if found["workspace-chat"]:
        return Check(
            "chat", None, "ok", "Honcho's chat: workspace chat (ask asks each workspace whole)", at, S, data=data
        )
    if found["peer-chat"]:
        return Check(
            "chat",
            None,
            "ok",
            "Honcho's chat: peer chat only, no workspace chat (ask asks the peers "
            "whose memory is there, as docs/decisions.md says)",
            at,
            S,
            data=data,
        )
    if found["workspace-chat"] is False and found["peer-chat"] is False:
        return Check(
            "chat",
            None,
            "failed",
            "Honcho's chat: neither workspace chat nor peer chat: bxmem ask cannot work with this server",
            at,
            S,
            "honcho-version",
            data=data,
        )
    problems = [
        f"{name}: {problem(got[name], S) if got[name][0] != 'ok' else 'cannot tell (a 404 of another shape)'}"
        for name in ("workspace-chat", "peer-chat")
    ]
    return Check("chat", None, "not-checked", "Honcho's chat: " + "; ".join(problems), at, S, data=data)


def _jwt_workspace(key: Key) -> str | None:
    """The workspace a Honcho key (a JWT) was minted for, read from its claims without
    checking its signature (only the server can); None when it names none or is no JWT."""
    parts = key.reveal().split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):
        return None
    found = claims.get("w") if isinstance(claims, dict) else None
    return found if isinstance(found, str) else None


def keys_and_queues(config: Config, keys: dict[str, Key | None], refused: set[str], got: dict, at: str) -> list[Check]:
    S = HONCHO_TIMEOUT_S
    auth_off = got.get("keyless", ("", None))[0] == "ok"
    out = []
    if "keyless" in got:
        how, value = got["keyless"]
        if how == "ok":
            out.append(
                Check(
                    "auth",
                    None,
                    "warning",
                    "Honcho's auth: off: it answered a request without a key, so it "
                    "takes any key, and a wrong one is not caught here",
                    at,
                    S,
                    "honcho-auth-off",
                )
            )
        elif isinstance(value, KeyRefused):
            out.append(Check("auth", None, "ok", "Honcho's auth: on (a request without a key is refused)", at, S))
        else:
            out.append(Check("auth", None, "not-checked", f"Honcho's auth: {problem(got['keyless'], S)}", at, S))
    queues = []
    for ws in config.workspaces():
        name = ws.name
        if name in refused:
            out.append(
                Check(
                    "key",
                    name,
                    "not-checked",
                    f"key for {name} on Honcho: not tried: bxmem refuses its key file (above)",
                    None,
                )
            )
            continue
        how, value = got[f"key:{name}"]
        key = keys[name]
        what = f"key for {name}" if key is not None else f"no key for {name}"
        if (
            how == "ok"
            or isinstance(value, BadAnswer)
            or (isinstance(value, HonchoError) and value.status is not None and 200 <= value.status < 300)
        ):
            note = " (auth is off: any key would be)" if auth_off and key is not None else ""
            out.append(
                Check(
                    "key",
                    name,
                    "ok",
                    f"{what} on Honcho: accepted (a read of its queue){note}"
                    if key is not None
                    else f"{what}: Honcho answered without one (auth off)",
                    at,
                    S,
                )
            )
            if not ws.role.startswith("read:"):
                queues.append(_queue_check(name, got[f"key:{name}"], at))
        elif isinstance(value, KeyRefused):
            if key is None:
                line = (
                    f"{what}: Honcho refuses requests without one (HTTP {value.status}): its auth is on; "
                    f"give {name} a key file ([secrets.{ws.secret}])"
                )
            else:
                minted = _jwt_workspace(key)
                hint = (
                    f": the key was minted for workspace {printed_fields.token(minted)}"
                    if minted and minted != name
                    else ": the key is wrong or expired"
                )
                line = f"{what} on Honcho: refused (HTTP {value.status}){hint}"
            out.append(Check("key", name, "failed", line, at, S, "honcho-key-refused"))
        else:
            out.append(Check("key", name, "not-checked", f"{what} on Honcho: {problem(got[f'key:{name}'], S)}", at, S))
    return out + queues


def _queue_check(name: str, outcome: tuple[str, object], at: str) -> Check:
    how, value = outcome
    if how != "ok":  # the key passed (a 2xx) but the answer could not be used
        why = value.kind if isinstance(value, (BadAnswer, HonchoError)) else str(value)
        return Check("queue", name, "not-checked", f"Honcho's queue for {name}: not read: {why}", at, HONCHO_TIMEOUT_S)
    assert isinstance(value, dict)
    idle = (
        " (none in progress: Honcho's deriver works them when it runs)"
        if value["pending"] and not value["in_progress"]
        else ""
    )
    return Check(
        "queue",
        name,
        "ok",
        f"Honcho's queue for {name}: {value['pending']} pending, {value['in_progress']} "
        f"in progress, {value['completed']} completed since Honcho's last cleanup (its derivation work: what "
        f"makes sent turns memory){idle}",
        at,
        HONCHO_TIMEOUT_S,
        data=dict(value),
    )


def unit_lines(outcome: tuple[str, object], at: str) -> list[Check]:
    if outcome[0] != "ok":
        return [Check("units", None, "not-checked", f"units: {problem(outcome, unit_state.TIMEOUT_S)}", at)]
    found = outcome[1]
    assert isinstance(found, unit_state.Managers)
    if found.systemctl is None:
        return [Check("units", None, "not-checked", "units: systemctl is not on PATH", at)]
    if not found.units:
        return [Check("units", None, "not-checked", "units: " + "; ".join(found.unreached.values()), at)]
    return [_unit_check(job, found, at) for job in (*JOBS, "metrics")]


def _unit_check(job: str, found: unit_state.Managers, at: str) -> Check:
    timer_name, service_name = f"bxmem-{job}.timer", f"bxmem-{job}.service"
    installed = [m for m, units in found.units.items() if units.get(timer_name, {}).get("LoadState") == "loaded"]
    unreached = "; ".join(found.unreached.values())
    if not installed:
        if job == "metrics":
            return Check(
                "units",
                job,
                "ok",
                f"units of {job}: {timer_name} not installed (optional: bxmem metrics "
                "for node_exporter)" + (f"; {unreached}" if unreached else ""),
                at,
            )
        if unreached:
            return Check(
                "units",
                job,
                "not-checked",
                f"units of {job}: {timer_name} not installed for the "
                f"{' or '.join(found.units)} manager; not checked in the other: {unreached}",
                at,
            )
        return Check(
            "units",
            job,
            "failed",
            f"units of {job}: {timer_name} is not installed (user or system manager): nothing runs bxmem {job}",
            at,
            runbook="units-not-running",
        )
    if len(installed) > 1:
        return Check(
            "units",
            job,
            "failed",
            f"units of {job}: {timer_name} is installed for both the user and the "
            "system manager: every run is started twice",
            at,
            runbook="units-not-running",
        )
    manager = installed[0]
    units = found.units[manager]
    timer, service, path = units[timer_name], units.get(service_name, {}), units.get(f"bxmem-{job}.path", {})
    if job == "metrics" and timer.get("UnitFileState") not in ENABLED:
        return Check(
            "units",
            job,
            "ok",
            f"units of {job} ({manager} manager): {timer_name} installed, not enabled "
            "(optional: bxmem metrics for node_exporter)",
            at,
        )
    problems, facts = [], []
    if timer.get("UnitFileState") not in ENABLED:
        problems.append(
            f"{timer_name} is not enabled (UnitFileState={timer.get('UnitFileState') or '-'}): "
            f"systemctl {'--user ' if manager == 'user' else ''}enable --now {timer_name}"
        )
    elif timer.get("ActiveState") != "active":
        problems.append(
            f"{timer_name} is enabled but {timer.get('ActiveState') or 'not active'}: "
            f"systemctl {'--user ' if manager == 'user' else ''}start {timer_name}"
        )
    else:
        facts.append(f"{timer_name} enabled, {timer.get('SubState') or 'active'}")
    status = service.get("ExecMainStatus") or "-"
    ended = service.get("ExecMainExitTimestamp") or ""
    result = service.get("Result") or "-"
    runbook = "units-not-running"
    if result not in ("success", "-"):  # a run that failed before bxmem started has no exit time of its own
        when = f" at {printed_fields.line(ended, 80)}" if ended else ""
        problems.append(
            f"{service_name}'s last run failed{when} (Result={printed_fields.token(result)}, status "
            f"{printed_fields.token(status)}): journalctl {'--user ' if manager == 'user' else ''}-u {service_name}"
        )
        if status == str(ExitCode.CONFIG):
            runbook = "honcho-config-invalid"
    elif service.get("ActiveState") in ("activating", "active", "deactivating", "reloading"):
        # systemd clears the last exit time when a run starts: this one is still going
        facts.append(f"{service_name} running now ({printed_fields.token(service['ActiveState'])})")
    elif not ended:
        facts.append(f"{service_name} not run yet")
    else:
        facts.append(f"last run ended {printed_fields.line(ended, 80)}, status {printed_fields.token(status)}")
    if path.get("LoadState") == "loaded":
        facts.append(
            f"{path['Id']} " + ("enabled" if path.get("UnitFileState") in ENABLED else "not enabled (optional)")
        )
    data = {
        "manager": manager,
        "unit_file_state": timer.get("UnitFileState"),
        "active_state": timer.get("ActiveState"),
        "result": service.get("Result"),
        "exec_main_status": service.get("ExecMainStatus"),
    }
    head = f"units of {job} ({manager} manager): "
    if problems:
        return Check("units", job, "failed", head + "; ".join(problems), at, runbook=runbook, data=data)
    return Check("units", job, "ok", head + "; ".join(facts), at, data=data)
