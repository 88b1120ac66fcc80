"""`bxmem mirror`. Its state is keyed by an HMAC with entry.key, so it reveals no short entry to someone who
guesses it; a state built with another key or another neutralise is rebuilt from the journal and the ledger.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.commands.jobrun import run_locked
from bxmem.config.loader import Config
from bxmem.errors import ExitCode
from bxmem.formats.shapes import anything, boolean, dict_of, integer, list_of, maybe, record, string
from bxmem.log import log, runbook
from bxmem.sources import cursor as file_cursor
from bxmem.sources.journal import Edit, field_of, read_edits, text_spec
from bxmem.sources.loopd import session_id_problem
from bxmem.start.idle import ledger_tail, write_summary
from bxmem.store import local_key
from bxmem.store.ledger import Ledger, ReadResult, edit_item
from bxmem.store.ledger_events import EDIT, DecidedEdit, decided_edit, is_decided
from bxmem.store.ledger_shapes import ACTIONS
from bxmem.store.ledger_shapes import MARK as LEDGER_MARK
from bxmem.store.state_json import load_json, say_unusable, write_json
from bxmem.trust.rules import EditFacts, EditPlan, about_for, plan_edit, plan_undo
from bxmem.trust.sanitize import NEUTRALISE_VERSION, find_secret, neutralise

STATE_FILE = "mirror.json"
SCHEMA = "bxmem.mirror/1"  # `mirror --json` (bxmem/schemas/mirror.schema.json)
KEY_FILE = local_key.KEY_FILE


@dataclass
class MirrorReport:
    busy: bool = False
    decided: Counter = field(default_factory=Counter)  # by "role/reason"
    skipped_lines: int = 0
    events: list[Mapping[str, object]] = field(default_factory=list)  # this run's decided lines

    def notice(self) -> str | None:
        return "another mirror is running; this one has nothing to do" if self.busy else None

    def as_json(self, config: Config) -> dict:  # scripts get an object in every case
        return {
            "schema": SCHEMA,
            "busy": self.busy,
            "decided": dict(sorted(self.decided.items())),
            "skipped_lines": self.skipped_lines,
            "local_only": config.local_only,
        }

    def summary(self, config: Config) -> str | None:
        if self.busy or not self.decided:
            return None
        total = sum(self.decided.values())
        nowhere = sum(n for key, n in self.decided.items() if key.startswith("none/"))
        return f"decided {total} edit(s): {total - nowhere} to Honcho, {nowhere} stay local" + (
            "; local-only, nothing will be sent" if config.local_only else ""
        )

    @property
    def exit_code(self) -> int:
        return ExitCode.OK  # mirror waits on nothing that can be down


def _fresh_state() -> dict:
    return {"ledger_size": 0, "cursor": {"offset": 0, "line": 0, "ino": None}, "live": {}, "refkey": {}, "edits": {}}


def _entry_key(secret: bytes, about: str, text: str) -> str:
    return hmac.new(
        secret, f"{about}\0{neutralise(text)}".encode("utf-8", "surrogatepass"), hashlib.sha256
    ).hexdigest()[:32]


def _key_id(secret: bytes) -> str:
    return local_key.key_id(secret)


# mirror.json as it is written: checked whole on load, and rebuilt if it is of any other shape.
SHAPE = record(
    {
        "ledger_size": integer(0),
        "cursor": record(file_cursor.FIELDS, file_cursor.OPTIONAL),
        "live": dict_of(list_of(string)),
        "refkey": dict_of(string),
        # `role` as the edit's decision recorded it: a damaged one is held by trust/write_policy.py, not here.
        "edits": dict_of(record({"op": string, "role": anything, "actions": ACTIONS}, {"undone": boolean})),
        "key_id": string,
    },
    {"neutralise": integer(1), "ledger_mark": maybe(LEDGER_MARK)},
)


def read_state(state_dir: Path) -> tuple[dict | None, str | None]:
    return load_json(state_dir / STATE_FILE, SHAPE)


def _load_state(state_dir: Path, secret: bytes) -> dict:
    state, why = read_state(state_dir)
    if why is not None:
        say_unusable(state_dir / STATE_FILE, why, "rebuilt from the journal and the ledger")
    if state is not None and state.get("key_id") != _key_id(secret):
        # Its live map is keyed with another secret: every lookup would miss, and a
        # remove would be decided "never mirrored". Rebuilt from the journal and ledger.
        log.info(f"{state_dir / KEY_FILE} is not the one {state_dir / STATE_FILE} was built with; rebuilding it")
        state = None
    elif state is not None and state.get("neutralise", 1) != NEUTRALISE_VERSION:
        # Entries are keyed by their neutralised text: keys made by another
        # version of neutralise miss as surely as keys made with another secret.
        log.info(f"{state_dir / STATE_FILE} was keyed by an earlier neutralise; rebuilding it")
        state = None
    if state is None:
        state = _fresh_state()
        state["key_id"] = _key_id(secret)
        state["neutralise"] = NEUTRALISE_VERSION
    return state


def _secret(state_dir: Path) -> bytes:
    secret = local_key.load(state_dir)
    assert secret is not None  # created when missing
    return secret


class Model:
    """Which conclusion refs are live for which entry, and what each edit did."""

    def __init__(self, state: dict, secret: bytes) -> None:
        self.state = state
        self.secret = secret

    def live_ref(self, about: str, text: str) -> str | None:
        refs = self.state["live"].get(_entry_key(self.secret, about, text))
        return refs[-1] if refs else None

    def apply(self, edit: Edit, plan_actions: list[dict], role: str | None) -> None:
        item = edit_item(edit.id)
        for index, action in enumerate(plan_actions):
            ref = f"{item}#{index}"
            if action["do"] == "conclude":
                text = _field(edit.record, action)
                key = _entry_key(self.secret, action["about"], text) if text is not None else None
                if key:
                    self.state["live"].setdefault(key, []).append(ref)
                    self.state["refkey"][ref] = key
            elif action["do"] == "unconclude":
                key = self.state["refkey"].get(action["of"])
                if key and action["of"] in self.state["live"].get(key, []):
                    self.state["live"][key].remove(action["of"])
            elif action["do"] == "reconclude":
                key = self.state["refkey"].get(action["of"])
                if key:
                    self.state["live"].setdefault(key, []).append(ref)
                    self.state["refkey"][ref] = key
        if edit.op == "undo" and isinstance(edit.record.get("target"), str):
            target = self.state["edits"].get(edit.record["target"])
            if target is not None and target["op"] != "undo":
                target["undone"] = True  # even if it stayed local: a second undo is refused
        self.state["edits"][edit.id] = {"op": edit.op, "role": role, "actions": plan_actions}


def _field(record: dict, action: dict) -> str | None:
    return field_of(record, action.get("text") or action)


def _with_text_specs(edit: Edit, plan: EditPlan, model: Model) -> list[dict]:
    """Each action says where its text is (a journal span and field, and the line's keyed HMAC), so send reads it
    back checked; the ledger never holds the text."""
    actions = []
    for action in plan.actions:
        action = dict(action)
        if action["do"] in ("conclude", "fleet-message"):
            action["text"] = text_spec(
                edit.span,
                action.pop("field"),
                action.pop("index", None),
                mac=edit.mac,
                key=_key_id(model.secret) if edit.mac else None,
            )
        elif action["do"] in ("reconclude", "retract"):
            creator = _action_of(model, action["of"])
            if creator is not None:
                action["text"] = creator.get("text")
                action["about"] = creator.get("about")
        actions.append(action)
    return actions


def _action_of(model: Model, ref: str) -> dict | None:
    item, _, index = ref.rpartition("#")
    record = model.state["edits"].get(item.removeprefix("edit:"))
    if record is None or not index.isdigit() or int(index) >= len(record["actions"]):
        return None
    action = record["actions"][int(index)]
    if action["do"] == "reconclude":  # a conclusion written again: its text is the original's
        return _action_of(model, action["of"])
    return action


def _edit_facts(record: dict, model: Model) -> EditFacts:
    dropped = record.get("dropped")
    about = about_for(record.get("file"))
    live: dict[str, str] = {}
    for text in (record.get("old"), record.get("entry"), *(dropped if isinstance(dropped, list) else [])):
        ref = model.live_ref(about, text) if isinstance(text, str) else None
        if ref is not None:
            live[text] = ref
    entry = record.get("entry")
    if not isinstance(entry, str):
        return EditFacts(live)
    return EditFacts(live, entry_secret=find_secret(entry), entry_chars=len(neutralise(entry)))


SESSIONLESS = "bxmem-journal"  # the Honcho session of what the journal names no session for


def edit_session(edit: Edit, secret: bytes) -> str:
    """The Honcho session an edit's writes go to: the journal's when it is a valid session id; else SESSIONLESS (no
    session), or SESSIONLESS and a keyed hash of one Honcho would refuse, decided here once so send never meets an
    id it cannot use, and the name never reaches the ledger or Honcho."""
    session = edit.session
    if session and session_id_problem(session) is None:
        return session
    if not session:
        return SESSIONLESS
    digest = hashlib.blake2b(
        session.encode("utf-8", "surrogatepass"), digest_size=8, key=secret, person=b"bxmem session"
    )
    log.info(
        f"edit {edit.id}: its session is not a valid Honcho session id; its writes go to the session "
        f"{SESSIONLESS}-{digest.hexdigest()}"
    )
    return f"{SESSIONLESS}-{digest.hexdigest()}"


def _decide_one(edit: Edit, model: Model, config: Config) -> DecidedEdit:
    if edit.op == "undo":
        target_id = edit.record.get("target")
        target = model.state["edits"].get(target_id) if isinstance(target_id, str) else None
        plan = plan_undo(edit_item(str(target_id)), target, bool(target and target.get("undone")))
    else:
        plan = plan_edit(edit.record, _edit_facts(edit.record, model))
    actions = _with_text_specs(edit, plan, model)
    if plan.role is None:
        actions = []
    return decided_edit(
        edit.id,
        op=edit.op,
        session=edit_session(edit, model.secret) if plan.role else edit.session,
        role=plan.role,
        ws=config.workspace(plan.role).name if plan.role and config.honcho else None,
        reason=plan.reason if not (plan.role and config.local_only) else f"{plan.reason}; local-only",
        actions=actions,
        journal_line=edit.line,
        at=edit.record.get("ts") if isinstance(edit.record.get("ts"), str) else None,
        target=edit.record.get("target"),
    )


def _recover(state: dict, ledger: Ledger) -> dict[str, dict]:
    """Edits decided in the ledger after the state's last write, the torn last line too when it is a whole decision.
    A ledger that is not the one the state was learnt from makes the state unusable: the journal is read again,
    and the whole ledger says which edits are decided."""
    changed = ledger.changed(state["ledger_size"], state.get("ledger_mark"))
    if changed is not None:
        log.warning(
            f"{ledger.path} is {changed}; mirror's state is read again from the journal and the ledger"
            + runbook("ledger-rewritten")
        )
        fresh = {**_fresh_state(), "key_id": state["key_id"], "neutralise": NEUTRALISE_VERSION}
        state.clear()
        state.update(fresh)
    if ledger.size() <= state["ledger_size"]:
        return {}

    result = ReadResult()
    found: dict[str, dict] = {}
    for ev in ledger.iter_from(state["ledger_size"], result, tail=True):
        if is_decided(ev, EDIT) and isinstance(ev.get("edit"), str):
            found.setdefault(ev["edit"], ev)  # the first decision stands, as in every fold (store/outbox.py)
    if result.torn_event:
        ledger.close_torn_tail()
    return found


def _learnt(state: dict, ledger: Ledger, size: int) -> None:
    state["ledger_size"] = size
    state["ledger_mark"] = ledger.mark(size)


def run(config: Config, index_progress=None) -> MirrorReport:
    report = MirrorReport()
    already: dict[str, dict] = {}
    secret = b""

    def load(state_dir: Path, ledger: Ledger) -> dict:
        nonlocal secret
        secret = _secret(state_dir)
        state = _load_state(state_dir, secret)
        already.update(_recover(state, ledger))
        return state

    def work(state: dict, ledger: Ledger) -> None:
        model = Model(state, secret)

        def warn(message: str) -> None:
            report.skipped_lines += 1
            log.warning(message)

        for edit in read_edits(config.paths.journal, state["cursor"], warn, secret):
            if edit.id in state["edits"]:
                warn(f"{config.paths.journal}:{edit.line}: edit id {edit.id} was used before; line skipped")
                continue
            decided = already.get(edit.id) or _decide_one(edit, model, config)
            model.apply(edit, decided["actions"], decided["role"])
            if edit.id not in already:
                report.events.append(decided)
                report.decided[f"{decided['role'] or 'none'}/{decided['reason']}"] += 1
                if decided["reason"] in ("undo-target-unknown", "unknown-op"):
                    log.warning(
                        f"{config.paths.journal}:{edit.line}: edit {edit.id}: {decided['reason']}; recorded, nothing mirrored"
                    )
        if report.events:
            _learnt(state, ledger, ledger.append(report.events))
        elif already:
            _learnt(state, ledger, ledger.size())

    def save(state_dir: Path, state: dict) -> None:
        write_json(state_dir / STATE_FILE, state)
        _write_idle_summary(config, state, state_dir)

    return run_locked(config, "mirror", report, load, work, save, index_progress=index_progress)


def _write_idle_summary(config: Config, state: dict, state_dir: Path) -> None:
    version = file_cursor.version(state["cursor"])
    write_summary(
        state_dir,
        "mirror",
        config,
        {
            str(config.paths.journal): ("written", version),
            str(config.paths.ledger): ("tail", ledger_tail(config.paths.ledger, state["ledger_size"])),
        },
        None,
    )
