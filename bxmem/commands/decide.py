"""`bxmem decide`. Honcho is never asked, so an outage cannot change a decision; brokerd's labels only rise,
so a turn decided late can only move towards untrusted or nowhere (docs/design.md, "Deciding").
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.commands import decide_state
from bxmem.commands.decide_state import RETRY_UNREADABLE_S
from bxmem.commands.jobrun import run_locked
from bxmem.config.loader import Config
from bxmem.errors import ExitCode
from bxmem.log import log, notice, runbook
from bxmem.sources import brokerd
from bxmem.sources import cursor as file_cursor
from bxmem.sources.loopd import (
    FinishedTurn,
    ReadStopped,
    cursor_labels,
    listed_stat,
    new_cursor,
    read_finished_turns,
    session_id_problem,
    session_logs,
)
from bxmem.start.idle import access_fingerprint, ledger_tail, stat_fingerprint, write_summary
from bxmem.store import local_key
from bxmem.store.ledger import Ledger, now_iso
from bxmem.store.ledger_events import DecidedTurn, decided_turn
from bxmem.store.state_json import write_json
from bxmem.trust.rules import LogLabels, TurnFacts, log_labels, route_turn
from bxmem.trust.send_retry import believed

FLUSH_EVERY = 1000
# docs/design.md, "Deciding": a run ends within about 45 s, inside the unit's TimeoutStartSec=60
RUN_BUDGET_S = 40.0
SAVE_EVERY_S = 5.0  # decisions appended and state saved at least this often
# A log untouched this long is dormant: idle runs look at it once a sweep (docs/design.md, "The idle path").
DORMANT_AFTER_S = 3600.0
SWEEP_EVERY_S = 60.0
SCHEMA = "bxmem.decide/1"  # `decide --json` (bxmem/schemas/decide.schema.json)


@dataclass
class DecideReport:
    busy: bool = False
    decided: Counter = field(default_factory=Counter)  # by "role/reason"
    undecided: int = 0
    broker_problem: str | None = None
    skipped_lines: int = 0
    sessions_waiting: int = 0  # sessions with work the run's budget did not reach
    broker_slowest_s: float | None = None
    broker_down_since: str | None = None  # as decide's state records it
    broker_warned: bool = False  # this run logged the start of brokerd's outage (a warning, once an outage)
    logs_unreadable: int = 0  # logs that could not be read (their turns wait)
    logs_warned: bool = False  # this run warned of a log it cannot read (once a log and problem)
    out_of_order_lines: int = 0  # lines naming a turn that had already ended, skipped

    @property
    def degraded(self) -> bool:
        return self.undecided > 0 or self.sessions_waiting > 0 or self.logs_unreadable > 0

    def notice(self) -> str | None:
        return "another decide is running; this one has nothing to do" if self.busy else None

    def as_json(self, config: Config) -> dict:  # scripts get an object in every case
        return {
            "schema": SCHEMA,
            "busy": self.busy,
            "decided": dict(sorted(self.decided.items())),
            "undecided": self.undecided,
            "broker_problem": self.broker_problem,
            "broker_unavailable_since": self.broker_down_since,
            "skipped_lines": self.skipped_lines,
            "sessions_waiting": self.sessions_waiting,
            "broker_slowest_s": self.broker_slowest_s,
            "local_only": config.local_only,
            "why_degraded": self.why(),
            "logs_unreadable": self.logs_unreadable,
            "out_of_order_lines": self.out_of_order_lines,
        }

    def why(self) -> list[str]:
        """Why the run exits 3, one line per reason (none when it does not)."""
        out = []
        if self.undecided:
            since = f" since {self.broker_down_since}" if self.broker_down_since else ""
            out.append(
                f"{self.undecided} turn(s) wait undecided: brokerd cannot answer{since}: {self.broker_problem}"
                + runbook("broker-state-unavailable")
            )
        if self.sessions_waiting:
            out.append(
                f"decide's {RUN_BUDGET_S:g} s budget is spent; {self.sessions_waiting} session(s) wait for the "
                "next run" + runbook("broker-state-unavailable")
            )
        if self.logs_unreadable:
            out.append(f"{self.logs_unreadable} log(s) cannot be read: their turns wait" + runbook("log-unreadable"))
        return out

    def summary(self, config: Config) -> list[str]:
        """The run's lines (info: a run by hand, or with -v, says why it exits 3; the journal hears of brokerd's
        outage once)."""
        if self.busy:
            return []
        why = self.why()[1:] if self.broker_warned and self.undecided else self.why()  # the warning said it
        why = why[:-1] if self.logs_warned and self.logs_unreadable else why  # (the logs' line is the last)
        if not self.decided:
            return why
        by_role: dict[str, int] = {}
        for key, count in self.decided.items():
            role = key.split("/")[0]
            by_role[role] = by_role.get(role, 0) + count
        parts = ", ".join(
            f"{by_role[r]} {r if r != 'none' else 'nowhere'}" for r in ("trusted", "untrusted", "none") if r in by_role
        )
        return [
            f"decided {sum(by_role.values())} turn(s): {parts}"
            + ("; local-only, nothing will be sent" if config.local_only else ""),
            *why,
        ]

    @property
    def exit_code(self) -> int:
        return ExitCode.DEGRADED if self.degraded and not self.busy else ExitCode.OK


def _decision(turn: dict, broker: brokerd.SessionState, cursor: dict, config: Config) -> DecidedTurn:
    at_end = LogLabels(turn["untrusted_by_log"], turn["log_class"], turn["log_unreadable"])
    labels = log_labels(at_end, cursor_labels(cursor), turn["late"])
    facts = TurnFacts(
        status=turn["status"],
        has_text=turn["has_text"],
        has_reply=turn["reply"] is not None,
        speaker=turn["speaker"],
        log_unreadable=labels.unreadable is not None,
        untrusted_by_log=labels.untrusted,
        log_class=labels.trust_class,
        untrusted_by_broker=broker.untrusted,
        broker_class=broker.trust_class,
        secret_in_text=turn["secret"] is not None,
    )
    agent, owner = (config.honcho.agent, config.honcho.owner) if config.honcho else ("", None)
    route = route_turn(facts, agent, owner)
    untrusted_by = [name for name, flag in (("brokerd", broker.untrusted), ("log", facts.untrusted_by_log)) if flag]
    return decided_turn(
        session=turn["session"],
        turn=turn["turn"],
        role=route.role,
        ws=config.workspace(route.role).name if route.role and config.honcho else None,
        reason=route.reason if not (route.role and config.local_only) else f"{route.reason}; local-only",
        peer=route.peer,
        trust_class=route.session_class,
        untrusted_by=untrusted_by,
        secret_rule=turn["secret"],
        log=f"{turn['session']}.jsonl",
        user=turn["user"],
        reply=turn["reply"],
        at=turn["ts"],
        macs=turn["macs"],
        unreadable=labels.unreadable,
    )


def run(
    config: Config,
    broker_timeout: float = brokerd.TIMEOUT_S,
    progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    index_progress=None,
) -> DecideReport:
    report = DecideReport()
    paths = config.paths
    deadline = clock() + RUN_BUDGET_S
    modified: dict[str, float] = {}

    def load(state_dir: Path, ledger: Ledger) -> dict:
        state = decide_state.load(state_dir)
        decide_state.recover(state, ledger)
        return state

    def work(state: dict, ledger: Ledger) -> None:
        state_dir = paths.state
        secret = local_key.load(state_dir)
        parked = state["undecided"]  # session -> turns waiting for brokerd; kept in the state until decided
        buffer: dict[str, list[DecidedTurn]] = {}  # per session, in the log's order
        questions: list[float] = []
        last_save = clock()

        def flush(*, save: bool = False) -> None:
            nonlocal last_save
            if buffer:
                # Oldest first across sessions, each session in its own order (the merge never reorders one list).
                lines = list(heapq.merge(*buffer.values(), key=lambda e: e["at"] or ""))
                decide_state.learnt(state, ledger, ledger.append(lines))
                buffer.clear()
            if save:  # every decision made so far is in the ledger: the state may say so
                write_json(
                    paths.ensure_state_dir() / decide_state.STATE_FILE, state
                )  # the folder may be deleted meanwhile
                last_save = clock()

        def decide_session(session: str, turns: list[dict]) -> None:
            cursor = state["logs"].setdefault(session, new_cursor())
            asked = clock()
            try:
                broker = brokerd.session_state(paths.broker_socket, session, broker_timeout)
            except brokerd.BrokerUnavailable as exc:
                report.broker_problem = str(exc)
                parked[session] = turns
                report.undecided += len(turns)
                return
            finally:
                questions.append(clock() - asked)
            parked.pop(session, None)
            for turn in turns:
                if not decide_state.add_turn(cursor["decided"], turn["turn"]):
                    continue  # two ends of one turn in the log: the first one decided it
                decided = _decision(turn, broker, cursor, config)
                report.decided[f"{decided['role'] or 'none'}/{decided['reason']}"] += 1
                buffer.setdefault(session, []).append(decided)

        for session, turns in _sessions(config, state, report, progress, modified, secret, deadline, clock):
            decide_session(session, turns)
            # A long backlog, or a slow brokerd: what is decided is kept as the run goes.
            if clock() - last_save >= SAVE_EVERY_S:
                flush(save=True)
            elif sum(len(b) for b in buffer.values()) >= FLUSH_EVERY:
                flush()
        flush()
        if questions:
            report.broker_slowest_s = round(max(questions), 3)
        state["last_run"] = {
            "at": now_iso(),
            "budget_s": RUN_BUDGET_S,
            "sessions_waiting": report.sessions_waiting,
            "broker_questions": len(questions),
            "broker_slowest_s": report.broker_slowest_s,
        }
        _note_broker(state, report)

    def save(state_dir: Path, state: dict) -> None:
        write_json(state_dir / decide_state.STATE_FILE, state)
        _write_idle_summary(
            config, state, state_dir, modified, again=report.sessions_waiting > 0, exit_code=report.exit_code
        )

    return run_locked(config, "decide", report, load, work, save, index_progress=index_progress)


def _write_idle_summary(
    config: Config, state: dict, state_dir: Path, modified: dict[str, float], again: bool, exit_code: int = 0
) -> None:
    """Logs written to in the last DORMANT_AFTER_S are compared on every idle run, the others once a sweep; a new log
    changes the folder, which is always compared."""
    logs = config.paths.logs
    watch: dict[str, tuple[str, object]] = {
        str(logs): ("stat", stat_fingerprint(logs)),
        # a ledger copied back or sorted in place: decide reads it again
        str(config.paths.ledger): ("tail", ledger_tail(config.paths.ledger, state["ledger_size"])),
    }
    dormant: dict[str, tuple[str, list]] = {}  # ("written", [inode, offset, mtime])
    quiet_since = time.time() - DORMANT_AFTER_S
    wake = 0.0 if state["undecided"] or again else None
    for stem, cursor in state["logs"].items():
        if cursor.get("ignored") or cursor.get("gone"):
            continue
        path = str(logs / f"{stem}.jsonl")
        error = cursor.get("error")
        if error is not None:  # not by its size, which loopd may grow every second: by its mode and owner, and a retry
            watch[path] = ("access", error["access"])
            retry_at = believed(error["retry_at"], time.time(), RETRY_UNREADABLE_S) or 0.0
            wake = retry_at if wake is None else min(wake, retry_at)
        elif (version := file_cursor.version(cursor)) is not None:  # None: never read yet
            active = modified.get(stem, float("inf")) > quiet_since  # not seen this run: treat as active
            (watch if active else dormant)[path] = ("written", version)
    write_summary(state_dir, "decide", config, watch, wake, dormant, SWEEP_EVERY_S, exit_code)


def _sessions(
    config: Config,
    state: dict,
    report: DecideReport,
    progress,
    modified: dict[str, float],
    secret: bytes | None,
    deadline: float,
    clock: Callable[[], float],
) -> Iterator[tuple[str, list[dict]]]:
    """(session, its turns to decide now: those waiting for brokerd, then those
    newly finished) for each session with either, in name order starting where
    the last run stopped; `modified` gets each log's mtime. Once the deadline
    has passed no further session is started: the rest wait, counted."""
    todo = _logs_to_read(config, state, modified, report)
    names = sorted(set(todo) | set(state["undecided"]))
    resume = state.get("resume_at")
    if resume is not None:
        first = next((i for i, name in enumerate(names) if name >= resume), 0)
        names = names[first:] + names[:first]
    state["resume_at"] = None
    total, done = sum(size for _path, _cursor, size in todo.values()), 0

    def warn(message: str) -> None:
        report.skipped_lines += 1
        log.warning(message)

    def read(path: Path, cursor: dict) -> list[FinishedTurn]:
        before = cursor.get("out_of_order", 0)
        try:
            finished, problem = read_finished_turns(path, cursor, warn, secret, deadline, note=log.warning), None
        except ReadStopped as stop:  # the turns that ended before the error are kept
            finished, problem = stop.finished, f"cannot read on: {stop.why}"
        except OSError as exc:
            finished, problem = [], f"cannot read: {exc.strerror or type(exc).__name__}"
        report.out_of_order_lines += cursor.get("out_of_order", 0) - before
        _note_read(path, cursor, problem, report)
        return finished

    for index, session in enumerate(names):
        if clock() > deadline:
            state["resume_at"] = session
            report.sessions_waiting = len(names) - index  # the run's summary says so (DecideReport.why)
            return
        turns = [{**t, "late": True} for t in state["undecided"].get(session, [])]
        if session in todo:
            path, cursor, size = todo[session]
            if progress:
                progress(done, total)
            done += size
            finished = read(path, cursor)
            turns += [
                {**vars(t), "late": False} for t in finished if not decide_state.has_turn(cursor["decided"], t.turn)
            ]
        if turns:
            yield session, turns


def _note_read(path: Path, cursor: dict, problem: str | None, report: DecideReport) -> None:
    """Keep in the cursor that a log cannot be read (said once, then tried again
    every RETRY_UNREADABLE_S), or that it can be again."""
    error = cursor.get("error")
    if problem is None:
        if error is not None:
            notice(f"{path} can be read again (not since {error['since']})")
            del cursor["error"]
        return
    report.logs_unreadable += 1
    if error is None or error["why"] != problem:
        report.logs_warned = True
        log.warning(
            f"{path}: {problem}; its turns wait, and it is tried again every {RETRY_UNREADABLE_S:g} s "
            "or as soon as its mode or owner changes" + runbook("log-unreadable")
        )
        since = now_iso()
    else:
        log.info(f"{path}: still {problem}")
        since = error["since"]
    cursor["error"] = {
        "why": problem,
        "since": since,
        "retry_at": time.time() + RETRY_UNREADABLE_S,
        "access": access_fingerprint(path),
    }


def _waits_to_retry(path: str, cursor: dict) -> bool:
    """A log that could not be read, not yet due to be tried again and not changed in mode or owner."""
    error = cursor.get("error")
    # A retry time further off than the wait (written under a clock since set back) is due now.
    return (
        error is not None
        and believed(error["retry_at"], time.time(), RETRY_UNREADABLE_S) is not None
        and access_fingerprint(path) == error["access"]
    )


def _logs_to_read(
    config: Config, state: dict, modified: dict[str, float], report: DecideReport
) -> dict[str, tuple[Path, dict, int]]:
    """session -> (its log, its cursor, new bytes) for each log with new bytes."""
    logs_dir = config.paths.logs
    try:
        entries = session_logs(logs_dir)
    except FileNotFoundError:
        if not state.get("logs_missing"):
            log.warning(f"no logs folder at {logs_dir}: nothing to decide until loopd writes one")
            state["logs_missing"] = True
        return {}
    state["logs_missing"] = False
    present = {stem for stem, _entry in entries}
    for stem, cursor in state["logs"].items():
        cursor["gone"] = stem not in present  # kept, so a log that comes back is not decided twice
    todo = {}
    for stem, entry in entries:  # a log that is not a regular file is read, and refused by name (open_regular)
        cursor = state["logs"].get(stem)
        if cursor is None:
            cursor = state["logs"][stem] = new_cursor()
            problem = session_id_problem(stem)
            if problem:
                log.warning(f"{entry.path}: ignored: {problem}")
                cursor["ignored"] = problem
        if cursor.get("ignored"):
            continue
        if _waits_to_retry(entry.path, cursor):
            report.logs_unreadable += 1
            continue
        st = listed_stat(entry)
        if st is None:  # removed since the folder was listed
            continue
        modified[stem] = st.st_mtime
        if [st.st_ino, st.st_size, st.st_mtime_ns] == file_cursor.version(cursor) and not cursor.get("error"):
            continue
        todo[stem] = (Path(entry.path), cursor, max(0, st.st_size - cursor["offset"]))
    return todo


def _note_broker(state: dict, report: DecideReport) -> None:
    if report.broker_problem:
        if state["broker_down_since"] is None:
            state["broker_down_since"] = now_iso()
            report.broker_warned = True
            log.warning(
                f"brokerd cannot answer: {report.broker_problem}; {report.undecided} turn(s) wait undecided"
                + runbook("broker-state-unavailable")
            )
    elif state["broker_down_since"] is not None and not state["undecided"]:
        notice(f"brokerd answers again (unavailable since {state['broker_down_since']}); waiting turns decided")
        state["broker_down_since"] = None
    report.broker_down_since = state["broker_down_since"]
