"""Properties over the owner's hands and the clock (issue 28): any in-place change of the
ledger at any byte (an edit, a cut, a copy back of an older version, lines moved), and
any clock step, forward or back, before any job. Each example is a home of its own with
a fake Honcho; every job runs through the CLI's error boundary.

What must hold whatever the change: every job and command exits with a code its table
gives and no traceback; no message part is in Honcho twice; no turn's text is sent
under another item, nor to a workspace neither its decision nor the ledger as the owner
left it names; a turn written after the change is sent, once. After a change that keeps
the ledger's lines (an older copy, lines moved) nothing is lost either: every turn
decided to go somewhere is there, once. After any clock step, once the clock is right
again no run waits longer than its own bound: a few runs drain everything.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from fake_honcho import FakeHoncho
from freezegun import freeze_time
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_local import fresh_home, lines_bytes, mutated, run_job

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines

FAST = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
FULL = settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
UNTRUSTED = [{"untrusted": True, "class": "public"}]


def texts_of(home: Path) -> dict[str, set[str]]:
    """Every text each turn item may carry, from the logs: (session, turn) -> texts."""
    out: dict[str, set[str]] = {}
    for log in (home / "logs").glob("*.jsonl"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record["type"] in ("user", "assistant") and record.get("final", True):
                out.setdefault(f"turn:{log.stem}:{record['turn']}", set()).add(record["text"])
    return out


def decisions(ledger: Path) -> dict[str, str | None]:
    """Each item's first decision's workspace, as the ledger holds it now."""
    out: dict[str, str | None] = {}
    for line in ledger.read_bytes().splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and ev.get("ev") == "decided" and isinstance(ev.get("item"), str):
            out.setdefault(ev["item"], ev.get("ws"))
    return out


def write_sessions(home: Path) -> None:
    for s, tainted_from in (("a", None), ("b", 2), ("c", 1)):
        records = []
        for n in (1, 2):
            records += turn_lines(
                n, f"text {s}{n}", f"reply {s}{n}", results=UNTRUSTED if tainted_from and n >= tainted_from else None
            )
        (home / "logs" / f"{s}.jsonl").write_bytes(lines_bytes(records))


def rewrite_in_place(path: Path, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()


def check_honcho(honcho: FakeHoncho, home: Path, decided_before: dict, ledger_now: dict) -> Counter:
    texts = texts_of(home)
    parts = Counter(
        (m["metadata"]["bxmem_item"], m["metadata"]["part"])
        for m in honcho.messages
        if str(m["metadata"].get("bxmem_item", "")).startswith("turn:")
    )
    assert max(parts.values(), default=1) == 1, [p for p, n in parts.items() if n > 1]
    for m in honcho.messages:
        item = m["metadata"].get("bxmem_item", "")
        if not item.startswith("turn:"):
            continue
        assert m["content"] in texts[item], (item, m["content"])  # never another turn's text under this item
        assert m["workspace_id"] in {decided_before.get(item), ledger_now.get(item)}, (item, m["workspace_id"])
    return Counter(item for item, part in parts if part == 0)


@contextmanager
def sessions_and_honcho(monkeypatch):
    """A home of its own with three sessions' logs (clean, tainted part-way, tainted), brokerd and a fake Honcho."""
    with (
        fresh_home(monkeypatch) as home,
        FakeHoncho() as honcho,
        StubBrokerd(home / "run" / "memory-broker" / "state.sock"),
    ):
        (home.parent / "bxmem.toml").write_text(
            (home.parent / "bxmem.toml").read_text().replace("http://127.0.0.1:9", honcho.url) + "\n[send]\nbatch = 2\n"
        )
        write_sessions(home)
        yield home, honcho


def the_ledger_changed(monkeypatch, change) -> None:
    with sessions_and_honcho(monkeypatch) as (home, honcho):
        ledger = home / "memory" / "honcho.jsonl"
        copies = []
        for job in ("decide", "send", "decide", "send"):
            copies.append(ledger.read_bytes() if ledger.exists() else b"")
            run_job(job)
        decided_before = decisions(ledger)
        honcho.stop()
        run_job("send")  # an outage: what is pending waits through the change
        keeps_lines = change(ledger, copies)
        honcho.start()
        with open(home / "logs" / "a.jsonl", "ab") as f:
            f.write(lines_bytes(turn_lines(3, "text a3", "reply a3")))
        for job in ("decide", "sync", "outbox list", "decide", "send", "send", "send", "send", "send", "sync", "audit"):
            run_job(*job.split())
        later = time.time() + 96  # past any in-doubt wait, as the timers would come to it
        with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(later)), tick=True):
            for _ in range(4):
                run_job("send")
        sent = check_honcho(honcho, home, decided_before, decisions(ledger))
        assert sent["turn:a:3"] == 1
        if keeps_lines:
            for item, ws in decided_before.items():
                if ws:
                    assert sent[item] == 1, (item, ws)


