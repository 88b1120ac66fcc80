"""The local index's ranking (bxmem/store/search.py): every match ranked, at a bounded cost;
words stemmed; candidates chosen by how rare their words are; snippets around the match."""

from __future__ import annotations

import random

import pytest

from bxmem.store import search
from bxmem.store.index import Index


def _index(tmp_path) -> Index:
    index = Index(tmp_path / "index.sqlite")
    index.db()
    return index


def _fill(index: Index, texts, kind: str = "turn", start: int = 0) -> None:
    db = index.db()
    db.execute("BEGIN")
    for n, text in enumerate(texts, start):
        index.add(f"t{n}", kind, "memory", "private", text, session="s")
    db.execute("COMMIT")


def keys(index: Index, query: str, k: int = 8) -> list[str]:
    return [h.key for h in index.search(query, k)]


def test_an_old_turn_holding_a_rare_word_is_found_under_thousands_of_newer_common_ones(tmp_path):
    """The newest-1,000 window hid it: every natural question holds a common word."""
    index = _index(tmp_path)
    index.add("old", "turn", "memory", "private", "kyle said the backups go to the wombat nas", session="s0")
    _fill(index, (f"kyle asked about the backups again, day {n}" for n in range(3_000)), start=1)
    assert keys(index, "what did kyle say about the wombat backups?")[0] == "old"


def test_words_are_stemmed_and_a_clitic_is_no_word(tmp_path):
    index = _index(tmp_path)
    index.add("a", "turn", "memory", "private", "the nightly backups are on restic", session="s")
    index.add("b", "turn", "memory", "private", "it's what's left: s s s", session="s")
    assert keys(index, "backup") == ["a"]
    assert keys(index, "restic's schedule") == ["a"]  # "s" would have found b


def test_an_irregular_form_finds_the_others(tmp_path):
    index = _index(tmp_path)
    index.add("went", "turn", "memory", "private", "the whole team went to lisbon", session="s")
    index.add("stayed", "turn", "memory", "private", "the whole team stayed in porto", session="s")
    index.add("rebuilt", "turn", "memory", "private", "the cougar box gets rebuilt on friday", session="s")
    index.add("logo", "turn", "memory", "private", "the cougar box has a new logo", session="s")
    assert keys(index, "where did the whole team go?")[0] == "went"  # equal but for "went": the newer came first
    assert keys(index, "when do we rebuild the cougar box")[0] == "rebuilt"


def test_the_speaker_is_a_word_of_the_turn(tmp_path):
    index = _index(tmp_path)
    index.add("a", "turn", "memory", "private", "my dog is called biscuit", session="s", who="priya")
    index.add("b", "turn", "memory", "private", "my dog is called pepper", session="s", who="tom")
    assert keys(index, "what is priya's dog called?")[0] == "a"


def test_a_fact_inside_a_long_paste_is_ranked_as_a_short_text_would_be(tmp_path):
    index = _index(tmp_path)
    paste = " ".join(f"line {n} of the meeting notes about the deploy calendar." for n in range(60))
    index.add(
        "paste",
        "turn",
        "memory",
        "private",
        paste.replace("line 30 ", "the wolverine cache key rotates hourly; line 30 "),
        reply="Noted.",
        session="s",
    )
    index.add("miss", "turn", "memory", "private", "who knows the wolverine cache?", reply="not me", session="s")
    found = index.search("how often does the wolverine cache key rotate?", 8)
    assert found[0].key == "paste"
    assert "wolverine cache key rotates hourly" in found[0].text and found[0].text.endswith("\nNoted.")
    assert len(found[0].text) <= 600


def test_a_long_document_holding_many_good_passages_leaves_room_for_others(tmp_path):
    index = _index(tmp_path)
    index.add("long", "turn", "memory", "private", " ".join(["otter deploy"] * 2000), session="s")
    _fill(index, (f"otter deploy {n}" for n in range(20)), start=1)
    found = keys(index, "otter deploy", 8)
    assert len(found) == 8 and len(set(found)) == 8


