"""Fuzzing, at the byte level, of everything local bxmem reads: session logs,
memoryd's journal, brokerd's replies (from a real Unix socket that answers
the fuzzed bytes) and bxmem's own state files.

Every job runs through the CLI's one error boundary (cli.run_cli), as the
timer runs it, and must:

* exit with a code docs/cli.md's table gives that command (never a traceback);
* say each problem on one line of its own, and no line twice;
* do bounded work, counted, not timed: no more lines and bytes read from a
  file than it holds (twice, when a rewrite under the cursor makes it read a
  log again from its start), one brokerd question per session (a hang
  detector, SIGALRM at 60 s, catches what counting cannot);
* stop nothing else: a clean session beside a fuzzed one is decided, trusted,
  and no item is decided or sent twice.

`*_fast` run a few examples in the fast tier; the others (slow) many more,
in CI and `./dev test --all`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from fake_honcho import FakeHoncho
from helpers import PLANTED_ENV_KEY, bxmem_inprocess, examples, honcho_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines
from bxmem.errors import COMMAND_EXITS
from bxmem.sources import brokerd as brokerd_module
from bxmem.sources import jsonline

FAST = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
FULL = settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))


def lines_bytes(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


# --- byte-level damage ---------------------------------------------------------------------------

NASTY = [
    b"\x00",
    b"\xff",
    b"\xed\xa0\x80",
    b"\n",
    b"\r",
    b"[" * 1100,
    b'{"a":' * 300,
    b'"',
    b"\\",
    b"}",
    b"]",
    b'"turn":"1"',
    b'"untrusted":true',
    b'"type":5',
    b"x" * 3000,
]


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """`data` with a few byte-level edits: flips, cuts, inserts, repeats, deletions."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 5))):
        # A place as a fraction of the length, so that what is drawn never depends on the
        # bytes given (a state file's inodes and times differ from one example to the next).
        at = draw(st.integers(0, 1 << 16)) * len(out) >> 16
        how = draw(st.sampled_from(["flip", "insert", "delete", "repeat", "nasty", "truncate"]))
        if how == "flip":
            bit = draw(st.integers(0, 7))
            if at < len(out):
                out[at] ^= 1 << bit
        elif how == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif how == "delete":
            del out[at : at + draw(st.integers(1, 60))]
        elif how == "repeat":
            out[at:at] = out[max(0, at - 200) : at]
        elif how == "nasty":
            out[at:at] = draw(st.sampled_from(NASTY))
        elif how == "truncate":
            del out[at:]
    return bytes(out)


def session_log(n_turns: int = 3) -> bytes:
    records = []
    for n in range(1, n_turns + 1):
        results = [{"untrusted": n == 2, "class": "public"}] if n % 2 == 0 else None
        records += turn_lines(n, f"question {n}", f"answer {n}", results=results)
    return lines_bytes(records)


def journal_bytes() -> bytes:
    edits = [
        {"id": "j1", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "likes tea"},
        {"id": "j2", "ts": "t", "session": "s", "op": "note", "trust": "trusted", "entry": "the NAS is at 10.0.0.5"},
        {
            "id": "j3",
            "ts": "t",
            "session": "s",
            "op": "identity_replace",
            "file": "user.md",
            "old": "likes tea",
            "entry": "likes coffee",
        },
        {"id": "j4", "ts": "t", "session": "s", "op": "note", "trust": "untrusted", "entry": "a page said so"},
        {"id": "j5", "ts": "t", "session": "owner", "op": "undo", "target": "j2"},
    ]
    return lines_bytes(edits)


# --- running the jobs, and what must hold ------------------------------------------------------------


class Hung(BaseException):
    """A job that never returned (not an OSError, so nothing in bxmem catches it)."""


