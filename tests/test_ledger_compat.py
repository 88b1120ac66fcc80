"""Ledgers written before the event vocabulary moved to store/ledger_events.py fold
exactly as they did then.

The ledgers in tests/fixtures/ledger-v1/ were written by the suite's own send,
mirror, fault and key tests at commit 6d1f869; the expected folds beside them
(`*.fold.json`) were computed by that commit's code. Every fold over the ledger
is checked: the outbox, audit's expectations, and decide's and mirror's
recovery, and the index's catch-up. `BXMEM_WRITE_FOLDS=1` writes the expectations again (only ever from
a commit whose folds are known good).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from bxmem.commands import audit, decide_state, index_fold, mirror
from bxmem.config.loader import Config
from bxmem.store.ledger import Ledger
from bxmem.store.outbox import Outbox
from bxmem.store.outbox_shape import offset_of

LEDGERS = Path(__file__).parent / "fixtures" / "ledger-v1"
# The owner's way out (bxmem outbox, audit --accept): a ledger written by the suite at the
# commit that added those kinds, and its folds then.
OWNER = Path(__file__).parent / "fixtures" / "ledger-owner"
# What the outbox fold keeps that it did not then (each decision is final: store/outbox.py).
ADDED_SINCE = (
    "known_turns",
    "known_other",
    "repeated",
    "first_repeated",
    "_new_repeats",
    "_first_new_repeat",
    "dropped",
    "announced",
    "roles",
    "hsessions",
    "mark",
    "key",
    "_secret",
    "_order",
    "named_wrong",
    "withdrawn",
    "_sent_early",
)
NAMES = sorted(p.stem for p in LEDGERS.glob("*.jsonl"))


def _plain(value):
    """JSON-comparable: tuples as lists, keys as strings."""
    return json.loads(json.dumps(value, sort_keys=True, default=list))


def _index_fold(ledger_path: Path, state_dir: Path, monkeypatch) -> list:
    """What the index's catch-up takes from the ledger: the decided turns and their labels."""
    from bxmem.sources import loopd

    turns = []

    def texts(self, logs, ev):
        reply = f"{ev['log']}@{ev['reply'][0]}" if ev.get("reply") else None
        return [f"{ev['log']}@{span[0]}" for span in ev.get("user") or []], reply

    monkeypatch.setattr(loopd.SpanReader, "turn_texts", texts)
    monkeypatch.setattr(
        index_fold,
        "index_turn",
        lambda _ix, ev, user, reply: turns.append([ev["item"], *index_fold.turn_labels(ev), user, reply]),
    )
    paths = SimpleNamespace(ledger=ledger_path, logs=state_dir, journal=state_dir / "no-journal.jsonl", state=state_dir)
    index_fold.update(paths)
    return turns


def folds(ledger_path: Path, state_dir: Path, monkeypatch) -> dict:
    ledger = Ledger(ledger_path)
    box = Outbox.load(state_dir, ledger)
    outbox = {k: v for k, v in box.__dict__.items() if k != "ino" and k not in ADDED_SINCE}
    # A pending record gained its role (the sixth field) since: held to the decision in
    # test_what_the_fold_learnt_since; here the record as it was.
    # Its first field is the decision's offset with the line's keyed hash now (outbox_shape.AT): the offset, as then.
    outbox["pending"] = {k: (offset_of(v), *v[1:5]) for k, v in box.pending.items()}
    outbox["failed"] = {
        k: {**v, "decided": (offset_of(v["decided"]), *v["decided"][1:5]) if v.get("decided") else v.get("decided")}
        for k, v in box.failed.items()
    }
    paths = SimpleNamespace(ledger=ledger_path, state=state_dir, ensure_state_dir=lambda: state_dir)
    expected, _box = audit._expected(cast("Config", SimpleNamespace(paths=paths)))
    # audit keeps each decision's role and each item's message ids now; then, the workspace and the count.
    decided = {item: ws for item, (ws, _role) in expected.decided.items()}
    sent = {item: (ws, len(ids)) for item, (ws, ids) in expected.sent.items()}
    recovered_edits = mirror._recover(mirror._fresh_state(), ledger)
    return _plain(
        {
            "index": _index_fold(ledger_path, state_dir, monkeypatch),
            "outbox": outbox,
            "audit": {"decided": decided, "sent": sent},
            "mirror_recover": recovered_edits,
        }
    )


