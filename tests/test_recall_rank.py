"""Recall's order: what the local index ranks first, how sources interleave, and
which Honcho hits are near misses (docs/decisions.md says why)."""

from __future__ import annotations

import pytest

from bxmem.commands import recall, recall_remote
from bxmem.retrieval import relevance
from bxmem.retrieval.snippets import SNIPPET_CHARS
from bxmem.store import search
from bxmem.store.index import Index


def _index(tmp_path) -> Index:
    index = Index(tmp_path / "index.sqlite")
    index.db()
    return index


def test_a_replacing_identity_entry_outranks_an_old_turn_that_repeats_the_old_text(tmp_path):
    index = _index(tmp_path)
    index.add(
        "t1",
        "turn",
        "memory",
        "private",
        "when is the dingo deploy window\nthe dingo deploy window is tuesday",
        session="s-old",
        ts="2026-09-01T09:00:00Z",
    )
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
    fleet = recall._pair_retractions(
        [
            _hit("fleet", "the capybara mirror is flaky", peer="ea"),
            _hit("fleet", "retracted: the capybara mirror is flaky", peer="ea"),
            _hit("fleet", "the capybara cache", peer="ea"),
        ]
    )
    near = [_hit("ea", f"near miss {n}") for n in range(3)]
    sources = [("local", 1.0, lambda: []), ("ea", 1.0, lambda: near), ("fleet", 1.0, lambda: fleet)]
    texts = [h.text for h in recall.run_sources(sources, 8).hits]
    note = texts.index("the capybara mirror is flaky")
    assert texts[note + 1] == "retracted: the capybara mirror is flaky"
    assert len(texts) == 6


def test_a_honcho_text_holds_the_querys_words_by_its_best_passage():
    def held(query: str, text: str, author: str | None = None) -> int:
        return relevance.cover(query, text, author)[0]

    assert relevance.cover("gecko migration", "The Gecko migration is in June") == (2, 2)
    assert held("when do we deploy the gecko", "gecko deployment moved to friday") == 2  # by their first 5 letters
    assert held("when is the gecko migration", "the gecko backups failed") == 1
    assert relevance.cover("what is the budget about", "what is the plan about") == (0, 1)  # stop words do not count
    assert relevance.cover("what is it", "what is it") == (0, 0)
    assert held("kyle's dog", "Kyle\u2019s dog is called biscuit") == 2  # a clitic is no word
    assert held("what is nina's cat called", "ziggy kept me up all night, silly cat", "nina") == 2  # who wrote it
    assert held("what is nina's cat called", "ziggy kept me up all night, silly cat", "tom") == 1
    scattered = "gecko " + "filler words here " * 20 + "migration"
    assert held("gecko migration", scattered) == 1  # words a page apart are not one passage's


def test_a_retraction_pair_is_never_split_at_the_k_boundary():
    """With one slot left, a note and its retraction are left out together and the
    next single hit takes the slot; the fleet source's own cut to k does the same."""
    pair = recall._pair_retractions(
        [
            _hit("fleet", "the capybara mirror is flaky", peer="ea"),
            _hit("fleet", "retracted: the capybara mirror is flaky", peer="ea"),
            _hit("fleet", "the capybara cache", peer="ea"),
        ]
    )
    near = [_hit("ea", f"near miss {n}") for n in range(3)]
    sources = [("local", 1.0, lambda: []), ("ea", 1.0, lambda: near), ("fleet", 1.0, lambda: pair)]
    assert [h.text for h in recall.run_sources(sources, 2).hits] == ["near miss 0", "near miss 1"]
    assert [h.text for h in recall.run_sources(sources, 3).hits] == [
        "near miss 0",
        "the capybara mirror is flaky",
        "retracted: the capybara mirror is flaky",
    ]
    assert [h.text for unit in recall._fitting(recall._units(pair), 1) for h in unit] == ["the capybara cache"]


def test_a_long_honcho_text_is_cut_around_the_querys_words():
    text = "filler words here " * 100 + "the wolverine cache key rotates hourly " + "more filler " * 50
    cut = recall_remote.snippet(text, "how often does the wolverine key rotate?")
    assert "wolverine cache key rotates hourly" in cut and len(cut) <= SNIPPET_CHARS
    assert (
        recall_remote.snippet(text).startswith("filler words here")
        and len(recall_remote.snippet(text)) <= SNIPPET_CHARS
    )
    assert recall_remote.snippet("  short  ", "short") == "short"


def test_only_a_real_honcho_id_counts_as_the_authors_words():
    """A peer id outside Honcho's alphabet is shown as the placeholder, whose own words must not count."""
    author = recall_remote._author
    assert author("nina") == "nina"
    assert author(None) is None
    assert author("nina cat") is None and author(recall.printed_fields.INVALID_ID) is None
    assert relevance.cover("is the id invalid", "this one is invalid", author("bad peer!")) == (1, 2)
    assert relevance.cover("is the okapi queue stuck", "it is stuck", author("okapi queue")) == (1, 3)


# --- a Honcho source's candidates: ranked by their words, fused with Honcho's order -----------


def _candidates(texts: list[str], peer: str = "nina") -> list[recall_remote.Candidate]:
    return [recall_remote.Candidate(t, peer, "message", "s", None, n) for n, t in enumerate(texts, 1)]