@pytest.mark.parametrize("seed", range(6))
def test_the_split_by_rare_and_common_words_scores_as_one_bm25_over_all_of_them(tmp_path, monkeypatch, seed):
    """Candidates hold a rare word; each is scored over every word. The two MATCH
    expressions must rank exactly as one bm25 over all the words, among those candidates
    (before the best are scored again: _rescored, off here)."""
    monkeypatch.setattr(search, "BUDGET", 30)
    monkeypatch.setattr(search, "EXACT", 0.0)
    rng = random.Random(seed)
    rare, common = ["koala", "wombat"], ["deploy", "backup", "report"]
    index = _index(tmp_path)
    texts = []
    for _ in range(300):  # each common word in about a fifth of the turns: over BUDGET, under COMMON
        words = [w for w in common for _ in range(rng.randrange(1, 3)) if rng.random() < 0.1] + [
            "filler"
        ] * rng.randrange(1, 8)
        if rng.random() < 0.05:
            words.append(rng.choice(rare))
        rng.shuffle(words)
        texts.append(" ".join(words))
    _fill(index, texts)
    db = index.db()
    query = "koala wombat deploy backup report"
    every = " OR ".join(f'"{w}"' for w in rare + common)
    rare_only = " OR ".join(f'"{w}"' for w in rare)
    held = [db.execute("SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?", (w,)).fetchone()[0] for w in common]
    assert all(search.BUDGET < df < search.COMMON for df in held), held  # over the budget: scored, not candidates
    reference = db.execute(
        "SELECT d.key FROM docs_fts f JOIN passages p ON p.id = f.rowid JOIN docs d ON d.id = p.doc"
        " WHERE docs_fts MATCH ? AND f.rowid IN (SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?)"
        " ORDER BY bm25(docs_fts), f.rowid DESC LIMIT 8",
        (every, rare_only),
    ).fetchall()
    assert keys(index, query) == [k for (k,) in reference]


def test_when_every_word_is_common_the_newest_matches_are_ranked_and_those_holding_all_first(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "BUDGET", 50)
    index = _index(tmp_path)
    index.add("both", "turn", "memory", "private", "we decided the backups go offsite", session="s")
    _fill(
        index,
        [f"the backups ran, day {n}" for n in range(200)]
        + [f"we decided on lunch, day {n}" for n in range(200)]
        + [f"nothing to see, day {n}" for n in range(1000)],
        start=1,
    )
    found = keys(index, "what did we decide about the backups?")
    assert found[0] == "both" and len(found) == 8


def test_query_syntax_in_a_word_is_matched_as_a_word(tmp_path):
    index = _index(tmp_path)
    index.add("a", "turn", "memory", "private", 'the NEAR report and "quotes" text: here', session="s")
    for query in [
        'report" OR "x',
        "NEAR(report quotes)",
        "text:here",
        "report*",
        "-report",
        '""',
        "AND OR NOT",
        "^report",
    ]:
        index.search(query, 8)  # never an FTS5 syntax error
    assert keys(index, "NEAR(report quotes)") == ["a"]


def test_identity_entries_take_the_highest_rowids_as_search_expects(tmp_path):
    from bxmem.store import index as index_module

    assert search.IDENTITY_BASE == index_module.IDENTITY_BASE
    index = _index(tmp_path)
    index.add("t1", "turn", "memory", "private", "a turn", session="s")
    index.add("m1", "identity", "identity", "private", "an entry", file="memory.md")
    index.add("t2", "turn", "memory", "private", "another turn", session="s")
    ids = dict(index.db().execute("SELECT d.key, p.id FROM passages p JOIN docs d ON d.id = p.doc"))
    assert ids["m1"] >= search.IDENTITY_BASE > ids["t2"] > ids["t1"]


def test_two_forms_of_one_word_in_a_query_count_once(tmp_path):
    index = _index(tmp_path)
    db = index.db()
    index.add("a", "turn", "memory", "private", "the nightly backups", session="s")
    assert len(search.terms_of(db, ["backup", "backups", "nightly"])) == 2
    assert len(search.terms_of(db, ["kyle", "backups"])) == 1  # kyle is in no passage: left out
    assert [h.key for h in index.search("backup backups", 8)] == ["a"]