def decided_turns(ledger_path: Path) -> dict[str, set[int]]:
    turns: dict[str, set[int]] = {}
    for line in ledger_path.read_text().splitlines():
        ev = json.loads(line)
        if ev["ev"] == "decided" and ev["kind"] == "turn":
            turns.setdefault(ev["session"], set()).add(ev["turn"])
    return turns


@pytest.mark.parametrize("name", NAMES)
def test_an_old_ledger_folds_as_it_did(name, tmp_path, monkeypatch):
    ledger_path = tmp_path / "honcho.jsonl"
    shutil.copyfile(LEDGERS / f"{name}.jsonl", ledger_path)
    state = tmp_path / "state"
    state.mkdir()
    got = folds(ledger_path, state, monkeypatch)
    expected_path = LEDGERS / f"{name}.fold.json"
    expected = json.loads(expected_path.read_text())
    old_decide = expected.pop("decide_recover")  # the highest decided turn per session, as decide kept it then
    if os.environ.get("BXMEM_WRITE_FOLDS"):
        expected_path.write_text(json.dumps({**got, "decide_recover": old_decide}, indent=1, sort_keys=True) + "\n")
    assert got == expected
    # decide's recovery learns the exact set of decided turns now (it kept the highest
    # before, and lost turns decided out of order): the same turns, and every one.
    recovered = decide_state.fresh_state()
    decide_state.recover(recovered, Ledger(ledger_path))
    sets = {s: {n for lo, hi in c["decided"] for n in range(lo, hi + 1)} for s, c in recovered["logs"].items()}
    assert sets == decided_turns(ledger_path)
    assert {s: max(t) for s, t in sets.items()} == {s: c["seen"] for s, c in old_decide["logs"].items()}
    assert recovered["ledger_size"] == ledger_path.stat().st_size  # learnt to the end: read once


@pytest.mark.parametrize("name", NAMES)
def test_what_the_fold_learnt_since(name, tmp_path):
    ledger_path = tmp_path / "honcho.jsonl"
    shutil.copyfile(LEDGERS / f"{name}.jsonl", ledger_path)
    box = Outbox.load(tmp_path, Ledger(ledger_path))
    lines = [json.loads(line) for line in ledger_path.read_text().splitlines()]
    first: dict[str, dict] = {}
    for ev in lines:
        if ev["ev"] == "decided":
            first.setdefault(ev["item"], ev)
    turns = {
        f"turn:{session}:{n}"
        for session, ranges in box.known_turns.items()
        for low, high in ranges
        for n in range(low, high + 1)
    }
    assert turns | box.known_other == set(first) and not turns & box.known_other
    assert box.repeated == sum(1 for ev in lines if ev["ev"] == "decided") - len(first)
    for item, record in box.pending.items():
        assert record[5] == first[item].get("role")
    # What each workspace was written as, though no line of these ledgers names a role:
    # the roles of the decided items attempted or sent there, and the first of them.
    written: dict[str, dict[str, str]] = {}
    names: dict[str, dict[str, str]] = {}
    for ev in lines:
        attempted = ev["items"] if ev["ev"] == "attempt" else [ev["item"]] if ev["ev"] == "sent" else []
        for item in attempted:
            written.setdefault(ev["ws"], {}).setdefault(first[item]["role"], item)
        if ev["ev"] == "attempt" and ev.get("hsession"):
            names.setdefault(ev["ws"], {}).setdefault(ev["hsession"], ev["session"])
        if ev["ev"] == "created" and ev["what"] == "session":
            names.setdefault(ev["ws"], {}).setdefault(ev["id"], ev["session"])
    assert written, "the fixture sends nothing"
    assert {ws: entry["written"] for ws, entry in box.roles.items() if entry["written"]} == written
    assert box.hsessions == names
    # An old `created` line names no role: set up for none, so set up again for the role it has now.
    created = {ev["ws"] for ev in lines if ev["ev"] == "created" and ev["what"] == "workspace"}
    assert {ws for ws, entry in box.roles.items() if entry["set_up"]} == created
    assert all(entry["set_up"] in ([], [None]) for entry in box.roles.values())


