"""The guarantee over generated session logs (hypothesis): arbitrary bytes, torn
lines, wrong types, missing fields, deep nesting, over-long lines, reordered
records, brokerd answering only on a later run, and decide killed at any byte
of its ledger append.

What must hold, judged from what the generator did (never from bxmem's own
validator):

* no turn whose end comes after a line bxmem could not read (or, decided
  late, in a log holding one at all) is decided anywhere but nowhere, with
  reason `log-unreadable`: no such session ever yields a trusted decision;
* no turn after a tool result labelled untrusted is trusted;
* every turn whose `turn_end` line is intact is decided exactly once, after
  recovery from the kill.

`test_the_guarantee_fast` runs in the fast tier; `test_the_guarantee` (slow)
runs many more examples in CI and `./dev test --all`.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from enospc import Crash, Killed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bxmem.commands import decide
from bxmem.commands import index_fold as index_module
from bxmem.config import loader as config_module
from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines
from bxmem.sources import jsonline
from bxmem.store.ledger import Ledger

LINE_BOUND = 2048  # jsonline.MAX_LINE_BYTES while the examples run: over-long lines stay small
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82"]


def dumps(record: object) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


# --- what a session's log is made of: (bytes, what the generator knows of the line) --------------


def session_lines(turns: list[dict]) -> list[tuple[bytes, dict]]:
    lines = []
    for n, spec in enumerate(turns, 1):
        labels = [{"untrusted": untrusted, "class": trust_class} for untrusted, trust_class in spec["results"]]
        for record in turn_lines(n, f"question {n}", f"answer {n}", results=labels):
            meta = {"type": record["type"], "turn": n}
            if record["type"] == "tool_result":
                meta["untrusted"] = record["label"]["untrusted"]
            lines.append((dumps(record), meta))
    return lines


WRONG_VALUES: dict[str, list[object]] = {
    "type": [5, None, ["user"], {"t": 1}, True],
    "turn": ["1", 0, -3, 1.0, True, None, 2**64, "missing"],
    "label": [
        "missing",
        None,
        "clean",
        [False, "public"],
        {"untrusted": "no", "class": "public"},
        {"untrusted": False},
        {"class": "public"},
        {"untrusted": False, "class": "internal"},
    ],
    "text": [5, None, ["x"], "missing"],
    "final": ["true", 1, None, "missing"],
    "status": [0, None, ["completed"], "missing"],
    "speaker": [7, ["kyle"], {"name": "kyle"}],
}
FIELDS_OF = {
    "user": ["type", "turn", "text", "speaker"],
    "assistant": ["type", "turn", "text", "final"],
    "tool_result": ["type", "turn", "label"],
    "tool_call": ["type", "turn"],
    "turn_end": ["type", "turn", "status"],
}


@st.composite
def unreadable(draw, lines: list[tuple[bytes, dict]]) -> tuple[str, int, bytes | None]:
    """One way to make a line unreadable: (how, where, the new line or None)."""
    how = draw(st.sampled_from(["bytes", "wrong", "torn", "deep", "dupkey", "huge", "nonobject", "nul"]))
    readable = [i for i, (_raw, meta) in enumerate(lines) if "type" in meta]
    if how in ("wrong", "torn", "dupkey"):  # these change a readable line (a torn prefix of a JSON object never parses)
        if not readable:
            how = "nul"
        else:
            at = draw(st.sampled_from(readable))
    if how not in ("wrong", "torn", "dupkey"):
        at = draw(st.integers(0, len(lines) - 1))
    if how == "bytes":
        noise = draw(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")))
        cut = draw(st.integers(0, len(noise)))
        return how, at, noise[:cut] + draw(st.sampled_from(INVALID_UTF8)) + noise[cut:]
    if how == "wrong":
        record = json.loads(lines[at][0])
        field = draw(st.sampled_from(FIELDS_OF[record["type"]]))
        value = draw(st.sampled_from(WRONG_VALUES[field]))
        if value == "missing":
            record.pop(field, None)
        else:
            record[field] = value
        return how, at, dumps(record)
    if how == "torn":
        raw = lines[at][0]
        return how, at, raw[: draw(st.integers(1, len(raw) - 1))]  # glued to the next line below
    if how == "deep":
        depth = draw(st.integers(jsonline.MAX_DEPTH, 2500))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        return how, at, b'{"type":"tool_call","turn":1,"args":' + opener * depth + closer * depth + b"}"
    if how == "dupkey":
        record = json.loads(lines[at][0])
        key = draw(st.sampled_from(sorted(record)))
        return how, at, dumps(record)[:-1] + b"," + dumps(key) + b":" + dumps(record[key]) + b"}"
    if how == "huge":
        return (
            how,
            at,
            dumps(
                {
                    "type": "tool_result",
                    "turn": 1,
                    "label": {"untrusted": False, "class": "public"},
                    "text": "x" * LINE_BOUND,
                }
            ),
        )
    if how == "nul":
        return how, at, b"\x00" * draw(st.integers(1, 40))
    return how, at, dumps(draw(st.sampled_from([[1, 2], "tool_result", 42, None, 1.5])))


@st.composite
def session(draw) -> list[tuple[bytes, dict]]:
    """A session's lines, with what the generator knows of each: `bad` for a line
    made unreadable, `turn_end` for an intact end of a turn."""
    turns = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "results": st.lists(
                        st.tuples(st.sampled_from([False, False, True]), st.sampled_from(["public", "private"])),
                        max_size=2,
                    )
                }
            ),
            min_size=1,
            max_size=5,
        )
    )
    lines = session_lines(turns)
    for _ in range(draw(st.integers(0, 3))):
        how, at, new = draw(unreadable(lines))
        if how == "torn" and at + 1 < len(lines):
            lines[at : at + 2] = [(new + lines[at + 1][0], {"bad": how})]
        elif how in ("wrong", "dupkey", "torn"):
            lines[at] = (new, {"bad": how})
        else:
            lines.insert(at, (new, {"bad": how}))
    for _ in range(draw(st.integers(0, 2))):  # reorder: a readable line moves
        src, dst = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines.insert(dst, lines.pop(src))
    return lines


# --- the oracle ---------------------------------------------------------------------------------


def _decidable_at(turn: int, lines: list[tuple[bytes, dict]], upto: int) -> bool:
    """Whether, with the lines before `upto` read, every lower-numbered turn read so far
    has ended (trust/turn_order.turns_to_decide): only then is a turn decided in that run."""
    seen = {meta["turn"] for _raw, meta in lines[:upto] if "turn" in meta and meta["turn"] < turn}
    ended = {meta["turn"] for _raw, meta in lines[:upto] if meta.get("type") == "turn_end"}
    return seen <= ended


def expectations(lines: list[tuple[bytes, dict]], late_upto: int) -> dict[int, dict]:
    """Per turn due (an intact turn_end), what the facts allow: `tainted` (an
    unreadable line before its end, or anywhere for a late decision), `untrusted`.
    A decision is late when the turn could be decided in the first run (brokerd
    down then): a turn still waiting behind a lower-numbered open one is decided
    in the later run where the log's order puts it, with the labels as of there."""
    due: dict[int, dict] = {}
    bad_anywhere = any("bad" in meta for _raw, meta in lines)
    untrusted_anywhere = any(meta.get("untrusted") for _raw, meta in lines)
    bad_before = untrusted_before = False
    for index, (_raw, meta) in enumerate(lines):
        if meta.get("type") == "turn_end" and meta["turn"] not in due:
            late = index < late_upto and _decidable_at(meta["turn"], lines, late_upto)
            due[meta["turn"]] = {
                "tainted": bad_before or (late and bad_anywhere),
                "untrusted": untrusted_before or (late and untrusted_anywhere),
            }
        bad_before = bad_before or "bad" in meta
        untrusted_before = untrusted_before or bool(meta.get("untrusted"))
    return due


