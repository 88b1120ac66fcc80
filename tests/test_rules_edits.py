"""The seed's section 4 "Memory writes" table, row by row, on the pure rules:
`plan_edit` over an edit's facts, its text veto, and `plan_undo`."""

from __future__ import annotations

import pytest

from bxmem.trust.rules import MAX_CONCLUSION_CHARS, EditFacts, EditPlan, plan_edit, plan_undo, veto_texts

REF = "edit:e0#0"  # a live conclusion an earlier edit wrote


def facts(entry_chars: int | None = 5, secret: str | None = None, **live: str) -> EditFacts:
    return EditFacts({text.replace("_", " "): ref for text, ref in live.items()}, secret, entry_chars)


def unconclude(ref: str = REF) -> dict:
    return {"do": "unconclude", "of": ref}


def conclude(about: str) -> dict:
    return {"do": "conclude", "about": about, "field": "entry"}


EDIT_ROWS = [
    # seed: identity add (memory.md or user.md) -> a conclusion in the trusted workspace;
    # a user.md entry is the owner's picture, a memory.md entry the agent's
    (
        {"op": "identity_add", "file": "memory.md", "entry": "hello"},
        facts(),
        EditPlan("trusted", "identity-add", (conclude("agent"),)),
    ),
    (
        {"op": "identity_add", "file": "user.md", "entry": "hello"},
        facts(),
        EditPlan("trusted", "identity-add", (conclude("owner"),)),
    ),
    # seed: identity replace -> the old entry's conclusion deleted, the new one created
    (
        {"op": "identity_replace", "file": "user.md", "entry": "new", "old": "old one"},
        facts(old_one=REF),
        EditPlan("trusted", "identity-replace", (unconclude(), conclude("owner"))),
    ),
    (
        {"op": "identity_replace", "file": "user.md", "entry": "new", "old": "old one"},
        facts(),
        EditPlan("trusted", "identity-replace; old entry was never mirrored", (conclude("owner"),)),
    ),
    # seed: an entry dropped from identity (remove, or dropped by consolidate) -> its conclusion deleted
    (
        {"op": "identity_remove", "file": "memory.md", "entry": "gone"},
        facts(gone=REF),
        EditPlan("trusted", "identity-remove", (unconclude(),)),
    ),
    (
        {"op": "identity_remove", "file": "memory.md", "entry": "gone"},
        facts(),
        EditPlan(None, "removed-entry-was-never-mirrored"),
    ),
    (
        {"op": "consolidate", "file": "memory.md", "dropped": ["a", "b", "c"]},
        facts(a=REF, c="edit:e2#0"),
        EditPlan("trusted", "consolidate-dropped", (unconclude(), unconclude("edit:e2#0"))),
    ),
    # seed: an entry moved out of identity by consolidate -> nothing: its conclusion is already there
    (
        {"op": "consolidate", "file": "memory.md", "dropped": [], "moved": ["a"]},
        facts(a=REF),
        EditPlan(None, "consolidate-dropped-nothing-mirrored"),
    ),
    # seed: a trusted note -> a conclusion in the trusted workspace (the agent's picture)
    (
        {"op": "note", "trust": "trusted", "entry": "n"},
        facts(),
        EditPlan("trusted", "trusted-note", (conclude("agent"),)),
    ),
    # seed: an untrusted note -> a message in the fleet workspace
    (
        {"op": "note", "trust": "untrusted", "entry": "n"},
        facts(),
        EditPlan("fleet", "untrusted-note", ({"do": "fleet-message", "field": "entry"},)),
    ),
    # seed: a flagged note -> nothing: it stays local (even when it holds a secret)
    (
        {"op": "note", "trust": "flagged", "entry": "n"},
        facts(secret="github-token"),
        EditPlan(None, "flagged-note-stays-local"),
    ),
    # bxmem: what the seed's table has no row for stays local, and says why
    ({"op": "identity_add", "file": "notes.md", "entry": "x"}, facts(), EditPlan(None, "not-an-identity-file")),
    ({"op": "identity_add", "file": "memory.md"}, facts(None), EditPlan(None, "no-entry")),
    ({"op": "identity_replace", "file": "memory.md", "old": "x"}, facts(None), EditPlan(None, "no-entry")),
    ({"op": "note", "trust": "trusted", "entry": 3}, facts(None), EditPlan(None, "no-entry")),
    ({"op": "note", "trust": "maybe", "entry": "n"}, facts(), EditPlan(None, "note-with-unknown-trust")),
    ({"op": "rename", "file": "memory.md"}, facts(), EditPlan(None, "unknown-op")),
]


