"""A ledger line not of its kind's shape is a malformed line (store/ledger_shapes.py):
skipped, counted and said, by every fold alike, never half folded and never a
crash. Every line bxmem writes is of its shape."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.commands import audit, decide_state, index_fold, mirror
from bxmem.config.loader import Config
from bxmem.store import index, ledger_events
from bxmem.store.ledger import Ledger, ReadResult, now_iso
from bxmem.store.ledger_shapes import KINDS, event_problem
from bxmem.store.outbox import Outbox


def every_kind() -> list[Mapping[str, Any]]:
    """One line of each kind (both decisions), as bxmem writes them."""
    le = ledger_events
    macs = {"key": "k1", "user": ["a" * 32], "reply": "b" * 32}
    return [
        le.decided_turn(
            session="s",
            turn=1,
            role="trusted",
            ws="w",
            reason="clean",
            peer="kyle",
            trust_class="private",
            untrusted_by=[],
            secret_rule=None,
            log="s.jsonl",
            user=[[0, 10]],
            reply=[10, 10],
            at="t",
            macs=macs,
        ),
        le.decided_turn(
            session="s",
            turn=2,
            role=None,
            ws=None,
            reason="log-unreadable",
            peer=None,
            trust_class="secret",
            untrusted_by=["log"],
            secret_rule=None,
            log="s.jsonl",
            user=[],
            reply=None,
            at=None,
            unreadable={"line": 3, "why": "not valid JSON"},
        ),
        le.decided_edit(
            "e1",
            op="note",
            session="s",
            role="trusted",
            ws="w",
            reason="trusted-note",
            journal_line=1,
            at="t",
            actions=[
                {"do": "conclude", "about": "agent", "text": {"span": [0, 9], "field": "entry", "mac": "m", "key": "k"}}
            ],
        ),
        le.decided_edit(
            "u1",
            op="undo",
            session="owner",
            role="trusted",
            ws="w",
            reason="undo",
            journal_line=2,
            at=None,
            target="e1",
            actions=[{"do": "unconclude", "of": "edit:e1#0"}],
        ),
        le.attempt(
            now_iso(), items=["turn:s:1"], ws="w", role="trusted", session="s", hsession="s", parts={"turn:s:1": 2}
        ),
        le.sent_turn("turn:s:1", "w", "trusted", "s", ["m1", "m2"], settled=True),
        le.sent_edit("edit:e1", "w", "trusted", [{"i": 0, "do": "conclude", "id": "c1", "hsession": "s"}]),
        le.failed(
            "edit:u1",
            "w",
            422,
            "refused",
            [{"i": 0, "do": "unconclude", "of": "edit:e1#0", "deleted": "c1", "was_there": True}],
        ),
        le.unsent(["turn:s:1"], "w", "connect failed"),
        le.cancelled("edit:e1", "w", "edit:u1"),
        le.requeued("edit:u1"),
        le.created_workspace("w", {"reasoning": {}}, "trusted"),
        le.created_peer("w", "kyle", False),
        le.created_session("w", "s-2", "s", 2, ["kyle", "boxmaker0"]),
        le.key_refused("w", None, "honcho_trusted", [1, 2, 3, 4, 5, 6], "is a symbolic link"),
        le.key_resumed("w", "the key file changed"),
        le.failed("turn:s:1", "w", None, "an answer bxmem could not use", in_doubt=True),
        le.session_gone("w", "s", "s", 404),
        le.session_renewed("w", "s", "s"),
        le.dropped("turn:s:1", None, "failed", "given up"),
        le.rerouted("turn:s:1", "w2", "trusted", "w"),
        le.accepted("duplicate:w:m1", "known"),
    ]


def test_the_kinds_are_the_vocabulary_s():
    assert set(KINDS) == set(ledger_events.KINDS)


@pytest.mark.parametrize("ev", every_kind(), ids=lambda ev: f"{ev['ev']}-{ev.get('kind', '')}")
def test_every_line_bxmem_writes_is_of_its_shape(ev):
    assert event_problem(json.loads(json.dumps(ev))) is None


# Damage each fold would have crashed on (an AttributeError, TypeError or KeyError before) or folded wrong
# (a send crash later, a turn taken for another, a refusal shown with a status that is not one).
DAMAGED = [
    ('{"v":1,"ev":"decided","ts":"t","item":5}', "item: not a string"),
    ('{"v":1,"ev":"attempt","ts":"t","items":5,"ws":"w","session":"s"}', "items: not a list"),
    ('{"v":1,"ev":"attempt","ts":"t","items":["turn:s:1"],"ws":"w","session":"s"}', "hsession: missing"),
    (
        '{"v":1,"ev":"sent","ts":"t","item":"edit:e1","ws":"w","results":[{"i":"0","do":"conclude"}]}',
        "results[0].i: not an integer of at least 0",
    ),
    (
        '{"v":1,"ev":"failed","ts":"t","item":"edit:u1","ws":"w","status":422,"reason":"refused",'
        '"results":[{"i":0,"do":"unconclude","deleted":"c1","was_there":true}]}',
        "results[0].of: missing",
    ),
    ('{"v":1,"ev":"created","ts":"t","ws":"w","what":"session","session":"s"}', "id: missing"),
    ('{"v":1,"ev":"key_refused","ts":"t","ws":["w"],"status":401,"secret":"x","key":null}', "ws: not a string"),
    (
        '{"v":1,"ev":"failed","ts":"t","item":"turn:s:9","ws":"w","status":"422","reason":null}',
        "status: not an integer",
    ),
    (
        '{"v":1,"ev":"decided","ts":"t","item":"turn:s:2","kind":"turn","session":"s","turn":3,"reason":"r","peer":null,'
        '"class":"private","untrusted_by":[],"secret_rule":null,"log":"s.jsonl","user":[],"reply":null,"at":null}',
        "item: not the turn's",
    ),
    (
        '{"v":1,"ev":"decided","ts":"t","item":"edit:e9","kind":"edit","edit":"e9","op":"note","session":null,"reason":"r",'
        '"actions":[{"do":"retract"}],"journal_line":1,"at":null}',
        "actions[0].of: missing",
    ),
    ('{"v":1,"ev":"mystery","ts":"t"}', "ev: not a kind of event bxmem writes"),
]


def folds(tmp_path, ledger_path):
    """Every fold over the ledger, as each job runs it."""
    ledger = Ledger(ledger_path)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    box = Outbox.load(state, ledger)
    recovered = decide_state.fresh_state()
    decide_state.recover(recovered, ledger)
    edits = mirror._recover(mirror._fresh_state(), ledger)
    paths = SimpleNamespace(
        ledger=ledger_path,
        ensure_state_dir=lambda: state,
        logs=tmp_path,
        state=state,
        journal=tmp_path / "no-journal.jsonl",
    )
    audit._expected(cast("Config", SimpleNamespace(paths=paths)))
    index_fold.catch_up(index.Index(state / "index.sqlite3"), paths)
    return box, recovered, edits


@pytest.mark.parametrize(("line", "why"), DAMAGED, ids=[why for _l, why in DAMAGED])
def test_a_damaged_line_is_skipped_counted_and_said_by_every_fold(tmp_path, caplog, line, why):
    ledger_path = tmp_path / "honcho.jsonl"
    good = every_kind()
    Ledger(ledger_path).append(good[:4])
    at = ledger_path.stat().st_size
    with open(ledger_path, "a") as f:
        f.write(line + "\n")
    Ledger(ledger_path).append(good[4:])
    result = ReadResult()
    assert len(list(Ledger(ledger_path).iter_from(0, result))) == len(good)
    assert result.malformed == [at] and result.reasons == {at: why}
    box, recovered, edits = folds(tmp_path, ledger_path)
    assert box.malformed == 1
    assert f"malformed line at byte {at} skipped ({why}; not folded)" in caplog.text
    assert recovered["logs"]["s"]["decided"] == [[1, 2]] and set(edits) == {"e1", "u1"}


values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**64) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def damaged(draw) -> dict:
    """A line bxmem writes with one field, at any depth, set to any JSON value, or removed."""
    ev = json.loads(json.dumps(draw(st.sampled_from(every_kind()))))
    where = ev
    for _ in range(draw(st.integers(0, 3))):
        keys = list(where) if isinstance(where, dict) else list(range(len(where))) if isinstance(where, list) else []
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        if not isinstance(where[key], (dict, list)) or not where[key]:
            break
        where = where[key]
    keys = list(where) if isinstance(where, dict) else list(range(len(where)))
    if keys:
        key = draw(st.sampled_from(keys))
        if draw(st.booleans()) and isinstance(where, dict):
            del where[key]
        else:
            where[key] = draw(values)
    return ev


@settings(max_examples=examples(150), deadline=None)
@given(lines=st.lists(damaged(), min_size=1, max_size=6))
def test_no_damaged_line_stops_a_fold(lines):
    with tempfile.TemporaryDirectory() as fresh:  # each example its own home: no state left by the one before
        home = Path(fresh)
        ledger_path = home / "fuzzed.jsonl"
        with open(ledger_path, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        box, _recovered, _edits = folds(home, ledger_path)
    kept = [line for line in lines if event_problem(line) is None]
    assert box.malformed == len(lines) - len(kept)


def test_many_damaged_lines_are_named_a_few_and_counted_all(tmp_path, caplog):
    """A ledger of thousands of damaged lines (a copy from another version, a bad sed): the
    fold names the first few and counts the rest in one line, and keeps only those few in
    memory; sync's count is every one."""
    from bxmem.store.ledger import MALFORMED_KEPT
    from bxmem.store.outbox import Outbox

    ledger_path = tmp_path / "honcho.jsonl"
    Ledger(ledger_path).append(every_kind())
    damaged_line = json.dumps({"v": 1, "ev": "decided", "item": "turn:old:1", "kind": "turn", "ws": None}) + "\n"
    with open(ledger_path, "a") as f:
        f.write(damaged_line * 5000)
    result = ReadResult()
    list(Ledger(ledger_path).iter_from(0, result))
    assert result.skipped == 5000 and len(result.malformed) == len(result.reasons) == MALFORMED_KEPT
    caplog.set_level("WARNING", logger="bxmem")
    box = Outbox.load(tmp_path / "state", Ledger(ledger_path))
    said = [r.getMessage() for r in caplog.records if "malformed line" in r.getMessage()]
    assert len(said) == MALFORMED_KEPT + 1 and "4,990 more malformed line(s) skipped" in said[-1], said[-2:]
    assert box.malformed == 5000