def test_the_owner_actions_fold_as_they_did(tmp_path, monkeypatch):
    ledger_path = tmp_path / "honcho.jsonl"
    shutil.copyfile(OWNER / "owner-actions.jsonl", ledger_path)
    state = tmp_path / "state"
    state.mkdir()
    got = folds(ledger_path, state, monkeypatch)
    expected_path = OWNER / "owner-actions.fold.json"
    if os.environ.get("BXMEM_WRITE_FOLDS"):
        expected_path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(expected_path.read_text())
    box = Outbox.load(state, Ledger(ledger_path))
    # What the kinds do: the dropped item is gone for good, the re-routed one went where its
    # role is now, the gone session was replaced by s-2, and the accepted findings are known.
    assert (box.dropped, box.pending, box.failed) == (1, {}, {})
    assert box.setup["bm0-trusted"]["sessions"]["s"]["name"] == "s-2"
    expected, _ = audit._expected(
        cast(
            "Config",
            SimpleNamespace(paths=SimpleNamespace(ledger=ledger_path, state=state, ensure_state_dir=lambda: state)),
        )
    )
    assert expected.decided["turn:u:1"] == ("bm0-home", "trusted") and len(expected.accepted) == 4


def test_the_fixtures_cover_every_event_kind():
    kinds = set()
    for path in [*(LEDGERS / f"{name}.jsonl" for name in NAMES), OWNER / "owner-actions.jsonl"]:
        for line in path.read_text().splitlines():
            ev = json.loads(line)
            kinds.add(
                ev["ev"]
                + (f"/{ev['kind']}" if ev["ev"] == "decided" else "")
                + (f"/{ev['what']}" if ev["ev"] == "created" else "")
            )
    assert kinds == {
        "decided/turn",
        "decided/edit",
        "attempt",
        "sent",
        "failed",
        "unsent",
        "cancelled",
        "requeued",
        "created/workspace",
        "created/peer",
        "created/session",
        "key_refused",
        "key_resumed",
        "session_gone",
        "session_renewed",
        "dropped",
        "rerouted",
        "accepted",
    }
    from bxmem.store import ledger_events as le

    assert {kind.split("/")[0] for kind in kinds} == set(le.KINDS)  # a kind added to the vocabulary needs a fixture


def _rebuilt(ev: dict) -> Mapping[str, object]:
    """The line built again by ledger_events' constructor for its kind, from its own fields."""
    from bxmem.store import ledger_events as le

    kind = ev["ev"]
    if kind == le.DECIDED and ev["kind"] == le.TURN:
        return le.decided_turn(
            session=ev["session"],
            turn=ev["turn"],
            role=ev["role"],
            ws=ev["ws"],
            reason=ev["reason"],
            peer=ev["peer"],
            trust_class=ev["class"],
            untrusted_by=ev["untrusted_by"],
            secret_rule=ev["secret_rule"],
            log=ev["log"],
            user=ev["user"],
            reply=ev["reply"],
            at=ev["at"],
            macs=ev.get("macs"),
            unreadable=ev.get("unreadable"),
        )
    if kind == le.DECIDED:
        return le.decided_edit(
            ev["edit"],
            op=ev["op"],
            session=ev["session"],
            role=ev["role"],
            ws=ev["ws"],
            reason=ev["reason"],
            actions=ev["actions"],
            journal_line=ev["journal_line"],
            at=ev["at"],
            target=ev.get("target", "").removeprefix("edit:"),
        )
    if kind == le.ATTEMPT:
        return le.attempt(
            ev["ts"],
            items=ev["items"],
            ws=ev["ws"],
            role=ev.get("role"),
            session=ev["session"],
            hsession=ev.get("hsession"),
            parts=ev.get("parts"),
        )
    if kind == le.SENT and "results" in ev:
        return le.sent_edit(ev["item"], ev["ws"], ev.get("role"), ev["results"])
    if kind == le.SENT:
        return le.sent_turn(
            ev["item"], ev["ws"], ev.get("role"), ev["hsession"], ev["ids"], settled=ev.get("settled", False)
        )
    if kind == le.FAILED:
        return le.failed(ev["item"], ev["ws"], ev["status"], ev["reason"], ev.get("results"))
    if kind == le.UNSENT:
        return le.unsent(ev["items"], ev["ws"], ev["reason"])
    if kind == le.CANCELLED:
        return le.cancelled(ev["item"], ev["ws"], ev["by"])
    if kind == le.REQUEUED:
        return le.requeued(ev["item"])
    if kind == le.CREATED and ev["what"] == "workspace":
        return le.created_workspace(ev["ws"], ev["configuration"], ev.get("role"))
    if kind == le.CREATED and ev["what"] == "peer":
        return le.created_peer(ev["ws"], ev["id"], ev["observe_me"])
    if kind == le.CREATED:
        return le.created_session(ev["ws"], ev["id"], ev["session"], ev["n"], ev["peers"])
    if kind == le.KEY_REFUSED:
        return le.key_refused(ev["ws"], ev["status"], ev["secret"], ev["key"])
    if kind == le.SESSION_GONE:
        return le.session_gone(ev["ws"], ev["session"], ev["hsession"], ev["status"])
    if kind == le.SESSION_RENEWED:
        return le.session_renewed(ev["ws"], ev["session"], ev["hsession"])
    if kind == le.DROPPED:
        return le.dropped(ev["item"], ev["ws"], ev["was"], ev["reason"])
    if kind == le.REROUTED:
        return le.rerouted(ev["item"], ev["ws"], ev["role"], ev["was"])
    if kind == le.ACCEPTED:
        return le.accepted(ev["finding"], ev["reason"])
    assert kind == le.KEY_RESUMED, kind
    return le.key_resumed(ev["ws"], ev["why"])


