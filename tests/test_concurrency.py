"""Many decide, mirror, send, undo and recall processes at once on one home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from helpers import ROOT, ledger_events, write_log

from bxmem.demo.sample import turn_lines, write_journal

pytestmark = pytest.mark.slow  # overlapping real jobs: CI and ./dev test --all run it


def spawn(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "bxmem", *args],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_overlapping_jobs_keep_everything_once(home, brokerd, honcho, configure):
    configure(honcho.url, batch=15)
    honcho.latency = 0.005
    recall_times, undo_codes = [], []
    for round_ in range(3):
        for s in range(8):
            write_log(home, f"c{s}", turn_lines(round_ + 1, f"round {round_} question {s}", f"answer {s}"))
        write_journal(
            home,
            [
                {
                    "id": f"e{round_}-{k}",
                    "ts": "t",
                    "session": f"c{k}",
                    "op": "identity_add",
                    "file": "memory.md",
                    "entry": f"fact {round_} {k}",
                }
                for k in range(4)
            ],
        )
        procs = [spawn(job) for job in ("decide", "mirror", "send") for _ in range(3)]
        procs += [spawn("undo", f"e{round_}-0"), spawn("undo", f"e{round_}-0")]  # an impatient owner, twice
        started = time.monotonic()
        recalls = [spawn("recall", "question", "--json") for _ in range(3)]
        for proc in recalls:
            proc.wait(timeout=60)
            recall_times.append(time.monotonic() - started)
            assert proc.returncode in (0, 7), proc.stderr.read()
        for proc in procs[-2:]:
            proc.wait(timeout=60)
            undo_codes.append(proc.returncode)
        for proc in procs[:-2]:
            proc.wait(timeout=120)
            assert proc.returncode in (0, 3), (proc.args, proc.stderr.read())
    for job in ("decide", "mirror") + ("send",) * 8:
        subprocess.run([sys.executable, "-m", "bxmem", job], cwd=ROOT, check=False, capture_output=True)

    raw = (home / "memory" / "honcho.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in raw)  # every line parses
    decided = Counter(e["item"] for e in ledger_events(home) if e["ev"] == "decided")
    assert decided and max(decided.values()) == 1
    parts = Counter((m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in honcho.messages)
    assert len(parts) == 8 * 3 * 2 and max(parts.values()) == 1
    assert sorted(undo_codes) == [0, 0, 0, 6, 6, 6]  # one undo wins, the other is refused, every round
    journal = [json.loads(line) for line in (home / "memory" / "journal.jsonl").read_text().splitlines()]
    assert Counter(r["target"] for r in journal if r["op"] == "undo") == {f"e{r}-0": 1 for r in range(3)}
    contents = sorted(c["content"] for c in honcho.conclusions.values())
    assert contents == sorted(f"fact {r} {k}" for r in range(3) for k in range(1, 4))
    assert max(recall_times) < 30  # recall never waits for the jobs' locks


def test_undo_waits_for_a_writer_holding_the_journals_flock(home, configure):
    """memoryd appends to the journal under flock (as portalocker takes it); bxmem's
    own lock is the same flock, so an undo waits for memoryd's line and comes after it."""
    configure("http://127.0.0.1:9")
    write_journal(
        home, [{"id": "e1", "ts": "t", "session": "s", "op": "identity_add", "file": "memory.md", "entry": "a fact"}]
    )
    journal = home / "memory" / "journal.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys\n"
            "f = open(sys.argv[1], 'ab')\n"
            "fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.readline()\n"
            'f.write(b\'{"id":"e2","ts":"t","session":"s","op":"note","trust":"trusted","entry":"memoryd"}\\n\')\n'
            "f.flush()\n",
            str(journal),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    undo = spawn("undo", "e1")
    time.sleep(0.5)
    assert undo.poll() is None  # waiting for the lock
    holder.stdin.write("go\n")
    holder.stdin.flush()
    holder.wait(timeout=10)
    undo.wait(timeout=60)
    assert undo.returncode == 0, undo.stderr.read()
    ids = [json.loads(line)["id"] for line in journal.read_text().splitlines()]
    assert ids[:2] == ["e1", "e2"] and len(ids) == 3  # the undo after memoryd's line
