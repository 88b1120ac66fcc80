"""Recall's order: what the local index ranks first, how sources interleave, and
which Honcho hits are near misses (docs/decisions.md says why)."""

from __future__ import annotations

from bxmem import recall
from bxmem.index import CANDIDATES, Index


def _index(tmp_path) -> Index:
    index = Index(tmp_path / "index.sqlite")
    index.db()
    return index


def test_a_replacing_identity_entry_outranks_an_old_turn_that_repeats_the_old_text(tmp_path):
    index = _index(tmp_path)
    index.add("t1", "turn", "memory", "private", "when is the dingo deploy window\nthe dingo deploy window is tuesday",
              session="s-old", ts="2026-09-01T09:00:00Z")
    index.add("m1", "identity", "identity", "private", "the dingo deploy window is thursday", file="memory.md")
    found = index.search("dingo deploy window", 8)
    assert [h.key for h in found] == ["m1", "t1"]
    assert found[1].ts == "2026-09-01T09:00:00Z"  # the old turn's hit is dated


def test_identity_comes_first_only_among_hits_holding_every_word(tmp_path):
    index = _index(tmp_path)
    index.add("m1", "identity", "identity", "private", "the dingo is a dog", file="memory.md")
    index.add("t1", "turn", "memory", "private", "the dingo deploy window", session="s")
    assert [h.key for h in index.search("dingo deploy", 8)] == ["t1", "m1"]


def test_an_old_identity_entry_is_a_candidate_however_many_newer_turns_match(tmp_path):
    index = _index(tmp_path)
    index.add("m1", "identity", "identity", "private", "backups go to the echidna nas", file="memory.md")
    db = index.db()
    db.execute("BEGIN")
    for n in range(CANDIDATES + 50):
        index.add(f"t{n}", "turn", "memory", "private", f"turn {n} about backups", session="s")
    db.execute("COMMIT")
    assert index.search("backups", 8)[0].key == "m1"


def test_turns_at_the_same_score_rank_newest_first(tmp_path):
    index = _index(tmp_path)
    for n in range(3):
        index.add(f"t{n}", "turn", "memory", "private", "the wallaby report", session=f"s{n}")
    assert [h.key for h in index.search("wallaby report", 8)] == ["t2", "t1", "t0"]