def restore_or_move(rng: random.Random):
    def change(ledger: Path, copies: list[bytes]) -> bool:
        lines = ledger.read_bytes().splitlines(keepends=True)
        how = rng.choice(["restore", "sort", "reverse", "shuffle", "swap"])
        if how == "restore":
            data = rng.choice(copies)
        elif how == "sort":
            data = b"".join(sorted(lines))
        elif how == "reverse":
            data = b"".join(reversed(lines))
        else:
            if how == "shuffle":
                rng.shuffle(lines)
            elif len(lines) > 1:
                i, j = rng.sample(range(len(lines)), 2)
                lines[i], lines[j] = lines[j], lines[i]
            data = b"".join(lines)
        rewrite_in_place(ledger, data)
        return True

    return change


@pytest.mark.parametrize("seed", range(4))
def test_the_ledger_copied_back_or_its_lines_moved_fast(monkeypatch, seed):
    the_ledger_changed(monkeypatch, restore_or_move(random.Random(seed)))


@pytest.mark.slow
@FULL
@given(seed=st.integers(0, 2**32))
def test_the_ledger_copied_back_or_its_lines_moved(monkeypatch, seed):
    the_ledger_changed(monkeypatch, restore_or_move(random.Random(seed)))


def damage(data):
    def change(ledger: Path, _copies: list[bytes]) -> bool:
        rewrite_in_place(ledger, data.draw(mutated(ledger.read_bytes())))
        return False  # a line made unreadable may be a decision the owner's edit took away

    return change


@FAST
@given(data=st.data())
def test_any_byte_of_the_ledger_changed_in_place_fast(monkeypatch, data):
    the_ledger_changed(monkeypatch, damage(data))


@pytest.mark.slow
@FULL
@given(data=st.data())
def test_any_byte_of_the_ledger_changed_in_place(monkeypatch, data):
    the_ledger_changed(monkeypatch, damage(data))


# --- the clock ----------------------------------------------------------------------------

# (job, clock offset in seconds, Honcho up): after a first decide on the right clock, so
# that there is something to send, whatever order of jobs, offsets and outages.
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["decide", "mirror", "send", "send", "sync"]),
        st.sampled_from([-2 * 86400, -86400, -3600, -600, -60, 0, 60, 600, 3600, 86400, 2 * 86400]),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
).map(lambda steps: [("decide", 0, True), *steps])


def the_clock_stepped(monkeypatch, steps) -> None:
    with sessions_and_honcho(monkeypatch) as (home, honcho):
        real = time.time()
        for job, offset, honcho_up in steps:
            (
                honcho.start
                if honcho_up and honcho._server is None
                else honcho.stop
                if not honcho_up
                else (lambda: None)
            )()
            with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(real + offset)), tick=True):
                run_job(job)
        if honcho._server is None:
            honcho.start()
        # The clock is right again: runs a minute apart send everything within the backoff's
        # 10-minute bound, whatever the clock stored.
        now = time.time() + 96
        for _ in range(12):
            with freeze_time(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now)), tick=True):
                run_job("decide")
                run_job("send")
                status = json.loads(run_job_json("sync"))
            if all(ws["pending_turns"] == 0 for ws in status["workspaces"].values()):
                break
            now += 60
        assert all(ws["pending_turns"] == 0 for ws in status["workspaces"].values()), status["workspaces"]
        assert status["outage"] is None
        check_honcho(honcho, home, decisions(home / "memory" / "honcho.jsonl"), {})


def run_job_json(command: str) -> str:
    from helpers import bxmem_inprocess

    return bxmem_inprocess(command, "--json").stdout


@FAST
@given(steps=STEPS)
def test_any_clock_step_at_any_point_of_any_job_fast(monkeypatch, steps):
    the_clock_stepped(monkeypatch, steps)


@pytest.mark.slow
@FULL
@given(steps=STEPS)
def test_any_clock_step_at_any_point_of_any_job(monkeypatch, steps):
    the_clock_stepped(monkeypatch, steps)
