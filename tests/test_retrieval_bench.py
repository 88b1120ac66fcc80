"""The retrieval benchmark at 1,000 turns (bench/retrieval.py), as CI runs it: the quality
targets of docs/performance.md, through the real CLI. Timings are the bench's, never a test's."""

from __future__ import annotations

import sys

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT))

from bench import dialogue, retrieval
from bench.bm25 import BM25
from bench.corpus import generate


@pytest.mark.slow  # two homes decided through the CLI and about 1,100 recalls: a minute or two
def test_recall_beats_plain_bm25_and_finds_old_answers_as_new_ones(tmp_path):
    run = retrieval.run(1_000, tmp_path, [sys.executable, "-m", "bxmem"])
    print("\n".join(retrieval.table([run]) + retrieval.age_table([run])))
    assert run.ratio >= retrieval.RATIO, (
        f"hit@8 {run.recall.hit_rate:.1f} % vs the baseline's {run.baseline.hit_rate:.1f} %"
    )
    assert abs(run.age_gap) <= retrieval.AGE_POINTS, (run.when_oldest.hit_rate, run.when_newest.hit_rate)


def test_the_corpus_is_the_same_for_a_seed_and_plants_answers_at_every_age():
    first, again = generate(1_000, 7), generate(1_000, 7)
    assert [(t.speaker, t.text, t.reply) for t in first.turns] == [(t.speaker, t.text, t.reply) for t in again.turns]
    assert [q.text for q in first.questions] == [q.text for q in again.questions]
    assert len(first.turns) == 1_000 and len({t.speaker for t in first.turns}) >= 30
    tenths = {min(9, int(q.age * 10)) for q in first.questions}
    assert tenths == set(range(10))
    turns = {(t.session, t.n) for t in first.turns}
    assert all(set(q.answers) <= turns and q.answers for q in first.questions)


@pytest.mark.parametrize("split", ["tune", "held-out"])
def test_the_harder_corpus_fills_every_slot_of_its_templates(split):
    # a slot left as written ("{IN_CHARGE}") is a word shared by question and answer that no
    # real conversation holds: it made the figures measured before it was found easier
    corpus = dialogue.generate(2_000, 26, split)
    said = [text for t in corpus.turns for text in (t.text, t.reply)] + [q.text for q in corpus.questions]
    assert len(said) > 4_000
    left = [text for text in said if "{" in text or "}" in text]
    assert not left, left[:3]


def test_the_baseline_is_textbook_bm25():
    bm25 = BM25(["the cat sat", "the dog sat on the mat", "cats and dogs"])
    assert bm25.search("cat", 3) == [0]  # no stemming: "cats" is another word
    assert bm25.search("the on and", 3) == []  # stop words are no terms
    assert bm25.search("dog mat", 3)[0] == 1


# --- the remote shape, ranking only, on the fake server -------------------------------------


@pytest.mark.slow  # about 400 recalls in process against the fake: a minute and a half
def test_what_another_agent_wrote_is_found_near_bm25_with_no_more_noise(home, honcho, configure):
    """bench/remote.py's shape, fast: another agent's 300 turns as its workspace's messages
    (planted directly: the fake's search is word overlap, so this holds the ranking, not Honcho's
    meaning), every question asked through recall's read source. hit@8 near plain BM25's over the
    same lines, and questions about the never-said shown no more than recall's rule before (the
    question as asked, k results, two words shared) showed."""
    from bench.honcho_hits import relevant as relevant_before
    from bxmem.commands import recall
    from bxmem.config import loader as config_module
    from bxmem.honcho.client import ReadClient, WorkspaceClient

    history = generate(300, 26)
    subjects = {q.subject for q in history.questions}
    never = [q for q in generate(300, 27).questions if q.subject not in subjects]
    lines: list[tuple[str, str]] = []
    with WorkspaceClient(honcho.url, "b-trusted", None) as b:
        for peer in sorted({t.speaker for t in history.turns} | {"agentb"}):
            b.create_peer(peer, peer != "agentb")
        by_session: dict[str, list] = {}
        for t in history.turns:
            by_session.setdefault(t.session, []).append(t)
        for session, turns in by_session.items():
            b.create_session(session, {p: p != "agentb" for p in {t.speaker for t in turns} | {"agentb"}})
            messages = [
                m
                for t in turns
                for m in ({"peer_id": t.speaker, "content": t.text}, {"peer_id": "agentb", "content": t.reply})
            ]
            for first in range(0, len(messages), 100):
                b.add_messages(session, messages[first : first + 100])
            lines += [(m["peer_id"], m["content"]) for m in messages]
    configure(honcho.url, extra='\n[[honcho.read]]\nagent = "agentb"\nworkspace = "b-trusted"\ntrust = "trusted"\n')
    config = config_module.load()
    bm25 = BM25([f"{p} {t}" for p, t in lines])
    ours = theirs = 0
    for q in history.questions:
        found = [h.text for h in recall.recall(config, q.text, 8).hits if h.source == "agentb"]
        ours += any(q.value in text for text in found)
        theirs += any(q.value in lines[n][1] for n in bm25.search(q.text, 8))
    noise_now = noise_before = 0
    with ReadClient(honcho.url, "b-trusted", None) as b:
        for q in never:
            noise_now += sum(h.source == "agentb" for h in recall.recall(config, q.text, 8).hits)
            noise_before += sum(relevant_before(q.text, m["content"], m["peer_id"]) for m in b.search(q.text, 8))
    print(
        f"\nhit@8 {ours}/{len(history.questions)} vs BM25 {theirs}; never-said hits {noise_now} vs before {noise_before}"
        f" ({len(never)} questions)"
    )
    # The fake's order is word overlap, not meaning: this holds the ranking and the rule, within a
    # tenth of BM25 (0.93x when written); the rig's run (bench/remote.py) is where the targets are judged.
    assert ours >= 0.9 * theirs
    assert noise_now <= noise_before
