"""The retrieval benchmark: `bxmem recall` through the real CLI against plain BM25.

A generated history (bench/dialogue.py, the harder corpus, its held-out
templates; BXMEM_BENCH_CORPUS=easy for bench/corpus.py's) is written as loopd's logs into a fresh
home and indexed by the real `bxmem decide` (with a stand-in brokerd). Each
question is asked with `bxmem recall --json -k 8 -- QUESTION`, one process
each, Honcho refused (the local index alone answers). The baseline
(bench/bm25.py) ranks exactly the turns the index holds (the bench checks the
count), each as its speaker, what was said and the reply.

    hit@8  a question counts when any turn that states its answer is in the top 8
    all@8  ... when every such turn is

Figures per size, and for the answers in the oldest and the newest tenth of
the history. `bench/run retrieval` prints them; tests/test_retrieval_bench.py
holds the quality targets at 1,000 turns.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import corpus as easy
from . import dialogue
from .bm25 import BM25
from .corpus import Corpus, Question

K = 8
SIZES = (1_000, 10_000, 100_000)
# Targets (docs/performance.md): recall's hit@8 at least this times the baseline's,
# and its oldest tenth within this many points of its newest tenth.
RATIO = 1.10
AGE_POINTS = 5.0


@dataclass
class Score:
    asked: int = 0
    hit: int = 0
    all: int = 0
    tenths: list[list[int]] = field(default_factory=lambda: [[0, 0] for _ in range(10)])  # [hits, asked]

    def add(self, question: Question, found: list[tuple[str, int]]) -> None:
        answers = set(question.answers)
        top = set(found[:K])
        hit = bool(answers & top)
        self.asked += 1
        self.hit += hit
        self.all += answers <= top
        tenth = self.tenths[min(9, int(question.age * 10))]
        tenth[0] += hit
        tenth[1] += 1

    def rate(self, n: int) -> float:
        return 100.0 * n / self.asked if self.asked else 0.0

    @property
    def hit_rate(self) -> float:
        return self.rate(self.hit)

    @property
    def all_rate(self) -> float:
        return self.rate(self.all)

    def tenth(self, n: int) -> float:
        hits, asked = self.tenths[n]
        return 100.0 * hits / asked if asked else 0.0

    @property
    def age_gap(self) -> float:
        """Points by which the newest tenth's hit@8 exceeds the oldest tenth's."""
        return self.tenth(9) - self.tenth(0)


def write_home(base: Path) -> dict:
    """A fresh home and config (Honcho refused), and the environment that names them."""
    home = base / "home"
    (home / "logs").mkdir(parents=True)
    config = base / "bxmem.toml"
    config.write_text(
        '[honcho]\nurl = "http://127.0.0.1:9"\nagent = "boxmaker0"\nowner = "kyle"\n'
        'trusted = "t"\nuntrusted = "u"\nfleet = "f"\n'
    )
    return {**os.environ, "BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}


def sessions(corpus: Corpus) -> list[list]:
    """The history's sessions, oldest first, each its turns."""
    by_session: dict[str, list] = {}
    for turn in corpus.turns:
        by_session.setdefault(turn.session, []).append(turn)
    return list(by_session.values())


def index_home(bxmem: list[str], env: dict, history: list[list], chunks: int = 20) -> None:
    """loopd's logs for `history`, written a twentieth at a time, each part decided by the
    real decide before the next is written (with a stand-in brokerd: every session private
    and clean): the index then holds the turns in the order they were said, as on a host."""
    from bxmem.demo.brokerd import StubBrokerd

    home = Path(env["BOXMAKER_HOME"])
    logs = home / "logs"
    step = max(1, -(-len(history) // chunks))
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        for first in range(0, len(history), step):
            for turns in history[first : first + step]:
                with open(logs / f"{turns[0].session}.jsonl", "w") as f:
                    for t in turns:
                        for line in (
                            {"type": "user", "turn": t.n, "ts": t.ts, "speaker": t.speaker, "text": t.text},
                            {"type": "assistant", "turn": t.n, "ts": t.ts, "final": True, "text": t.reply},
                            {"type": "turn_end", "turn": t.n, "ts": t.ts, "status": "completed"},
                        ):
                            f.write(json.dumps(line) + "\n")
            subprocess.run([*bxmem, "decide"], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def index_facts(env: dict) -> tuple[int, int]:
    """(documents in the local index, its size in bytes with its write-ahead log)."""
    import sqlite3

    path = Path(env["BOXMAKER_HOME"]) / "memory" / "bxmem" / "index.sqlite3"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        docs = db.execute("SELECT count(*) FROM docs").fetchone()[0]
    finally:
        db.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if not p.name.endswith(".lock"))
    return docs, size


def recall(bxmem: list[str], env: dict, question: str) -> list[tuple[str, int]]:
    """The local turns `bxmem recall` answers with, in its order, as (session, turn)."""
    out = subprocess.run(
        [*bxmem, "recall", "--json", "-k", str(K), "--", question], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"bxmem recall exited {out.returncode}: {out.stderr.strip()[-300:]}")
    found = []
    for hit in json.loads(out.stdout)["hits"]:
        where = hit.get("where") or ""
        if hit["source"] == "local" and where.startswith("turn "):
            found.append((hit["session"], int(where.split()[-1])))
    return found


def baseline(corpus: Corpus) -> Score:
    """BM25 over the turns, each as its speaker, what was said and the reply."""
    turns = corpus.turns
    bm25 = BM25([f"{t.speaker} {t.text}\n{t.reply}" for t in turns])
    score = Score()
    for question in corpus.questions:
        score.add(question, [(turns[n].session, turns[n].n) for n in bm25.search(question.text, K)])
    return score


def through_cli(
    bxmem: list[str], env: dict, questions: list[Question], workers: int = 2
) -> list[list[tuple[str, int]]]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda q: recall(bxmem, env, q.text), questions))


