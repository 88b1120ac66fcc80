"""Artifact records as real processes: killed (SIGKILL) at every step of a record, and
run many at once, the same file and different ones (issue 27 rule 3, seed 002 28.3).

After a kill anywhere: no object that is not its bytes, no temporary file once its
writer is gone, no card without its decision in the ledger once reconciled, and the
decision there exactly once. At once: identical records converge on one object, one
card and one decision; different ones never take the store past its byte quota."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from artifact_helpers import ARTIFACTS, export, session, store
from helpers import ROOT, bxmem_inprocess, decisions, ledger_events

from bxmem.trust.artifact_rules import artifact_id

pytestmark = pytest.mark.slow  # dozens of real processes: CI and ./dev test --all run it

STEPS = ["opened", "read", "read-all", "copied", "published", "card-written", "appended", "done"]

# A record in a process of its own, whose checkpoint acts at one step: a SIGKILL, or a pause
# (so that records started together are all copying at once).
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from bxmem.store import artifact_ingest
    from bxmem.cli.app import run_cli
    action, at = sys.argv[1], sys.argv[2]

    def checkpoint(step):
        if step == at:
            if action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(float(action))

    artifact_ingest.checkpoint = checkpoint
    sys.exit(run_cli(sys.argv[3:]))
""")


def child(action: str, at: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, action, at, *args],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def record_args(name: str = "table.csv") -> list[str]:
    return [
        "artifact",
        "record",
        "--session",
        "s1",
        "--json",
        "--",
        name,
        "--title",
        "T",
        "--summary",
        "Cohort results.",
    ]


@pytest.fixture
def agent(home, brokerd, honcho, configure):
    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    export(home, data=os.urandom(3 << 20))  # a few pieces, so the kill can fall between them
    return home


def check_store(home) -> None:
    """Every object is its bytes; nothing temporary or pending is left; every card's
    decision is in the ledger exactly once."""
    root = store(home)
    for obj in (root / "objects").rglob("art_*"):
        assert artifact_id(hashlib.sha256(obj.read_bytes()).digest()) == obj.name, obj
    assert list((root / "tmp").iterdir()) == []
    assert list((root / "pending").iterdir()) == []
    decided = [e["item"] for e in ledger_events(home) if e["ev"] == "decided"]
    assert len(decided) == len(set(decided))
    for path in (root / "cards").glob("*.json"):
        card = json.loads(path.read_text())
        for entry in card["remote"]:
            assert entry["state"] in ("queued", "local-only") and decided.count(entry["item"]) == 1


@pytest.mark.parametrize("step", STEPS)
def test_a_record_killed_at_any_step_leaves_nothing_half_done(agent, step):
    killed = child("kill", step, *record_args())
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert bxmem_inprocess("artifact", "verify").returncode == 0  # recovers temps, queues what was cut short
    check_store(agent)
    again = bxmem_inprocess(*record_args())
    assert again.returncode == 0, again.stderr
    check_store(agent)
    assert len([i for i in decisions(agent) if i.startswith("card:")]) == 1
    assert len(list((store(agent) / "cards").glob("*.json"))) == 1
    assert len(list((store(agent) / "objects").rglob("art_*"))) == 1


def test_a_record_killed_after_its_card_is_queued_by_the_next_record_not_verify(agent):
    killed = child("kill", "card-written", *record_args())
    killed.communicate(timeout=60)
    export(agent, "other.csv", b"other")
    assert bxmem_inprocess(*record_args("other.csv")).returncode == 0
    check_store(agent)
    assert len([i for i in decisions(agent) if i.startswith("card:")]) == 2


def test_identical_records_at_once_converge_on_one_object_one_card_one_decision(agent):
    runs = [child("0.2", "read", *record_args()) for _ in range(6)]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0] * 6, [err for _out, err in outputs]
    docs = [json.loads(out) for out, _err in outputs]
    assert len({(d["experiment_id"], d["artifact_id"]) for d in docs}) == 1
    assert sum(not d["deduplicated"] for d in docs) >= 1
    check_store(agent)
    assert len(list((store(agent) / "objects").rglob("art_*"))) == 1
    assert len(list((store(agent) / "cards").glob("*.json"))) == 1
    assert len([i for i in decisions(agent) if i.startswith("card:")]) == 1


def test_records_at_once_never_take_the_store_past_its_quota(home, brokerd, honcho, configure):
    """Five 1 MiB files at once, room for two and a half: exactly two are kept, because
    each copy reserves its size under the store's lock before it starts."""
    mib = 1 << 20
    configure(honcho.url, extra=f"\n[artifacts]\nmax_total_bytes = {mib * 5 // 2}\nmax_artifact_bytes = {mib}\n")
    session(home)
    for n in range(5):
        export(home, f"f{n}", os.urandom(mib))
    runs = [child("0.5", "read", *record_args(f"f{n}")) for n in range(5)]
    outputs = [run.communicate(timeout=120) for run in runs]
    codes = sorted(run.returncode for run in runs)
    assert codes == [0, 0, 6, 6, 6], [err for _out, err in outputs]
    assert all("max_total_bytes" in err for run, (_out, err) in zip(runs, outputs, strict=True) if run.returncode)
    objects = list((store(home) / "objects").rglob("art_*"))
    assert len(objects) == 2 and sum(p.stat().st_size for p in objects) <= mib * 5 // 2
    check_store(home)