def test_candidates_are_ranked_by_their_words_and_fused_with_honchos_order():
    """Candidates are ranked by their words and fused with Honcho's order, so an answer Honcho
    ranked 30th by meaning behind near misses is shown; Honcho is asked for more than k."""
    near = [f"the heron {w} went fine" for w in ("backup", "deploy", "audit", "upgrade")] * 8
    texts = [*near[:29], "the gecko migration is set for june 4", *near[29:]]
    kept = recall_remote.rank("when is the gecko migration?", _candidates(texts), 8, [list(range(len(texts)))])
    assert [c.text for c, _why in kept] == ["the gecko migration is set for june 4"]
    why = kept[0][1]
    assert (why.matched, why.lexical_rank, why.semantic_rank, why.fused_rank) == (("gecko", "migration"), 1, 30, 1)
    assert why.arms == ["lexical", "semantic"] and why.score is not None and why.score > 0


def test_a_question_about_something_never_said_keeps_no_near_miss():
    """Honcho answers with its nearest texts however far: a text sharing one word, or two
    words a page apart, is not shown."""
    texts = [
        "the gecko backups failed again",
        "ping jo about the migration",
        "notes: gecko " + "filler words here " * 20 + "migration plans",
        "lunch was great",
    ]
    kept = recall_remote.rank("when is the gecko migration?", _candidates(texts), 8, [list(range(len(texts)))])
    assert kept == []


def test_a_conclusion_found_by_its_words_alone_is_kept_when_it_holds_most_of_them():
    texts = ["kyle keeps the spare yubikey in the safe"]
    candidates = [recall_remote.Candidate(texts[0], "agentb", "conclusion", None, None, None)]
    kept = recall_remote.rank("where does kyle keep the spare yubikey?", candidates, 8, [[]])
    assert [(c.where, why.arms, why.semantic_rank) for c, why in kept] == [("conclusion", ["lexical"], None)]
    assert kept[0][1].matched == ("kyle", "keep", "spare", "yubikey")  # "keeps" is "keep", as porter stems it


def test_honcho_is_asked_the_querys_words_alone():
    """Honcho is asked the query's words alone: with its punctuation, Honcho's full-text arm
    makes a substring match of the whole question (src/utils/search.py at 3.0.12)."""
    assert recall_remote.words_query("When's the gecko-migration? (kyle's)") == "gecko migration kyle"
    assert recall_remote.find_words("when is the deployment of gecko happening") == ["deplo", "gecko", "happe"]


def test_a_paraphrase_first_in_both_arms_is_kept_by_the_rare_word_it_shares():
    """A paraphrase first by its words and first in Honcho's order is kept by the one rare
    word it shares with the question. A near miss sharing only a word most candidates hold
    is not shown, nor is the same answer when Honcho ranks another text first (one rare word
    alone is not enough there)."""
    fillers = [
        f"{who} owns the {what} backups"
        for who, what in (("jo", "heron"), ("ana", "egret"), ("li", "otter"), ("max", "tapir"))
    ]
    texts = [
        "ivan will be handling ostrich, not me",
        *fillers,
        "the handover doc is in the wiki",
        "handover notes are late",
    ]
    query = "who owns the ostrich handover?"
    kept = recall_remote.rank(query, _candidates(texts), 8, [list(range(len(texts)))])
    assert [(c.text, why.lexical_rank, why.semantic_rank) for c, why in kept] == [(texts[0], 1, 1)]
    second = [1, 0, *range(2, len(texts))]  # Honcho puts a near miss first
    assert recall_remote.rank(query, _candidates(texts), 8, [second]) == []


def test_the_first_by_its_words_is_kept_when_it_holds_most_of_the_querys_weight():
    """One word held, of two asked, and the rare one (one candidate in six holds it; the other,
    every near miss): the text ranked first by its words is shown though Honcho put it last;
    the near misses, holding the common word only, are not."""
    texts = [f"the dashboard for the {name} is slow" for name in ("heron", "egret", "otter", "tapir", "yak")]
    texts.append("the zebra sits in rack 4")
    kept = recall_remote.rank("where is the zebra dashboard?", _candidates(texts), 8, [list(range(len(texts)))])
    assert [(c.text, why.lexical_rank, why.semantic_rank) for c, why in kept] == [("the zebra sits in rack 4", 1, 6)]


def test_a_words_weight_is_how_few_candidates_hold_it():
    from bxmem.retrieval import relevance

    texts = [("the dashboard is slow", None)] * 5 + [
        ("the zebra sits in rack 4", None),
        ("zebra notes", "ana_Dot_dash"),
    ]
    weights = relevance.rarity("where is the zebra dashboard?", texts)
    assert set(weights) == {"zebra", "dashb"} and weights["zebra"] > weights["dashb"] > 0
    assert relevance.share({"zebra", "dashb"}, weights) == pytest.approx(1.0)
    assert relevance.share(set(), weights) == 0.0 and relevance.share({"zebra"}, {}) == 0.0
    assert relevance.held("zebra dashboard", "zebra notes", "ana_Dot_dashboard") == {
        "zebra",
        "dashb",
    }  # the author's words count
