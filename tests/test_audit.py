"""`bxmem audit`: tampering with the fake server's contents is found, by kind."""

from __future__ import annotations

import json

import pytest
from helpers import bxmem_main, sample_sent


@pytest.fixture
def synced(home, brokerd, honcho, configure):
    return sample_sent(home, brokerd, honcho, configure)


def audit():
    result = bxmem_main("audit", "--json")
    return result.returncode, json.loads(result.stdout)


def kinds(report):
    return sorted(
        (d["kind"], d.get("item") or d.get("conclusion") or d.get("message")) for d in report["discrepancies"]
    )


def test_a_clean_sync_audits_clean(synced):
    code, report = audit()
    assert code == 0 and report["discrepancies"] == []
    assert report["messages"] == 13 and report["conclusions"] == 3


def test_duplicate_missing_and_foreign_messages_are_found(synced):
    with synced.lock:
        trusted = [m for m in synced.messages if m["workspace_id"] == "bm0-trusted"]
        synced.messages.append({**trusted[0], "id": "dup-1"})
        synced.messages.remove(trusted[2])
        synced.messages.append({**trusted[1], "id": "foreign-1", "metadata": {}})
    code, report = audit()
    assert code == 4
    got = {d["kind"] for d in report["discrepancies"]}
    assert got == {"duplicate", "missing", "foreign-agent-message"}


def test_an_untrusted_turn_in_the_trusted_workspace_is_misrouted(synced):
    with synced.lock:
        for m in synced.messages:
            if m["metadata"].get("bxmem_item") == "turn:s-fetched:1":
                m["workspace_id"] = "bm0-trusted"
                m["session_id"] = "s-clean"
    _, report = audit()
    assert ("misrouted", "turn:s-fetched:1") in kinds(report)
    assert ("missing", "turn:s-fetched:1") in kinds(report)
    # One item, one finding of each kind, however many of its parts say it (it has two).
    ids = [d["id"] for d in report["discrepancies"]]
    assert len(ids) == len(set(ids)) and kinds(report).count(("misrouted", "turn:s-fetched:1")) == 1


def test_conclusions_are_held_against_live_entries(synced):
    with synced.lock:
        victim = next(iter(synced.conclusions))
        del synced.conclusions[victim]
        synced.conclusions["extra-1"] = {
            "id": "extra-1",
            "content": "x",
            "observer_id": "kyle",
            "observed_id": "kyle",
            "session_id": "s-clean",
            "workspace_id": "bm0-trusted",
            "level": "explicit",
            "created_at": "2026-01-01T00:00:00Z",
            "source_ids": None,
            "times_derived": None,
        }
    _, report = audit()
    assert ("missing-conclusion", victim) in kinds(report) and ("unexpected-conclusion", "extra-1") in kinds(report)


def test_audit_never_prints_text(synced):
    result = bxmem_main("audit")
    assert "backups" not in result.stdout and "no discrepancies" in result.stdout
