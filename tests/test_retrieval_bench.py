"""The retrieval benchmark at 1,000 turns (bench/retrieval.py), as CI runs it: the quality
targets of docs/performance.md, through the real CLI. Timings are the bench's, never a test's."""

from __future__ import annotations

import sys

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT))

from bench import retrieval
from bench.bm25 import BM25
from bench.corpus import generate


@pytest.mark.slow  # two homes decided through the CLI and about 1,100 recalls: a minute or two
def test_recall_beats_plain_bm25_and_finds_old_answers_as_new_ones(tmp_path):
    run = retrieval.run(1_000, tmp_path, [sys.executable, "-m", "bxmem"])
    print("\n".join(retrieval.table([run]) + retrieval.age_table([run])))
    assert run.ratio >= retrieval.RATIO, f"hit@8 {run.recall.hit_rate:.1f} % vs the baseline's {run.baseline.hit_rate:.1f} %"
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


def test_the_baseline_is_textbook_bm25():
    bm25 = BM25(["the cat sat", "the dog sat on the mat", "cats and dogs"])
    assert bm25.search("cat", 3) == [0]  # no stemming: "cats" is another word
    assert bm25.search("the on and", 3) == []  # stop words are no terms
    assert bm25.search("dog mat", 3)[0] == 1
