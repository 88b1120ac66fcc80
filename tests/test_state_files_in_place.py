"""Any in-place change of any of bxmem's state files (memory/bxmem/), at any byte (issue 28):
a bit flipped, a range overwritten, the file cut and padded back to its size, two of its
lines swapped (in a one-line JSON file, two of its comma-separated pieces), a range
repeated, a number changed as an editor would change it, decide's decided ranges widened.
The file keeps its inode, as a restore with `cp`, an editor or a stray write leaves it.

Whatever the change, the next runs of decide, mirror and send, through the CLI's error
boundary against a fake Honcho, end with every turn and every edit decided exactly once,
to the workspace its labels give; each item bound for Honcho is there once, in that
workspace, with its own text (nothing misrouted, lost or doubled); the live conclusions
are the ones the journal leaves. A change the job reading the file notices is said once,
naming the file.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from fake_honcho import FakeHoncho
from freezegun import freeze_time
from helpers import examples, honcho_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inplace import KINDS, Draws, change, dumps, rewrite_in_place
from test_fuzz_local import fresh_home, lines_bytes, run_job

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines

FULL = settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
UNTRUSTED = [{"untrusted": True, "class": "public"}]
TRUSTED, UNTRUSTED_WS, FLEET = "bm0-trusted", "bm0-untrusted", "fleet"

# Every file a run of each job leaves in memory/bxmem/ (checked: a new one must be added here).
STATE_FILES = [
    "audit.json",
    "config.marshal",
    "decide.json",
    "entry.key",
    "idle-decide.marshal",
    "idle-mirror.marshal",
    "idle-send.marshal",
    "index.sqlite3",
    "last-run-decide.json",
    "last-run-mirror.json",
    "last-run-send.json",
    "mirror.json",
    "outbox.marshal",
    "workspace-roles.json",
]
# The files the first job after the change reads, and so must say it of (the rest are
# caches a job overwrites before reading, read only by recall and ask, or a key).
SAID_BY = {"decide.json": "decide", "mirror.json": "mirror", "outbox.marshal": "send", "config.marshal": "decide"}


def edit(n: str, op: str, **fields: str) -> dict:
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": "s", "op": op, **fields}


JOURNAL_BEFORE = [
    edit("j1", "identity_add", file="user.md", entry="likes tea"),
    edit("j2", "note", trust="trusted", entry="the NAS is at 10.0.0.5"),
    edit("j3", "note", trust="untrusted", entry="a page said so"),
]
JOURNAL_AFTER = [
    edit("j4", "identity_add", file="user.md", entry="likes rain"),
    edit("j5", "identity_remove", file="user.md", entry="likes tea"),
    edit("j6", "note", trust="untrusted", entry="another page said so"),
]
# Where each item goes by its labels: the clean session a, b tainted from its turn 2, c from
# its first, d and e clean (e's turn open at the change), w decided after waiting for brokerd.
EXPECTED = {
    "turn:a:1": TRUSTED,
    "turn:a:2": TRUSTED,
    "turn:a:3": TRUSTED,
    "turn:b:1": TRUSTED,
    "turn:b:2": UNTRUSTED_WS,
    "turn:b:3": UNTRUSTED_WS,
    "turn:c:1": UNTRUSTED_WS,
    "turn:c:2": UNTRUSTED_WS,
    "turn:d:1": TRUSTED,
    "turn:e:1": TRUSTED,
    "turn:w:1": TRUSTED,
    "edit:j1": TRUSTED,
    "edit:j2": TRUSTED,
    "edit:j3": FLEET,
    "edit:j4": TRUSTED,
    "edit:j5": TRUSTED,
    "edit:j6": FLEET,
}
LIVE_CONCLUSIONS = ["likes rain", "the NAS is at 10.0.0.5"]
FLEET_NOTES = ["a page said so", "another page said so"]


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def session(name: str, turns: range, tainted_from: int | None = None) -> bytes:
    records = []
    for n in turns:
        records += turn_lines(
            n,
            f"text {name}{n}",
            f"reply {name}{n}",
            results=UNTRUSTED if tainted_from is not None and n >= tainted_from else None,
        )
    return lines_bytes(records)


@contextmanager
def a_busy_home(monkeypatch):
    """A home where every state file is written and there is work in every state: items
    sent, items pending (two a send), a turn waiting for brokerd, a turn half written."""
    with (
        fresh_home(monkeypatch) as home,
        FakeHoncho() as honcho,
        StubBrokerd(home / "run" / "memory-broker" / "state.sock") as brokerd,
    ):
        (home.parent / "bxmem.toml").write_text(honcho_config(honcho.url, batch=2))
        logs = home / "logs"
        for name, tainted_from in (("a", None), ("b", 2), ("c", 1)):
            (logs / f"{name}.jsonl").write_bytes(session(name, range(1, 3), tainted_from))
        (logs / "e.jsonl").write_bytes(lines_bytes(turn_lines(1, "text e1", "reply e1")[:1]))  # its user line only
        (home / "memory" / "journal.jsonl").write_bytes(lines_bytes(JOURNAL_BEFORE))
        for job in ("decide", "mirror", "send", "audit", "send"):
            run_job(job)
        brokerd.stop()
        (logs / "w.jsonl").write_bytes(session("w", range(1, 2)))
        run_job("decide")  # w's turn waits for brokerd
        brokerd.start()
        yield home, honcho


def after_the_change(home: Path) -> None:
    """New turns and edits, and the half-written turn finished: what the state must not hide."""
    logs = home / "logs"
    append(logs / "a.jsonl", session("a", range(3, 4)))
    append(logs / "b.jsonl", session("b", range(3, 4)))
    (logs / "d.jsonl").write_bytes(session("d", range(1, 2)))
    append(logs / "e.jsonl", lines_bytes(turn_lines(1, "text e1", "reply e1")[1:]))
    append(home / "memory" / "journal.jsonl", lines_bytes(JOURNAL_AFTER))


# --- what must hold -------------------------------------------------------------------------------


def ledger_events(home: Path) -> list[dict]:
    return [json.loads(line) for line in (home / "memory" / "honcho.jsonl").read_bytes().splitlines()]


def texts_of(home: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for log in (home / "logs").glob("*.jsonl"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record["type"] in ("user", "assistant") and record.get("final", True):
                out.setdefault(f"turn:{log.stem}:{record['turn']}", set()).add(record["text"])
    return out


def check(home: Path, honcho: FakeHoncho) -> None:
    events = ledger_events(home)
    decided = Counter(e["item"] for e in events if e["ev"] == "decided")
    assert decided == Counter(list(EXPECTED)), decided  # every turn and edit, each once
    for e in events:
        if e["ev"] == "decided":
            assert e["ws"] == EXPECTED[e["item"]], e  # where its labels send it
    texts = texts_of(home)
    turn_parts: Counter[tuple[str, int]] = Counter()
    for m in honcho.messages:
        item = m["metadata"].get("bxmem_item", "")
        if item.startswith("turn:"):
            assert m["workspace_id"] == EXPECTED[item], (item, m["workspace_id"])
            assert m["content"] in texts[item], (item, m["content"])  # never another turn's text
            turn_parts[item, m["metadata"]["part"]] += 1
    assert max(turn_parts.values()) == 1, [p for p, n in turn_parts.items() if n > 1]  # nothing twice
    assert {item for item, part in turn_parts if part == 0} == {i for i in EXPECTED if i.startswith("turn:")}
    assert sorted(c["content"] for c in honcho.conclusions_in(TRUSTED)) == LIVE_CONCLUSIONS
    assert not honcho.conclusions_in(UNTRUSTED_WS) and not honcho.conclusions_in(FLEET)
    assert sorted(m["content"] for m in honcho.messages_in(FLEET)) == FLEET_NOTES
    assert not any(
        m["workspace_id"] == TRUSTED and not str(m["metadata"].get("bxmem_item", "")).startswith("turn:")
        for m in honcho.messages
    )


def state_file_changed(monkeypatch, name: str, how: str, draw: Draws) -> None:
    with a_busy_home(monkeypatch) as (home, honcho):
        state = home / "memory" / "bxmem"
        present = sorted(p.name for p in state.iterdir() if not p.name.endswith(("-wal", "-shm")))
        assert present == STATE_FILES, present
        path = state / name
        before = path.read_bytes()
        after = change(before, how, draw)
        rewrite_in_place(path, after)
        after_the_change(home)
        said: list[str] = []
        for job in ("decide", "mirror", "send", "send", "send", "send", "send", "sync", "audit", "decide", "mirror"):
            _code, lines = run_job(job)
            if job == SAID_BY.get(name) and not said:
                said = [line for line in lines if str(path) in line]
        later = time.time() + 96  # past any in-doubt wait, as the timers would come to it
        with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(later)), tick=True):
            for _ in range(4):
                run_job("send")
        check(home, honcho)
        if name in SAID_BY and after != before:
            assert len(said) == 1, (said, how)  # noticed, said once, naming the file
            assert "state-rewritten" in said[0] or "without a checksum" in said[0], said


# The fast tier: each kind on the files it matters most for, and the example (a
# decided range widened) on decide.json; seeded, so the same bytes each run.
FAST_CASES = [
    ("decide.json", "widen"),
    ("decide.json", "edit"),
    ("decide.json", "swap"),
    ("mirror.json", "edit"),
    ("mirror.json", "cut-and-pad"),
    ("outbox.marshal", "flip"),
    ("config.marshal", "repeat"),
    ("workspace-roles.json", "edit"),
    ("audit.json", "overwrite"),
    ("last-run-send.json", "edit"),
    ("entry.key", "flip"),
    ("index.sqlite3", "overwrite"),
    ("idle-decide.marshal", "cut-and-pad"),
]


@pytest.mark.parametrize(("name", "how"), FAST_CASES, ids=[f"{n} {h}" for n, h in FAST_CASES])
def test_a_state_file_changed_in_place_fast(monkeypatch, name, how):
    state_file_changed(monkeypatch, name, how, Draws(random.Random(f"{name} {how}")))


@pytest.mark.slow
@FULL
@given(name=st.sampled_from(STATE_FILES), how=st.sampled_from(KINDS), data=st.data())
def test_any_state_file_changed_in_place_at_any_byte(monkeypatch, name, how, data):
    state_file_changed(monkeypatch, name, how, Draws(data))


def test_the_changes_change_what_they_say():
    """The changes themselves, on bytes whose answer is known: a check of the checker."""
    rng = Draws(random.Random(1))
    state = dumps({"v": 2, "logs": {"a": {"decided": [[1, 2]], "offset": 10}}})
    assert json.loads(change(state, "widen", rng))["logs"]["a"]["decided"][0][0] == 1
    assert json.loads(change(state, "widen", rng))["logs"]["a"]["decided"][0][1] > 2
    for how in ("flip", "overwrite", "cut-and-pad", "swap"):
        assert len(change(state, how, rng)) == len(state), how  # in place, the same size
    swapped = {change(b"1,2,3,4,5,6", "swap", Draws(random.Random(seed))) for seed in range(20)}
    assert len(swapped) > 1 and all(sorted(s.split(b",")) == [b"1", b"2", b"3", b"4", b"5", b"6"] for s in swapped)
    assert re.fullmatch(
        rb'\{"v":-?\d+,"logs":\{"a":\{"decided":\[\[-?\d+,-?\d+\]\],"offset":-?\d+\}\}\}', change(state, "edit", rng)
    )


def test_every_json_state_file_is_sealed(monkeypatch):
    """What makes any change seen: each JSON file a run of every job leaves carries its seal."""
    with a_busy_home(monkeypatch) as (home, _honcho):
        for path in sorted((home / "memory" / "bxmem").glob("*.json")):
            assert path.read_bytes().startswith(b'{"seal":"'), path.name


def as_an_older_bxmem_wrote(path: Path) -> bytes:
    """A sealed JSON state file as bxmem 0.1.0 wrote it: the same object without its seal
    (compact; the last-run records with sorted keys and the default separators)."""
    value = json.loads(path.read_bytes())
    del value["seal"]
    return json.dumps(value, sort_keys=True).encode() if path.name.startswith("last-run-") else dumps(value)


def test_state_files_an_older_bxmem_wrote_are_rebuilt_once_losing_nothing(monkeypatch):
    """The upgrade: every JSON state file as the bxmem before the seals left it, with items
    pending, a turn waiting for brokerd, a turn half written and the idle summaries of the
    older version. The first run of each job is a real one (the summaries' version), which
    rebuilds its state once, says so at info (no warning: nothing went wrong), and seals
    it; nothing is lost, decided twice or misrouted."""
    import marshal

    from helpers import bxmem_main

    from bxmem.start.marshal_seal import seal, unmarshal

    with a_busy_home(monkeypatch) as (home, honcho):
        state = home / "memory" / "bxmem"
        for path in sorted(state.glob("*.json")):
            path.write_bytes(as_an_older_bxmem_wrote(path))
        for path in sorted(state.glob("idle-*.marshal")):
            summary = unmarshal(path.read_bytes())
            if "version" in summary:
                path.write_bytes(seal(marshal.dumps({**summary, "version": 5})))  # what bxmem 0.1.0 writes
        said: list[str] = []
        for job in ("decide", "mirror", "send"):  # as the timers run them: the idle check first
            result = bxmem_main(job)
            said += result.stderr.splitlines()
        assert not [line for line in said if "warning" in line and "memory/bxmem/" in line], said
        for name in ("decide.json", "mirror.json"):
            about = [line for line in said if f"{name}: written without a checksum" in line]
            assert len(about) == 1, (name, said)
        after_the_change(home)
        for job in ("decide", "mirror", "send", "send", "send", "send", "send", "sync", "audit"):
            _code, lines = run_job(job)
            assert not [line for line in lines if "without a checksum" in line and "audit.json" not in line], lines
        later = time.time() + 96
        with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(later)), tick=True):
            for _ in range(4):
                run_job("send")
        check(home, honcho)
        for path in sorted(state.glob("*.json")):
            assert path.read_bytes().startswith(b'{"seal":"'), path.name  # sealed by the first write since