@dataclass
class Run:
    turns: int
    questions: int
    recall: Score
    baseline: Score
    index_bytes: int
    # The same questions answered by the same turns, once oldest and once newest: hit@8 in each
    # (a history told in the other order makes the oldest tenth the newest, and the newest the oldest).
    when_oldest: Score = field(default_factory=Score)
    when_newest: Score = field(default_factory=Score)
    env: dict = field(default_factory=dict)  # the home in the history's order, kept for the latency runs
    sample: list[str] = field(default_factory=list)  # questions for the latency runs

    @property
    def ratio(self) -> float:
        return self.recall.hit_rate / self.baseline.hit_rate if self.baseline.hit_rate else 0.0

    @property
    def age_gap(self) -> float:
        """Points by which the same answers are found more often when newest than when oldest."""
        return self.when_newest.hit_rate - self.when_oldest.hit_rate

    def met(self) -> tuple[bool, bool]:
        """(hit@8 at least RATIO x the baseline's, the oldest answers within AGE_POINTS of the newest)"""
        return self.ratio >= RATIO, abs(self.age_gap) <= AGE_POINTS


def generate(size: int, seed: int = 19, which: str | None = None) -> Corpus:
    """The benchmark's history: bench/dialogue.py's held-out templates, or bench/corpus.py's
    ("easy", the corpus before issue 26, where a turn and its question share most words)."""
    which = which or os.environ.get("BXMEM_BENCH_CORPUS", "dialogue")
    return easy.generate(size, seed) if which == "easy" else dialogue.generate(size, seed, "held-out")


def run(size: int, base: Path, bxmem: list[str], seed: int = 19, which: str | None = None) -> Run:
    """Generate; index through decide in the history's order and in the reverse order;
    ask every question through the CLI (and again those whose answers are in the oldest
    or the newest tenth, in the reversed history); score both systems."""
    corpus = generate(size, seed, which)
    history = sessions(corpus)
    env = write_home(base / "forward")
    index_home(bxmem, env, history)
    docs, size_bytes = index_facts(env)
    if docs != len(corpus.turns):
        raise RuntimeError(f"the index holds {docs} documents, the history {len(corpus.turns)} turns")
    result = Run(
        size,
        len(corpus.questions),
        Score(),
        baseline(corpus),
        size_bytes,
        env=env,
        sample=[q.text for q in corpus.questions[:: max(1, len(corpus.questions) // 60)]],
    )
    forward = through_cli(bxmem, env, corpus.questions)
    for question, found in zip(corpus.questions, forward, strict=True):
        result.recall.add(question, found)
    ends = [(q, found) for q, found in zip(corpus.questions, forward, strict=True) if q.age < 0.1 or q.age >= 0.9]
    backward_env = write_home(base / "backward")
    index_home(bxmem, backward_env, history[::-1])
    backward = through_cli(bxmem, backward_env, [q for q, _found in ends])
    for (question, found), reversed_found in zip(ends, backward, strict=True):
        oldest, newest = (found, reversed_found) if question.age < 0.1 else (reversed_found, found)
        result.when_oldest.add(question, oldest)
        result.when_newest.add(question, newest)
    return result


def table(runs: list[Run]) -> list[str]:
    lines = [
        "| turns | questions | system | hit@8 | all@8 | oldest tenth | newest tenth | index |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        for name, s in (("bxmem recall", r.recall), ("BM25 baseline", r.baseline)):
            size = f"{r.index_bytes / 2**20:.1f} MiB" if name == "bxmem recall" else ""
            lines.append(
                f"| {r.turns:,} | {r.questions:,} | {name} | {s.hit_rate:.1f} % | {s.all_rate:.1f} % | "
                f"{s.tenth(0):.1f} % | {s.tenth(9):.1f} % | {size} |"
            )
    return lines


def age_table(runs: list[Run]) -> list[str]:
    lines = [
        "| turns | questions | hit@8, answers oldest | hit@8, the same answers newest | gap |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        lines.append(
            f"| {r.turns:,} | {r.when_oldest.asked:,} | {r.when_oldest.hit_rate:.1f} % | "
            f"{r.when_newest.hit_rate:.1f} % | {r.age_gap:+.1f} points |"
        )
    return lines
