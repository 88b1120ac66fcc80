"""`bxmem undo EDIT_ID`: the undo appended to memoryd's journal under its lock, then mirrored at once.
Nothing is written when the edit cannot be undone, or with `dry_run`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from bxmem.commands import mirror
from bxmem.config.loader import Config
from bxmem.errors import ExitCode, NotFound, Refused
from bxmem.sources.journal import append_checked, find_edit, find_edit_in
from bxmem.store.ledger import Ledger, edit_item, now_iso
from bxmem.store.outbox import Outbox
from bxmem.trust import printed_fields
from bxmem.trust.rules import plan_undo
from bxmem.trust.write_policy import check_write, roles_of

SCHEMA = "bxmem.undo/1"  # `undo --json` (bxmem/schemas/undo.schema.json)


@dataclass
class UndoResult:
    target: str
    undo_id: str | None
    written: bool
    effects: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "target": self.target,
            "undo_id": self.undo_id,
            "written": self.written,
            "effects": self.effects,
        }

    def lines(self) -> list[str]:
        # Not written means a dry run: a real one that cannot write raises instead of returning.
        head = (
            f"undid {self.target} as {self.undo_id}"
            if self.written
            else f"would undo {self.target} (dry run, nothing written)"
        )
        return [head, *(f"  Honcho: {effect}" for effect in self.effects)]

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


def _check(config: Config, edit_id: str, target: dict | None, undone_by: str | None) -> None:
    if target is None:
        raise NotFound(f"no edit {edit_id!r} in {config.paths.journal}")
    if target.get("op") == "undo":
        raise Refused(f"{edit_id} is itself an undo; an undo cannot be undone")
    if undone_by:
        raise Refused(f"{edit_id} was already undone by {undone_by}")


def _append_if_still_undoable(config: Config, edit_id: str, record: dict) -> None:
    """Checked again under the journal's lock, in the same hold as the append:
    two undos of the same edit at once cannot both pass the check."""

    def still_undoable(f) -> None:
        _check(config, edit_id, *find_edit(f, edit_id))

    try:
        append_checked(config.paths.journal, record, still_undoable)
    except FileNotFoundError:
        raise NotFound(f"no edit {edit_id!r}: {config.paths.journal} does not exist") from None


def _effects(config: Config, edit_id: str) -> list[str]:
    state = mirror.read_state(config.paths.state)[0] or {}  # just saved by mirror.run; if not, nothing is known
    recorded = (state.get("edits") or {}).get(edit_id)
    item = edit_item(edit_id)
    plan = plan_undo(item, recorded, already_undone=False)
    if plan.role is None:
        return [f"nothing in Honcho: {plan.reason.replace('-', ' ')}"]
    if config.local_only:
        return ["nothing in Honcho: bxmem is local-only"]
    config.paths.require_home()
    box = Outbox.load(config.paths.ensure_state_dir(), Ledger(config.paths.ledger))
    if item in box.pending and item not in box.attempts:
        return ["it has not been sent yet: it will not be sent at all"]
    roles = roles_of((ws.role, ws.name) for ws in config.workspaces())
    written_as = {ws: entry["written"] for ws, entry in box.roles.items()}
    effects = []
    for action in plan.actions:
        if action["do"] in ("unconclude", "reconclude"):
            written = box.conclusions.get(action["of"])
            held = check_write(written["ws"], "trusted", roles, written_as) if written else None
            if action["do"] == "unconclude" and written and not written.get("deleted_by"):
                # The id and workspace are the ledger's, written from Honcho's answer: shown as trust/printed_fields.py shows ids.
                effects.append(
                    f"its conclusion {printed_fields.honcho_id(written['id'])} in {printed_fields.honcho_id(written['ws'])} will be deleted"
                    + (
                        f", but not now: {held.explain()} (held; see: bxmem runbook honcho-held-by-config)"
                        if held
                        else ""
                    )
                )
            elif action["do"] == "reconclude":
                effects.append(
                    "the conclusion it deleted will be written again, in its old session"
                    + (
                        f", but not now: {held.explain()} (held; see: bxmem runbook honcho-held-by-config)"
                        if held
                        else ""
                    )
                )
        elif action["do"] == "retract":
            note = box.fleet.get(action["of"])
            held = check_write(note["ws"], "fleet", roles, written_as) if note else None
            effects.append(
                "a retraction message will be added beside the note in the fleet (Honcho cannot delete a message)"
                + (f", but not now: {held.explain()} (held; see: bxmem runbook honcho-held-by-config)" if held else "")
            )
    return effects or ["nothing in Honcho: nothing it wrote is there"]


def run(config: Config, edit_id: str, dry_run: bool = False) -> UndoResult:
    mirror.run(config)  # the target's own decision first, so the preview is true
    target, undone_by = find_edit_in(config.paths.journal, edit_id)
    _check(config, edit_id, target, undone_by)
    result = UndoResult(target=edit_id, undo_id=None, written=False, effects=_effects(config, edit_id))
    if dry_run:
        return result
    result.undo_id = f"undo-{uuid.uuid4().hex[:16]}"
    record = {"id": result.undo_id, "ts": now_iso(), "session": "owner", "op": "undo", "target": edit_id}
    _append_if_still_undoable(config, edit_id, record)
    result.written = True
    mirror.run(config)
    return result