@contextlib.contextmanager
def patched(obj, name, value):
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def check(sessions: list[list[tuple[bytes, dict]]], split: float, late: bool, crash_at: int | None) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        patched(jsonline, "MAX_LINE_BYTES", LINE_BOUND),
        patched(index_module, "refresh", lambda paths, progress=None, deadline=None: None),
    ):
        home = Path(tmp)
        (home / "logs").mkdir()
        config_path = home / "bxmem.toml"
        config_path.write_text(
            '[honcho]\nurl = "http://127.0.0.1:9"\nagent = "boxmaker0"\nowner = "kyle"\n'
            'trusted = "t"\nuntrusted = "u"\nfleet = "f"\n'
        )
        config = config_module.load(config_path, home=home)
        cut = {name: int(len(lines) * split) for name, lines in zip(names(sessions), sessions, strict=True)}
        broker = StubBrokerd(home / "run" / "memory-broker" / "state.sock")
        for name, lines in zip(names(sessions), sessions, strict=True):
            write(home, name, lines[: cut[name]])
        if not late:
            broker.start()
        decide.run(config, broker_timeout=0.5)
        for name, lines in zip(names(sessions), sessions, strict=True):
            write(home, name, lines[cut[name] :])
        if late:
            broker.start()
        try:
            with (
                Crash(home / "memory" / "honcho.jsonl", crash_at) if crash_at is not None else contextlib.nullcontext()
            ):
                decide.run(config, broker_timeout=0.5)
        except Killed:
            pass
        decide.run(config, broker_timeout=0.5)
        decide.run(config, broker_timeout=0.5)
        broker.stop()
        events = Ledger(home / "memory" / "honcho.jsonl").read_from(0).events
    decided = [e for e in events if e["ev"] == "decided"]
    counts = Counter(e["item"] for e in decided)
    by_item = {e["item"]: e for e in decided}
    for name, lines in zip(names(sessions), sessions, strict=True):
        due = expectations(lines, cut[name] if late else 0)
        assert {item for item in counts if item.split(":")[1] == name} == {f"turn:{name}:{n}" for n in due}, name
        for n, facts in due.items():
            item = f"turn:{name}:{n}"
            got = by_item[item]
            assert counts[item] == 1, item
            if facts["tainted"]:
                assert (got["role"], got["reason"]) == (None, "log-unreadable"), (item, got)
                assert got["class"] == "secret" and "unreadable" in got
            elif facts["untrusted"]:
                assert got["role"] != "trusted", (item, got)


