"""A job's lock survives the deletion of memory/bxmem/ (a cache the owner may
delete at any time), tested with real second processes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter

import pytest
from helpers import ROOT, ledger_events, run_bxmem, write_log

from bxmem.commands import decide
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.store.files import JobLock

HOLD = """
import sys, time
from pathlib import Path
from bxmem.store.files import JobLock
lock = JobLock(Path(sys.argv[1]), sys.argv[2])
assert lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def holder(ledger, job: str, seconds: float = 30.0) -> subprocess.Popen:
    """Another process that holds `job`'s lock until it is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ledger), job, str(seconds)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.slow  # real processes, a send slowed to seconds
def test_deleting_the_state_folder_during_a_slow_send_does_not_let_a_second_send_post_again(
    home, brokerd, honcho, configure
):
    configure(honcho.url, batch=4)
    for s in range(4):
        write_log(home, f"s{s}", turn_lines(1, f"question {s}", f"answer {s}"))
    decide.run(config_module.load())
    honcho.latency = 0.5  # a slow Honcho: the first send takes seconds
    first = subprocess.Popen(
        [sys.executable, "-m", "bxmem", "send"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: any(r.path.endswith("/messages") for r in honcho.requests))
        shutil.rmtree(home / "memory" / "bxmem")  # the interfaces allow it: it is a cache
        second = run_bxmem("send")
        assert second.returncode == 0 and "another send is running" in second.stderr, second.stderr
        _out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    parts = Counter((m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in honcho.messages)
    assert parts == Counter({(f"turn:s{s}:1", p): 1 for s in range(4) for p in range(2)}), parts
    assert len([e for e in ledger_events(home) if e["ev"] == "sent"]) == 4
    assert (home / "memory" / "bxmem" / "outbox.marshal").exists()  # the first run saved into a folder made again


@pytest.mark.parametrize("job", ["decide", "mirror", "send"])
def test_each_jobs_lock_is_held_by_another_process_across_a_deleted_state_folder(home, brokerd, honcho, configure, job):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    write_journal(
        home,
        [
            {
                "id": "e1",
                "ts": "2026-09-27T10:00:00Z",
                "session": "s",
                "op": "note",
                "trust": "untrusted",
                "entry": "a note",
            }
        ],
    )
    (home / "memory" / "bxmem").mkdir(parents=True, exist_ok=True)
    if job == "send":
        decide.run(config_module.load())
    proc = holder(home / "memory" / "honcho.jsonl", job)
    try:
        shutil.rmtree(home / "memory" / "bxmem")
        result = run_bxmem(job, "--json")
        assert result.returncode == 0 and '"busy": true' in result.stdout, (result.stdout, result.stderr)
        # The other jobs are not held up by it.
        for other in {"decide", "mirror", "send"} - {job}:
            assert '"busy": false' in run_bxmem(other, "--json").stdout
    finally:
        proc.kill()
        proc.wait()
    assert '"busy": false' in run_bxmem(job, "--json").stdout  # released when its holder died (SIGKILL)


def test_the_lock_does_not_hold_up_the_ledger_appends_of_its_own_run(home):
    ledger = home / "memory" / "honcho.jsonl"
    ledger.parent.mkdir(parents=True)
    with JobLock(ledger, "decide") as lock:
        assert lock.acquire()
        from bxmem.store.ledger import Ledger

        Ledger(ledger).append([{"v": 1, "ev": "created", "ts": "t", "ws": "w", "what": "peer", "id": "p"}])
        assert not JobLock(ledger, "decide").acquire()  # a second open file description: refused
        with JobLock(ledger, "send") as other:
            assert other.acquire()  # another job's byte
    assert ledger.stat().st_size > 0
    with JobLock(ledger, "decide") as again:
        assert again.acquire()