@pytest.mark.parametrize(
    "path", [*(LEDGERS / f"{name}.jsonl" for name in NAMES), OWNER / "owner-actions.jsonl"], ids=lambda p: p.stem
)
def test_the_constructors_write_the_old_lines_byte_for_byte(path):
    """Same keys, same order, same values: only the time differs."""
    for line in path.read_bytes().splitlines():
        old = json.loads(line)
        new = {**_rebuilt(old), "ts": old["ts"]}
        assert json.dumps(new, separators=(",", ":"), ensure_ascii=False).encode() == line


def test_every_ledger_line_is_built_by_ledger_events():
    """No module writes a ledger event as a free dict: a new kind or field goes
    through store/ledger_events.py, where the folds' vocabulary is."""
    import re

    import bxmem

    root = Path(bxmem.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() in ("store/ledger.py", "store/ledger_events.py"):
            continue
        for n, text in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bevent\(\s*\"|[\"']ev[\"']\s*:", text):
                offenders.append(f"{path.relative_to(root)}:{n}: {text.strip()}")
    assert offenders == []


def _log_for(ev: dict, speaker: str | None) -> bytes:
    """A log whose bytes at the decision's spans are its turn's user line and final
    reply (padded to the recorded lengths), blank lines in between."""
    spans = [("user", span) for span in ev["user"]] + ([("assistant", ev["reply"])] if ev.get("reply") else [])
    size = max(offset + length for _kind, (offset, length) in spans)
    data = bytearray(b" " * size)
    for kind, (offset, length) in spans:
        record = {"type": kind, "turn": ev["turn"], "text": ""}
        record.update({"speaker": speaker} if kind == "user" else {"final": True})
        pad = length - len(json.dumps(record).encode()) - 1
        record["text"] = "t" * pad
        line = json.dumps(record).encode() + b"\n"
        assert len(line) == length
        data[offset : offset + length] = line
        if offset:
            data[offset - 1 : offset] = b"\n"
    return bytes(data)


def test_old_decisions_without_line_hmacs_are_read_back_with_type_turn_and_speaker_checked(tmp_path):
    """Decided lines from before line hashes: send and the index check what needs no key."""
    from bxmem.sources.loopd import SpanChanged, SpanReader

    checked = 0
    for name in NAMES:
        for line in (LEDGERS / f"{name}.jsonl").read_text().splitlines():
            ev = json.loads(line)
            if ev["ev"] != "decided" or ev["kind"] != "turn" or not ev.get("reply") or not ev["user"]:
                continue
            assert "macs" not in ev
            logs = tmp_path / name
            logs.mkdir(exist_ok=True)
            speaker = ev["peer"] or "kyle"
            (logs / ev["log"]).write_bytes(_log_for(ev, speaker))
            reader = SpanReader(b"k" * 32)
            texts, reply = reader.turn_texts(logs, ev)
            assert all(set(t) <= {"t"} for t in texts) and set(reply or "t") <= {"t"} and reader.unkeyed == 1
            if ev["peer"]:
                (logs / ev["log"]).write_bytes(_log_for(ev, "mallory"))
                with pytest.raises(SpanChanged, match="not from the speaker decided"):
                    SpanReader().turn_texts(logs, ev)
            (logs / ev["log"]).write_bytes(_log_for({**ev, "turn": ev["turn"] + 1}, speaker))
            with pytest.raises(SpanChanged, match=f"not the user line of turn {ev['turn']}"):
                SpanReader().turn_texts(logs, ev)
            checked += 1
    assert checked >= 3
