"""What `bxmem sync` says of brokerd, Honcho and the key files is what it found when it asked, not what a
job last recorded. A key is judged by config.read_key, so sync's verdict on it is send's, recall's and ask's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from bxmem.commands.decide_state import RETRY_UNREADABLE_S
from bxmem.commands.recall import HONCHO_TIMEOUT_S
from bxmem.config.loader import Config, read_key
from bxmem.errors import ConfigInvalid, cite_runbook
from bxmem.formats.timestamps import format_time, parse_time
from bxmem.honcho.api import HonchoError
from bxmem.sources import brokerd
from bxmem.store.ledger import now_iso
from bxmem.store.outbox import Outbox
from bxmem.trust import printed_fields
from bxmem.trust.send_retry import MAX_DELAY_S

# Asked when no turn is waiting: brokerd answers a session it has not seen as
# private and clean, and the question changes nothing.
PROBE_SESSION = "bxmem-sync-check"


def _result(checked_at: str | None, ok: bool | None, problem: str | None, deadline: float | None) -> dict:
    return {"checked_at": checked_at, "ok": ok, "problem": problem, "deadline_s": deadline}


def not_checked(why: str) -> dict:
    return _result(None, None, f"not checked: {why}", None)


def ask_brokerd(config: Config, session: str) -> None:
    brokerd.session_state(config.paths.broker_socket, session, timeout=brokerd.TIMEOUT_S)


def _ask_honcho(url: str) -> None:
    from bxmem.honcho.client import health  # deferred: command

    health(url, HONCHO_TIMEOUT_S)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, brokerd.BrokerUnavailable):
        return str(exc)
    if isinstance(exc, HonchoError):
        if exc.kind == "timed out":
            return f"no answer within {HONCHO_TIMEOUT_S:g} s"
        return f"/health answered {exc.kind}" if exc.kind.startswith("HTTP ") else f"/health: {exc.kind}"
    return str(exc) or type(exc).__name__


def parallel(jobs: dict[str, tuple[float, Callable[[], object]]]) -> dict[str, tuple[str, object]]:
    """Each job on a daemon thread of its own, all started at once, each with its deadline from that start: name ->
    ("ok", value), ("error", exception) or ("timeout", None). A job that overruns (a DNS lookup has no timeout) is
    reported, not waited for."""
    outcome: dict[str, tuple[str, object]] = {}

    def run(name: str, fn: Callable[[], object]) -> None:
        try:
            outcome[name] = ("ok", fn())
        except Exception as exc:  # reported as the check's problem, never raised
            outcome[name] = ("error", exc)

    started = time.monotonic()
    threads = {name: threading.Thread(target=run, args=(name, fn), daemon=True) for name, (_d, fn) in jobs.items()}
    for thread in threads.values():
        thread.start()
    for name, (deadline, _fn) in jobs.items():
        threads[name].join(max(0.0, started + deadline + 0.5 - time.monotonic()))
    return {name: outcome.get(name, ("timeout", None)) for name in jobs}


def services(config: Config, session: str | None) -> dict[str, dict]:
    jobs: dict[str, tuple[float, Callable[[], object]]] = {
        "brokerd": (brokerd.TIMEOUT_S, lambda: ask_brokerd(config, session or PROBE_SESSION))
    }
    if config.honcho:
        url = config.honcho.url
        jobs["honcho"] = (HONCHO_TIMEOUT_S, lambda: _ask_honcho(url))
    checked_at = now_iso()
    results = {"honcho": not_checked("local-only, no [honcho] section")}
    for name, (how, value) in parallel(jobs).items():
        deadline = jobs[name][0]
        if how == "timeout":
            results[name] = _result(checked_at, False, f"no answer within {deadline:g} s", deadline)
        elif how == "ok":
            results[name] = _result(checked_at, True, None, deadline)
        else:
            assert isinstance(value, BaseException)
            results[name] = _result(checked_at, False, _describe(value), deadline)
    return results


def partial_keys(config: Config) -> str | None:
    """The warning `config check` and `sync` print when some workspaces have keys and others none: a mistake (auth on
    refuses them) or harmless (auth off). Never a refusal."""
    keyless = config.keyless_among_keyed()
    if not keyless:
        return None
    names = ", ".join(f"{ws.name} ([secrets.{ws.secret}])" for ws in keyless)
    return (
        f"keys are configured for some workspaces but not for {names}: every command uses "
        f"{'it' if len(keyless) == 1 else 'them'} without a key, which a Honcho server with auth on refuses "
        "(401); auth is on or off for the whole server, so add the missing keys, or remove the others if auth is off"
    )


def keys(config: Config) -> list[dict]:
    """Every configured key file, read as every command reads it (config.read_key); the key itself is dropped at
    once."""
    out = []
    for ws in config.workspaces():
        entry = {
            "workspace": ws.name,
            "role": ws.role,
            "secret": f"secrets.{ws.secret}",
            "file": str(ws.key_file) if ws.key_file else None,
        }
        if ws.key_file is None:
            out.append({**entry, **_result(None, None, "no key file configured; requests go without a key", None)})
            continue
        checked_at = now_iso()
        try:
            read_key(ws)
            out.append({**entry, **_result(checked_at, True, None, None)})
        except ConfigInvalid as exc:
            out.append({**entry, **_result(checked_at, False, str(exc), None)})
    return out


# A stored time this far ahead of the clock is said (a clock stepped forward then back, or
# behind now): more than the skew between this host's jobs could make.
FUTURE_SLACK_S = 60


def future_times(box: Outbox, decide_state: dict, audit_state: dict | None, now: float) -> list[dict]:
    """The times bxmem stored that lie in the future. Every wait is held to its own bound whatever they say
    (trust/send_retry.py, start/idle.py): this is for the owner, who should fix the clock."""
    stored: list[tuple[str, object]] = []
    if box.backoff:
        stored.append(("the outage's start", box.backoff.get("since")))
        if box.backoff["until"] - now > MAX_DELAY_S:
            stored.append(("the outage's next try", format_time(box.backoff["until"])))
    stored += [
        (f"the attempt of {printed_fields.item(item)}", attempt.get("ts")) for item, attempt in box.attempts.items()
    ]
    stored.append(("the last send", box.last_sent))
    last_run = decide_state.get("last_run") or {}
    stored += [
        ("decide's last run", last_run.get("at")),
        ("brokerd's outage start", decide_state.get("broker_down_since")),
    ]
    for stem, cursor in (decide_state.get("logs") or {}).items():
        error = cursor.get("error")
        if error:
            stored.append((f"{stem}.jsonl unreadable since", error.get("since")))
            if error["retry_at"] - now > RETRY_UNREADABLE_S:
                stored.append((f"{stem}.jsonl's next read", format_time(error["retry_at"])))
    stored.append(("the last audit", (audit_state or {}).get("at")))
    found = []
    for what, ts in stored:
        at = parse_time(ts)
        if at is not None and at > now + FUTURE_SLACK_S:
            found.append({"what": what, "at": printed_fields.date(ts), "ahead_s": round(at - now)})
    return sorted(found, key=lambda f: -f["ahead_s"])


def age(ts: object, now: float) -> float | None:
    at = parse_time(ts)
    return None if at is None or at > now + FUTURE_SLACK_S else max(0.0, now - at)


def future_line(future: list[dict]) -> str:
    first = future[0]
    return (
        f"{len(future)} time(s) bxmem stored lie in the future (the furthest: {first['what']}, {first['at']}, "
        f"{_ahead(first['ahead_s'])} ahead): the clock ran ahead when they were written, or runs behind now; no "
        "wait is held longer than its own bound, but check the system clock" + cite_runbook("clock-wrong")
    )


def named_wrong(config: Config, box: Outbox, nowhere: dict[str, int]) -> list[str]:
    """Turns decided nowhere because the speaker's name reads as the agent's or the owner's,
    the latest since bxmem.toml last changed: an owner written other than as their name
    becomes a peer (`kyle_r` for `kyle.r`) loses every turn so, for good."""
    changed = config.changed_at()
    if changed is None:
        return []
    out = []
    for reason, ts in sorted(box.named_wrong.items()):
        at = parse_time(ts)
        if at is not None and at > changed:
            out.append(
                f"{nowhere.get(reason, 0)} turn(s) decided nowhere as {reason}, the latest at {printed_fields.date(ts)}: "
                f"if that speaker is the owner ({config.honcho.owner if config.honcho else '-'}), [honcho] owner "
                "is not written as their name becomes a peer (a `.` is written `_Dot_`)" + cite_runbook("owner-name")
            )
    return out


def _ahead(seconds: float) -> str:
    return (
        f"{seconds / 86400:.1f} days"
        if seconds >= 172800
        else f"{seconds / 3600:.1f} h"
        if seconds >= 7200
        else f"{seconds / 60:.0f} min"
        if seconds >= 120
        else f"{seconds:.0f} s"
    )