@pytest.mark.parametrize("record, edit_facts, expected", EDIT_ROWS)
def test_edit_table(record, edit_facts, expected):
    assert plan_edit(record, edit_facts) == expected


LONG = MAX_CONCLUSION_CHARS + 1
VETO_ROWS = [
    # (record, facts) -> the reason it stays local, or None when the plan stands
    (
        {"op": "identity_add", "file": "memory.md", "entry": "x"},
        facts(secret="github-token"),
        "secret-in-entry (github-token)",
    ),
    ({"op": "note", "trust": "untrusted", "entry": "x"}, facts(secret="jwt"), "secret-in-entry (jwt)"),
    (
        {"op": "identity_add", "file": "memory.md", "entry": ""},
        facts(0),
        f"entry-not-1-to-{MAX_CONCLUSION_CHARS}-characters",
    ),
    (
        {"op": "note", "trust": "trusted", "entry": "x"},
        facts(LONG),
        f"entry-not-1-to-{MAX_CONCLUSION_CHARS}-characters",
    ),
    ({"op": "identity_add", "file": "memory.md", "entry": "x"}, facts(MAX_CONCLUSION_CHARS), None),
    ({"op": "note", "trust": "untrusted", "entry": "x"}, facts(LONG), None),  # a fleet message is chunked
    # a secret is checked before the length
    ({"op": "identity_add", "file": "memory.md", "entry": "x"}, facts(LONG, secret="jwt"), "secret-in-entry (jwt)"),
    # deleting a conclusion carries no text: nothing to veto
    ({"op": "identity_remove", "file": "memory.md", "entry": "x"}, facts(secret="jwt", x=REF), None),
]


@pytest.mark.parametrize("record, edit_facts, vetoed", VETO_ROWS)
def test_the_text_veto(record, edit_facts, vetoed):
    plan = plan_edit(record, edit_facts)
    if vetoed is None:
        assert plan.role is not None and plan.actions
    else:
        assert plan == EditPlan(None, vetoed)


def test_the_veto_leaves_a_plan_without_writes_alone():
    plan = EditPlan("trusted", "identity-remove", (unconclude(),))
    assert veto_texts(plan, facts(None, secret="jwt")) is plan


def recorded(op: str, role: str | None, actions: list[dict]) -> dict:
    return {"op": op, "role": role, "actions": actions}


UNDO_ROWS = [
    # seed: undo of an edit whose conclusions were written -> those deleted; any it had deleted, written again
    (
        recorded("identity_replace", "trusted", [unconclude(), {"do": "conclude", "about": "owner"}]),
        False,
        EditPlan("trusted", "undo", (unconclude("edit:e1#1"), {"do": "reconclude", "of": REF, "undoes": "edit:e1#0"})),
    ),
    # seed: undo of an untrusted note already in the fleet -> a retraction beside it
    (
        recorded("note", "fleet", [{"do": "fleet-message"}]),
        False,
        EditPlan("fleet", "undo", ({"do": "retract", "of": "edit:e1#0"},)),
    ),
    (None, False, EditPlan(None, "undo-target-unknown")),
    (recorded("undo", "trusted", []), False, EditPlan(None, "undo-of-an-undo")),
    (recorded("note", "trusted", [{"do": "conclude"}]), True, EditPlan(None, "already-undone")),
    (recorded("note", None, []), False, EditPlan(None, "target-stayed-local")),
]


@pytest.mark.parametrize("target, already_undone, expected", UNDO_ROWS)
def test_undo_table(target, already_undone, expected):
    assert plan_undo("edit:e1", target, already_undone) == expected