@contextmanager
def hang_detector(seconds: int = 60):
    def alarm(*_args):
        raise Hung(f"a job ran for {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class Work:
    """What the readers did: lines and bytes per file, brokerd questions."""

    def __init__(self, monkeypatch) -> None:
        self.lines: Counter = Counter()
        self.bytes: Counter = Counter()
        self.questions = 0
        real_lines, real_ask = jsonline.complete_lines, brokerd_module.session_state

        def counted_lines(f, pos, **kwargs):
            for line in real_lines(f, pos, **kwargs):
                self.lines[f.name] += 1
                self.bytes[f.name] += line.end - line.start
                yield line

        def counted_ask(*args, **kwargs):
            self.questions += 1
            return real_ask(*args, **kwargs)

        from bxmem.sources import journal, loopd

        for module in (jsonline, loopd, journal):
            monkeypatch.setattr(module, "complete_lines", counted_lines)
        monkeypatch.setattr(brokerd_module, "session_state", counted_ask)

    def reset(self) -> None:
        self.lines.clear()
        self.bytes.clear()
        self.questions = 0

    def within(self, files: list[Path]) -> None:
        """No file read past twice its size, nor more lines than it has (twice, with the
        bounded pieces of an over-long line)."""
        for path in files:
            if not path.exists():
                continue
            data = path.read_bytes()
            name = str(path)
            assert self.bytes[name] <= 2 * len(data), (name, self.bytes[name], len(data))
            pieces = data.count(b"\n") + 1
            assert self.lines[name] <= 2 * pieces, (name, self.lines[name], pieces)


def run_job(*args: str) -> tuple[int, list[str]]:
    """A job through the CLI's error boundary; its exit code must be one its table gives."""
    with hang_detector():
        result = bxmem_inprocess(*args)
    command = " ".join(a for a in args if not a.startswith("-"))
    allowed = COMMAND_EXITS[command if command in COMMAND_EXITS else args[0]]
    assert result.returncode in allowed, (args, result.returncode, result.stderr[-800:])
    lines = result.stderr.splitlines()
    assert not any("Traceback" in line for line in lines), result.stderr[-2000:]
    for line in lines:
        assert line.startswith("bxmem"), line  # every line is one of bxmem's, whole
    repeated = [line for line, n in Counter(lines).items() if n > 1]
    assert not repeated, repeated  # a problem is said once
    assert PLANTED_ENV_KEY not in result.stdout + result.stderr
    return result.returncode, lines


@contextmanager
def fresh_home(monkeypatch, honcho_url: str = "http://127.0.0.1:9"):
    """A home of its own per example (hypothesis runs many in one test)."""
    tmp = Path(tempfile.mkdtemp(prefix="fz", dir="/tmp"))
    try:
        home = tmp / "home"
        (home / "logs").mkdir(parents=True)
        (home / "memory").mkdir()
        config = tmp / "bxmem.toml"
        config.write_text(honcho_config(honcho_url))
        monkeypatch.setenv("BOXMAKER_HOME", str(home))
        monkeypatch.setenv("BXMEM_CONFIG", str(config))
        yield home
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def decided(home: Path) -> Counter:
    from bxmem.store.ledger import Ledger

    events = Ledger(home / "memory" / "honcho.jsonl").read_from(0).events
    return Counter(e["item"] for e in events if e["ev"] == "decided")


# --- logs ----------------------------------------------------------------------------------------


def check_log(monkeypatch, data: bytes, split: int) -> None:
    with fresh_home(monkeypatch) as home, StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        work = Work(monkeypatch)
        fuzzed, clean = home / "logs" / "fz.jsonl", home / "logs" / "clean.jsonl"
        fuzzed.write_bytes(data[:split])
        clean.write_bytes(lines_bytes(turn_lines(1, "fine", "yes")))
        run_job("decide")
        work.within([fuzzed, clean])
        with open(fuzzed, "ab") as f:
            f.write(data[split:])
        work.reset()
        run_job("decide")
        work.within([fuzzed, clean])
        assert work.questions <= 2
        run_job("sync")
        run_job("recall", "question")
        counts = decided(home)
        assert counts["turn:clean:1"] == 1 and max(counts.values()) == 1


@FAST
@given(data=st.data())
def test_logs_fast(monkeypatch, data):
    raw = data.draw(mutated(session_log()))
    check_log(monkeypatch, raw, data.draw(st.integers(0, len(raw))))


@pytest.mark.slow
@FULL
@given(data=st.data())
def test_logs(monkeypatch, data):
    raw = data.draw(mutated(session_log(data.draw(st.integers(1, 6)))))
    check_log(monkeypatch, raw, data.draw(st.integers(0, len(raw))))


# --- the journal -----------------------------------------------------------------------------------


def check_journal(monkeypatch, data: bytes, split: int) -> None:
    with fresh_home(monkeypatch) as home:
        work = Work(monkeypatch)
        journal = home / "memory" / "journal.jsonl"
        journal.write_bytes(data[:split])
        run_job("mirror")
        work.within([journal])
        with open(journal, "ab") as f:
            f.write(data[split:])
        work.reset()
        run_job("mirror")
        work.within([journal])
        run_job("undo", "--dry-run", "j1")
        run_job("index", "rebuild")
        run_job("recall", "coffee")
        counts = decided(home)
        assert not counts or max(counts.values()) == 1
        # An edit whose line came through whole is mirrored, whatever is next to it, unless
        # another line names its id (a repeated id is skipped: the first one stands).
        fuzzed_lines = data.split(b"\n")[:-1]  # complete lines: one with no newline yet is left for later
        for line in journal_bytes().split(b"\n")[:-1]:
            edit_id = json.loads(line)["id"]
            if line in fuzzed_lines and data.count(f'"id": "{edit_id}"'.encode()) == 1:
                assert counts[f"edit:{edit_id}"] == 1, (edit_id, data[:400])


@FAST
@given(data=st.data())
def test_the_journal_fast(monkeypatch, data):
    raw = data.draw(mutated(journal_bytes()))
    check_journal(monkeypatch, raw, data.draw(st.integers(0, len(raw))))


@pytest.mark.slow
@FULL
@given(data=st.data())
def test_the_journal(monkeypatch, data):
    raw = data.draw(mutated(journal_bytes()))
    check_journal(monkeypatch, raw, data.draw(st.integers(0, len(raw))))


# --- brokerd's replies ------------------------------------------------------------------------------

GOOD_REPLY = b'{"SessionStateReply":{"class":"private","untrusted":false}}\n'


def strictly_clean(reply: bytes) -> bool:
    """Whether the reply says, beyond doubt, what a trusted decision needs: an independent
    strict read (one JSON line, no key twice, the documented shape)."""

    def no_duplicates(pairs):
        if len({k for k, _v in pairs}) != len(pairs):
            raise ValueError("a key twice")
        return dict(pairs)

    try:
        value = json.loads(reply.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (ValueError, RecursionError):
        return False
    body = value.get("SessionStateReply") if isinstance(value, dict) else None
    return (
        isinstance(body, dict)
        and body.get("untrusted") is False
        and type(body.get("untrusted")) is bool
        and body.get("class") in ("public", "private")
    )


def check_broker(monkeypatch, reply: bytes) -> None:
    with fresh_home(monkeypatch) as home:
        stub = StubBrokerd(home / "run" / "memory-broker" / "state.sock").start()
        try:
            stub.raw_reply = reply
            work = Work(monkeypatch)
            (home / "logs" / "s.jsonl").write_bytes(lines_bytes(turn_lines(1, "q", "a")))
            code, _lines = run_job("decide")
            assert work.questions == 1
            counts = decided(home)
            if not counts:
                assert code == 3  # brokerd could not answer: the turn waits, said
            if counts:
                from bxmem.store.ledger import Ledger

                ev = Ledger(home / "memory" / "honcho.jsonl").read_from(0).events[0]
                assert ev["role"] != "trusted" or strictly_clean(reply), (reply[:200], ev)
            run_job("sync")
        finally:
            stub.stop()


replies = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda b: b + b"\n", st.binary(max_size=5000)),
    st.just(GOOD_REPLY).flatmap(lambda good: mutated(good)),
    st.integers(1, 100_000).map(lambda n: b"[" * n + b"\n"),
)