def names(sessions: list) -> list[str]:
    return [f"s{n}" for n in range(len(sessions))]


def write(home: Path, name: str, lines: list[tuple[bytes, dict]]) -> None:
    with open(home / "logs" / f"{name}.jsonl", "ab") as f:
        f.write(b"".join(raw + b"\n" for raw, _meta in lines))


examples = dict(
    sessions=st.lists(session(), min_size=1, max_size=3),
    split=st.floats(0, 1),
    late=st.booleans(),
    crash_at=st.none() | st.integers(0, 12_000),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**examples)
def test_the_guarantee_fast(sessions, split, late, crash_at):
    check(sessions, split, late, crash_at)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**examples)
def test_the_guarantee(sessions, split, late, crash_at):
    check(sessions, split, late, crash_at)


def test_a_turn_waiting_behind_an_open_one_while_brokerd_was_down_is_not_a_late_decision():
    """Turn 2's end is read in the first run, but turn 1 is still open then, so turn 2
    waits by turn order, not for brokerd: the later run decides it where turn 1 ends,
    before the unreadable lines that follow (the oracle once called it late)."""

    def line(record: dict) -> tuple[bytes, dict]:
        return json.dumps(record).encode(), {"type": record["type"], "turn": record["turn"]}

    ts = "2026-09-27T10:01:00Z"
    lines = [
        line({"type": "assistant", "turn": 1, "ts": ts, "final": False, "text": "let me think"}),
        line({"type": "turn_end", "turn": 2, "ts": ts, "status": "completed"}),
        line({"type": "assistant", "turn": 1, "ts": ts, "final": True, "text": "answer 1"}),
        line({"type": "turn_end", "turn": 1, "ts": ts, "status": "completed"}),
        (b'{"type":5,"turn":1}', {"bad": "wrong"}),
        line({"type": "user", "turn": 2, "ts": ts, "text": "question 2", "speaker": "kyle"}),
    ]
    assert expectations(lines, late_upto=2)[2] == {"tainted": False, "untrusted": False}
    assert expectations(lines, late_upto=4)[2]["tainted"]  # decidable in the first run: late
    check([lines], 2 / len(lines), True, None)