def test_a_speaker_with_a_dot_in_the_name_is_searched_by_its_parts(tmp_path):
    from bxmem.commands import index_fold
    from bxmem.retrieval import relevance
    from bxmem.trust import rules

    index = _index(tmp_path)
    decided: dict[str, object] = {
        "item": "turn:s:1",
        "session": "s",
        "at": "2026-09-27T10:00:00Z",
        "peer": rules.peer_name("ana.lima"),
        "class": "private",
        "untrusted_by": [],
    }
    index_fold.index_turn(index, decided, "my parrot is called pickles", "Lovely.")
    assert keys(index, "what is ana's parrot called?") == ["turn:s:1"]
    assert keys(index, "dot parrot") == ["turn:s:1"] and not keys(index, "dot")  # the escape is no word of the turn
    assert relevance.DOT == rules.DOT
    assert relevance.cover("what is lima's parrot called?", "pickles, my parrot", "ana_Dot_lima") == (2, 3)


def _talk(index: Index, session: str, turns: list[tuple[str, str, str]], first: int = 1) -> None:
    """Turns of one session as decide indexes them: (speaker, what was said, the reply)."""
    db = index.db()
    db.execute("BEGIN")
    for n, (who, text, reply) in enumerate(turns, first):
        index.add(f"turn:{session}:{n}", "turn", "memory", "private", text, reply=reply, session=session, who=who)
    db.execute("COMMIT")


def _chatter(index: Index) -> None:
    """Turns that hold the question's words one or two at a time, in sessions of their own."""
    for n in range(40):
        _talk(
            index,
            f"c{n}",
            [
                ("dana", f"the summer sale starts on day {n}", "Noted."),
                ("omar", f"priya sent the report for week {n}", "Thanks."),
                ("eli", f"my holiday photos from week {n} are up", "Nice."),
            ],
        )


def test_an_answer_is_found_through_the_question_it_answers(tmp_path):
    """The answer names neither the trip nor the summer; the turn before it, someone else's
    question, does. The answer is ranked for it, and says so."""
    index = _index(tmp_path)
    _chatter(index)
    _talk(
        index,
        "s",
        [
            ("kyle", "priya, how was the summer holiday?", "Noted."),
            ("priya", "lisbon! loved every minute of it", "Sounds lovely."),
        ],
    )
    hits = {h.key: h for h in index.search("where did priya go on her summer holiday?", 8)[:2]}
    assert set(hits) == {"turn:s:1", "turn:s:2"}  # the exchange first: the question and its answer
    assert hits["turn:s:2"].follows == "turn:s:1" and hits["turn:s:2"].matched == ("priya",)  # the speaker's name alone
    assert hits["turn:s:1"].follows is None


def test_a_turn_after_a_statement_by_someone_else_is_not_lifted(tmp_path):
    """Only a question and its answer, or one speaker going on, are read as one exchange."""
    index = _index(tmp_path)
    _chatter(index)
    _talk(
        index,
        "s",
        [
            ("kyle", "priya's summer holiday photos are on the wiki", "Noted."),
            ("omar", "lisbon is on my list too", "Nice."),
        ],
    )
    _talk(
        index,
        "t",
        [
            ("kyle", "took the summer holiday we kept talking about", "Noted."),
            ("kyle", "kyoto has the best coffee I've ever had", "Nice."),
        ],
    )
    found = {h.key: h for h in index.search("where did kyle go on the summer holiday?", 8)}
    assert "turn:s:2" not in found
    assert found["turn:t:2"].follows == "turn:t:1"  # the same speaker, going on


def test_a_word_as_the_query_wrote_it_counts_more_than_its_stem(tmp_path):
    """Of two turns alike by their stems, the one holding the word as the query wrote it
    comes first, though the other is newer."""
    index = _index(tmp_path)
    _talk(
        index,
        "s",
        [
            ("kofi", "her name is bramble, after my aunt", "Noted."),
            ("dana", "they named it bramble, after my aunt", "Noted."),
        ],
    )
    _fill(index, [f"filler turn {n}" for n in range(30)])
    assert keys(index, "what is the name of the cat?")[0] == "turn:s:1"