@FAST
@given(reply=replies)
def test_brokerd_replies_fast(monkeypatch, reply):
    check_broker(monkeypatch, reply)


@pytest.mark.slow
@FULL
@given(reply=replies)
def test_brokerd_replies(monkeypatch, reply):
    check_broker(monkeypatch, reply)


# --- bxmem's own state files -------------------------------------------------------------------------

STATE_FILES = [
    "decide.json",
    "mirror.json",
    "outbox.marshal",
    "config.marshal",
    "idle-decide.marshal",
    "idle-mirror.marshal",
    "idle-send.marshal",
    "idle-decide-dormant.marshal",
    "entry.key",
    "index.sqlite3",
    "workspace-roles.json",
]


def check_state(monkeypatch, checker, name: str, draw_bytes) -> None:
    with (
        fresh_home(monkeypatch) as home,
        FakeHoncho(checker=checker) as honcho,
        StubBrokerd(home / "run" / "memory-broker" / "state.sock"),
    ):
        (home.parent / "bxmem.toml").write_text(honcho_config(honcho.url))
        for n in range(3):
            (home / "logs" / f"s{n}.jsonl").write_bytes(session_log(2))
        for n in (1, 2):  # written to two hours ago: dormant, listed apart (idle-decide-dormant.marshal)
            os.utime(home / "logs" / f"s{n}.jsonl", (time.time() - 7200, time.time() - 7200))
        (home / "memory" / "journal.jsonl").write_bytes(journal_bytes())
        for job in ("decide", "mirror", "send", "send"):
            run_job(job)
        path = home / "memory" / "bxmem" / name
        assert path.exists(), name
        with open(path, "r+b") as f:  # in place, as the owner's hands would (the file keeps its inode)
            damaged = draw_bytes(f.read())
            f.seek(0)
            f.write(damaged)
            f.truncate()
        with open(home / "logs" / "s0.jsonl", "ab") as f:
            f.write(lines_bytes(turn_lines(3, "more", "yes")))
        work = Work(monkeypatch)
        for job in ("decide", "mirror", "send", "send", "sync", "audit"):
            run_job(job)
        run_job("recall", "question")
        work.within(sorted((home / "logs").glob("*.jsonl")) + [home / "memory" / "journal.jsonl"])
        counts = decided(home)
        assert max(counts.values()) == 1 and counts["turn:s0:3"] == 1
        parts = Counter((m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in honcho.messages)
        assert parts[("turn:s0:3", 0)] == 1 and max(parts.values()) == 1  # sent, and nothing twice
        assert not honcho.violations


def _damage(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        how = rng.choice(["flip", "truncate", "insert", "garbage"])
        at = rng.randint(0, max(0, len(out) - 1))
        if how == "flip" and out:
            out[at] ^= 1 << rng.randint(0, 7)
        elif how == "truncate":
            del out[at:]
        elif how == "insert":
            out[at:at] = rng.randbytes(rng.randint(1, 20))
        else:
            out = bytearray(rng.randbytes(rng.randint(0, 64)))
    return bytes(out)


@pytest.mark.parametrize("name", STATE_FILES)
def test_state_files_fast(monkeypatch, openapi_checker, name):
    rng = random.Random(name)
    check_state(monkeypatch, openapi_checker, name, lambda data: _damage(data, rng))


@pytest.mark.slow
@FULL
@given(name=st.sampled_from(STATE_FILES), data=st.data())
def test_state_files(monkeypatch, openapi_checker, name, data):
    check_state(monkeypatch, openapi_checker, name, lambda raw: data.draw(mutated(raw)))
