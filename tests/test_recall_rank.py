"""Recall's order: what the local index ranks first, how sources interleave, and
which Honcho hits are near misses (docs/decisions.md says why)."""

from __future__ import annotations

import pytest

from bxmem.commands import recall
from bxmem.store import search
from bxmem.store.index import Index


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


@pytest.mark.parametrize("newer", [50, search.BUDGET + 50])  # every match ranked; the word in more than BUDGET
def test_an_old_identity_entry_is_a_candidate_however_many_newer_turns_match(tmp_path, newer):
    index = _index(tmp_path)
    index.add("m1", "identity", "identity", "private", "backups go to the echidna nas", file="memory.md")
    db = index.db()
    db.execute("BEGIN")
    for n in range(newer):
        index.add(f"t{n}", "turn", "memory", "private", f"turn {n} about backups", session="s")
    db.execute("COMMIT")
    assert index.search("backups", 8)[0].key == "m1"


def test_turns_at_the_same_score_rank_newest_first(tmp_path):
    index = _index(tmp_path)
    for n in range(3):
        index.add(f"t{n}", "turn", "memory", "private", "the wallaby report", session=f"s{n}")
    assert [h.key for h in index.search("wallaby report", 8)] == ["t2", "t1", "t0"]


def _hit(source: str, text: str, **kw) -> recall.Hit:
    return recall.Hit(source, "memory-tainted", "private", text, **kw)


def test_interleaving_keeps_a_retracted_note_and_its_retraction_together():
    fleet = recall._pair_retractions([_hit("fleet", "the capybara mirror is flaky", peer="ea"),
                                      _hit("fleet", "retracted: the capybara mirror is flaky", peer="ea"),
                                      _hit("fleet", "the capybara cache", peer="ea")])
    near = [_hit("ea", f"near miss {n}") for n in range(3)]
    sources = [("local", 1.0, lambda: []), ("ea", 1.0, lambda: near), ("fleet", 1.0, lambda: fleet)]
    texts = [h.text for h in recall.run_sources(sources, 8).hits]
    note = texts.index("the capybara mirror is flaky")
    assert texts[note + 1] == "retracted: the capybara mirror is flaky"
    assert len(texts) == 6


def test_a_honcho_hit_must_share_two_of_the_querys_words():
    keep = recall.relevant
    assert keep("gecko migration", "The Gecko migration is in June")
    assert keep("when do we deploy the gecko", "gecko deployment moved to friday")  # words compared by their first 5 letters
    assert not keep("when is the gecko migration", "the gecko backups failed")  # one word: a near miss
    assert keep("restic", "restic 0.17 is out")  # a one-word query: that word
    assert not keep("marmoset budget", "the gecko migration is scheduled for june")
    assert not keep("what is the budget about", "what is the plan about")  # stop words do not count
    assert not keep("what is it", "what is it")  # nothing to compare: nothing kept
    assert keep("kyle's dog", "Kyle\u2019s dog is called biscuit")  # a clitic is no word
    assert keep("what is nina's cat called", "ziggy kept me up all night, silly cat", "nina")  # who wrote it
    assert not keep("what is nina's cat called", "ziggy kept me up all night, silly cat", "tom")


def test_a_retraction_pair_is_never_split_at_the_k_boundary():
    """With one slot left, a note and its retraction are left out together and the
    next single hit takes the slot; the fleet source's own cut to k does the same."""
    pair = recall._pair_retractions([_hit("fleet", "the capybara mirror is flaky", peer="ea"),
                                     _hit("fleet", "retracted: the capybara mirror is flaky", peer="ea"),
                                     _hit("fleet", "the capybara cache", peer="ea")])
    near = [_hit("ea", f"near miss {n}") for n in range(3)]
    sources = [("local", 1.0, lambda: []), ("ea", 1.0, lambda: near), ("fleet", 1.0, lambda: pair)]
    assert [h.text for h in recall.run_sources(sources, 2).hits] == ["near miss 0", "near miss 1"]
    assert [h.text for h in recall.run_sources(sources, 3).hits] == [
        "near miss 0", "the capybara mirror is flaky", "retracted: the capybara mirror is flaky"]
    assert [h.text for unit in recall._fitting(recall._units(pair), 1) for h in unit] == ["the capybara cache"]


def test_a_long_honcho_text_is_cut_around_the_querys_words():
    text = "filler words here " * 100 + "the wolverine cache key rotates hourly " + "more filler " * 50
    cut = recall.snippet(text, "how often does the wolverine key rotate?")
    assert "wolverine cache key rotates hourly" in cut and len(cut) <= recall.SNIPPET_CHARS
    assert recall.snippet(text).startswith("filler words here") and len(recall.snippet(text)) <= recall.SNIPPET_CHARS
    assert recall.snippet("  short  ", "short") == "short"


def test_only_a_real_honcho_id_counts_as_the_authors_words():
    """A peer id outside Honcho's alphabet is shown as the placeholder, whose own words must not count."""
    assert recall._author("nina") == "nina"
    assert recall._author(None) is None
    assert recall._author("nina cat") is None and recall._author(recall.shown.INVALID_ID) is None
    assert not recall.relevant("is the id invalid", "this one is invalid", recall._author("bad peer!"))
    assert not recall.relevant("is the okapi queue stuck", "it is stuck", recall._author("okapi queue"))
