"""`bxmem decide`: where each finished turn goes, recorded at once.

Reads only the new bytes of each session log, asks brokerd once per session
with finished turns, decides by `rules.route_turn` and appends every decision
to the ledger in one fsynced write before moving its cursors. A Honcho outage
cannot change a decision, because Honcho is never asked.

If brokerd cannot answer, the session's turns wait undecided in decide's
state and are decided on a later run from the state then. brokerd's labels
only ever rise (untrusted is sticky, class only goes up) and the log's flags
are taken as of the later run too, so a late decision can only move a turn
towards untrusted or nowhere.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .config import Config
from .errors import ExitCode
from .jobrun import run_locked
from .ledger import Ledger, now_iso
from .ledger_events import TURN, DecidedTurn, decided_turn, is_decided
from .log import log, notice, runbook
from .rules import TurnFacts, log_labels, route_turn
from .sources import brokerd
from .sources.loopd import FinishedTurn, new_cursor, read_finished_turns, session_id_problem
from .store import read_json, write_json

STATE_FILE = "decide.json"
FLUSH_EVERY = 1000
# A log untouched this long is dormant: idle runs look at it once a sweep
# interval, so a session that wakes after an hour is decided within a minute
# (or within a second with systemd/bxmem-decide.path) instead of five seconds.
DORMANT_AFTER_S = 3600.0
SWEEP_EVERY_S = 60.0


@dataclass
class DecideReport:
    busy: bool = False
    decided: Counter = field(default_factory=Counter)  # by "role/reason"
    undecided: int = 0
    broker_problem: str | None = None
    skipped_lines: int = 0

    @property
    def degraded(self) -> bool:
        return self.undecided > 0

    # What the command prints (jobs.finish writes it): the report knows its own output.
    def notice(self) -> str | None:
        return "another decide is running; this one has nothing to do" if self.busy else None

    def as_json(self, config: Config) -> dict:  # scripts get an object in every case
        return {"busy": self.busy, "decided": dict(sorted(self.decided.items())), "undecided": self.undecided,
                "broker_problem": self.broker_problem, "skipped_lines": self.skipped_lines, "local_only": config.local_only}

    def summary(self, config: Config) -> str | None:
        if self.busy or not self.decided:
            return None
        by_role: dict[str, int] = {}
        for key, count in self.decided.items():
            role = key.split("/")[0]
            by_role[role] = by_role.get(role, 0) + count
        parts = ", ".join(f"{by_role[r]} {r if r != 'none' else 'nowhere'}" for r in ("trusted", "untrusted", "none") if r in by_role)
        return f"decided {sum(by_role.values())} turn(s): {parts}" + ("; local-only, nothing will be sent" if config.local_only else "")

    @property
    def exit_code(self) -> int:
        return ExitCode.DEGRADED if self.degraded and not self.busy else ExitCode.OK


def _fresh_state() -> dict:
    return {"ledger_size": 0, "logs": {}, "undecided": {}, "broker_down_since": None, "logs_missing": False}


def _recover(state: dict, ledger: Ledger) -> None:
    """Learn what an earlier run appended but did not get to record in its state
    (a crash between the ledger append and the state write, or a lost state file)."""
    if ledger.size() <= state["ledger_size"]:
        return
    from .ledger import ReadResult

    for ev in ledger.iter_from(state["ledger_size"], ReadResult()):
        if not is_decided(ev, TURN):
            continue
        session, turn = ev.get("session"), ev.get("turn")
        if isinstance(session, str) and isinstance(turn, int):
            # A lost state file starts from ledger offset 0: every decided turn is learnt here.
            cursor = state["logs"].setdefault(session, new_cursor())
            cursor["seen"] = max(cursor["seen"], turn)
        waiting = state["undecided"].get(session)
        if waiting:
            state["undecided"][session] = [t for t in waiting if t["turn"] != turn]
            if not state["undecided"][session]:
                del state["undecided"][session]


def _decision(turn: dict, broker: brokerd.SessionState, cursor: dict, config: Config, late: bool) -> DecidedTurn:
    untrusted_by_log, log_class = log_labels(turn["untrusted_by_log"], turn["log_class"], cursor["untrusted"], cursor["class"], late)
    facts = TurnFacts(
        status=turn["status"],
        has_text=turn["has_text"],
        has_reply=turn["reply"] is not None,
        speaker=turn["speaker"],
        untrusted_by_log=untrusted_by_log,
        log_class=log_class,
        untrusted_by_broker=broker.untrusted,
        broker_class=broker.klass,
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
        klass=route.session_class,
        untrusted_by=untrusted_by,
        secret_rule=turn["secret"],
        log=f"{turn['session']}.jsonl",
        user=turn["user"],
        reply=turn["reply"],
        at=turn["ts"],
    )


def run(config: Config, broker_timeout: float = brokerd.TIMEOUT_S, progress: Callable[[int, int], None] | None = None) -> DecideReport:
    report = DecideReport()
    paths = config.paths

    def load(state_dir: Path, ledger: Ledger) -> dict:
        state = read_json(state_dir / STATE_FILE) or _fresh_state()
        _recover(state, ledger)
        return state

    def work(state: dict, ledger: Ledger) -> None:
        parked = state["undecided"]
        state["undecided"] = {}
        buffer: list[DecidedTurn] = []

        def flush() -> None:
            if buffer:
                buffer.sort(key=lambda e: (e["at"] or "", e["session"], e["turn"]))
                state["ledger_size"] = ledger.append(buffer)
                buffer.clear()

        def decide_session(session: str, turns: list[dict]) -> None:
            cursor = state["logs"].setdefault(session, new_cursor())
            try:
                broker = brokerd.session_state(paths.broker_socket, session, broker_timeout)
            except brokerd.BrokerUnavailable as exc:
                report.broker_problem = str(exc)
                state["undecided"][session] = turns
                report.undecided += len(turns)
                return
            for turn in turns:
                decided = _decision(turn, broker, cursor, config, late=turn["late"])
                report.decided[f"{decided['role'] or 'none'}/{decided['reason']}"] += 1
                buffer.append(decided)
            if len(buffer) >= FLUSH_EVERY:
                flush()  # a long backlog is decided in chunks: memory stays flat

        for session, turns in _read_logs(config, state, report, progress, modified):
            waited = [{**t, "late": True} for t in parked.pop(session, [])]
            decide_session(session, waited + [{**vars(t), "late": False} for t in turns])
        for session, waited in parked.items():
            decide_session(session, [{**t, "late": True} for t in waited])
        flush()
        _note_broker(state, report)

    def save(state_dir: Path, state: dict) -> None:
        write_json(state_dir / STATE_FILE, state)
        _write_idle_summary(config, state, state_dir, modified)

    modified: dict[str, float] = {}
    return run_locked(config, "decide", report, load, work, save)


def _write_idle_summary(config: Config, state: dict, state_dir: Path, modified: dict[str, float]) -> None:
    """Logs written to in the last DORMANT_AFTER_S are compared on every idle run;
    the others, which on a long-lived host are nearly all of them, once a
    minute. A new log changes the folder, which is always compared."""
    from .fastpath import stat_fingerprint, write_summary

    logs = config.paths.logs
    watch: dict[str, tuple[str, object]] = {str(logs): ("stat", stat_fingerprint(logs))}
    dormant: dict[str, tuple[str, list[int]]] = {}  # ("size", [inode, offset])
    quiet_since = time.time() - DORMANT_AFTER_S
    for stem, cursor in state["logs"].items():
        if not cursor.get("ignored") and not cursor.get("gone") and cursor["ino"] is not None:
            active = modified.get(stem, float("inf")) > quiet_since  # not seen this run: treat as active
            (watch if active else dormant)[str(logs / f"{stem}.jsonl")] = ("size", [cursor["ino"], cursor["offset"]])
    write_summary(state_dir, "decide", config, watch, 0.0 if state["undecided"] else None, dormant, SWEEP_EVERY_S)


def _read_logs(config: Config, state: dict, report: DecideReport, progress=None,
               modified: dict[str, float] | None = None) -> Iterator[tuple[str, list[FinishedTurn]]]:
    """(session, its newly finished turns) for each log with new complete lines;
    `modified` gets each log's mtime."""
    logs_dir = config.paths.logs
    try:
        entries = list(os.scandir(logs_dir))
    except FileNotFoundError:
        if not state.get("logs_missing"):
            log.warning(f"no logs folder at {logs_dir}: nothing to decide until loopd writes one")
            state["logs_missing"] = True
        return
    state["logs_missing"] = False
    present = {e.name[: -len(".jsonl")] for e in entries if e.name.endswith(".jsonl")}
    for stem, cursor in state["logs"].items():
        cursor["gone"] = stem not in present  # kept, so a log that comes back is not decided twice

    def warn(message: str) -> None:
        report.skipped_lines += 1
        log.warning(message)

    todo = []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or not entry.is_file():
            continue
        stem = entry.name[: -len(".jsonl")]
        cursor = state["logs"].get(stem)
        if cursor is None:
            cursor = state["logs"][stem] = new_cursor()
            problem = session_id_problem(stem)
            if problem:
                log.warning(f"{entry.path}: ignored: {problem}")
                cursor["ignored"] = problem
        if cursor.get("ignored"):
            continue
        st = entry.stat()
        if modified is not None:
            modified[stem] = st.st_mtime
        if st.st_size == cursor["offset"] and st.st_ino == cursor["ino"]:
            continue
        todo.append((entry, stem, cursor, max(0, st.st_size - cursor["offset"])))
    total = sum(size for *_rest, size in todo)
    done = 0
    for entry, stem, cursor, size in todo:
        if progress:
            progress(done, total)
        done += size
        try:
            turns = read_finished_turns(Path(entry.path), cursor, warn)
        except OSError as exc:
            log.warning(f"{entry.path}: cannot read: {exc.strerror}; will try again")
            continue
        fresh = [turn for turn in turns if turn.turn > cursor["seen"]]
        if fresh:
            cursor["seen"] = max(turn.turn for turn in fresh)
            yield stem, fresh


def _note_broker(state: dict, report: DecideReport) -> None:
    """Log an outage of brokerd once when it starts and once when it ends."""
    if report.broker_problem:
        if state["broker_down_since"] is None:
            state["broker_down_since"] = now_iso()
            log.warning(
                f"brokerd cannot answer: {report.broker_problem}; {report.undecided} turn(s) wait undecided"
                + runbook("broker-state-unavailable")
            )
    elif state["broker_down_since"] is not None and not state["undecided"]:
        notice(f"brokerd answers again (unavailable since {state['broker_down_since']}); waiting turns decided")
        state["broker_down_since"] = None
