"""The retrieval benchmark's remote shape: what the fleet wrote, found through recall.

Agent B's bxmem writes a generated history (bench/corpus.py) into a Honcho through
its real `decide`, `mirror` and `send`: its turns to B's trusted workspace, one
fact in four stated as B's own trusted note instead (a conclusion there), and a
second history's lines as B's untrusted notes (the fleet's messages). Agent A,
with nothing local, reads B's workspace as a `[[honcho.read]]` source and the
fleet as its own, and asks every question through the real CLI,
`bxmem recall --json -k 8 -- QUESTION`, one process each. Side by side in the
same run, over exactly the lines Honcho holds (read back from it): plain BM25
(bench/bm25.py), Honcho's own search with the question as asked, and recall's
rule before issue 26 (the question as asked, k results, two words shared).

    hit@8   a question counts when a line that states its answer is among the hits
    noise   hits for questions about something never said there (another history's)

The history is bench/corpus.py's by default (BXMEM_BENCH_REMOTE_CORPUS=dialogue:<split>:
bench/dialogue.py's, harder; a rule is chosen on one seed or split, reported on another). Every
answer Honcho gives (recall's calls, and the baselines') is kept in a cache per
(workspace, call), written beside the run (`honcho-answers.json`), so recall's rule can be
replayed in process against the same answers (`replay`: seconds, for comparing rules); the
live run asks every question through the CLI once more, for the end-to-end figures and the
latency. BXMEM_BENCH_REMOTE_REUSE=<the run's folder> asks the workspaces of an earlier run.

`./dev bench retrieval` runs it against BXMEM_BENCH_HONCHO_URL (a real server, auth
off); tests/test_retrieval_bench.py runs a small one on the fake server (ranking only).
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import corpus as plain
from . import dialogue
from .bm25 import BM25
from .corpus import Corpus, Question
from .honcho_hits import relevant as relevant_before

K = 8
SOURCES = ("agentb", "fleet")
BOTH = "plain BM25 over both workspaces' lines, its 8 shared"


@dataclass
class Tally:
    asked: int = 0
    hit: int = 0
    noise: list[int] = field(default_factory=list)  # hits a never-said question got, each

    @property
    def rate(self) -> float:
        return 100.0 * self.hit / self.asked if self.asked else 0.0

    @property
    def noise_mean(self) -> float:
        return sum(self.noise) / len(self.noise) if self.noise else 0.0

    @property
    def noise_any(self) -> float:
        return 100.0 * sum(1 for n in self.noise if n) / len(self.noise) if self.noise else 0.0


@dataclass
class Shape:
    turns: int
    questions: int = 0
    never: int = 0
    tallies: dict[str, dict[str, Tally]] = field(default_factory=dict)  # place -> system -> tally
    seconds: list[float] = field(default_factory=list)  # recall's wall time, each question
    workspaces: tuple[str, str] = ("", "")

    def tally(self, place: str, system: str) -> Tally:
        return self.tallies.setdefault(place, {}).setdefault(system, Tally())

    def p95(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[int(0.95 * (len(ordered) - 1))] if ordered else 0.0


def _agent(base: Path, name: str, url: str, prefix: str, reads: str = "") -> dict:
    home = base / name / "home"
    (home / "logs").mkdir(parents=True)
    (home / "memory").mkdir(parents=True)
    config = base / name / "bxmem.toml"
    config.write_text(
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{url}"\nagent = "{name}"\nowner = "kyle"\n'
        f'trusted = "{prefix}-{name}-trusted"\nuntrusted = "{prefix}-{name}-untrusted"\n'
        f'fleet = "{prefix}-fleet"\n' + reads
    )
    return {**os.environ, "BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}


def _write(env: dict, bxmem: list[str], corpus: Corpus, notes: Corpus, concluded: set[tuple[str, int]]) -> None:
    """B's logs and journal, then decide, mirror and send until the outbox is empty."""
    from bxmem.demo.brokerd import StubBrokerd

    home = Path(env["BOXMAKER_HOME"])
    journal = []
    for t in corpus.turns:
        lines = [
            {"type": "user", "turn": t.n, "ts": t.ts, "speaker": t.speaker, "text": t.text},
            {"type": "assistant", "turn": t.n, "ts": t.ts, "final": True, "text": t.reply},
            {"type": "turn_end", "turn": t.n, "ts": t.ts, "status": "completed"},
        ]
        if (t.session, t.n) in concluded:  # said as B's own note, and the turn only acknowledges it
            journal.append(
                {
                    "id": f"c-{t.session}-{t.n}",
                    "ts": t.ts,
                    "session": t.session,
                    "op": "note",
                    "trust": "trusted",
                    "entry": f"{t.speaker}: {t.text} / {t.reply}",
                }
            )
            lines[0]["text"], lines[1]["text"] = "(a note for you)", "Noted."
        with open(home / "logs" / f"{t.session}.jsonl", "a") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
    for n, t in enumerate(notes.turns):
        journal.append(
            {"id": f"f-{n}", "ts": t.ts, "session": "fleet-notes", "op": "note", "trust": "untrusted", "entry": t.text}
        )
    with open(home / "memory" / "journal.jsonl", "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in journal))
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        subprocess.run([*bxmem, "decide"], env=env, check=True, capture_output=True)
    subprocess.run([*bxmem, "mirror"], env=env, check=True, capture_output=True)
    for _ in range(200):
        done = subprocess.run([*bxmem, "send", "--json"], env=env, capture_output=True, text=True)
        report = json.loads(done.stdout)
        if report.get("failed") or report.get("outage"):
            raise RuntimeError(f"B's send: {done.stderr[-400:]}")
        if not report.get("pending"):
            return
    raise RuntimeError("B's outbox did not drain")


def _lines(url: str, workspace: str) -> list[tuple[str, str]]:
    """Every message and conclusion a workspace holds, as (who, text): what BM25 ranks."""
    import httpx

    out: list[tuple[str, str]] = []
    with httpx.Client(base_url=url.rstrip("/") + "/v3", timeout=60) as http:

        def pages(path: str, body: dict):
            page = 1
            while True:
                answer = http.post(path, params={"page": page, "size": 100}, json=body).json()
                yield from answer["items"]
                if page >= (answer.get("pages") or 0):
                    return
                page += 1

        for session in pages(f"/workspaces/{workspace}/sessions/list", {}):
            out += [
                (m["peer_id"], m["content"])
                for m in pages(f"/workspaces/{workspace}/sessions/{session['id']}/messages/list", {})
            ]
        out += [(c["observer_id"], c["content"]) for c in pages(f"/workspaces/{workspace}/conclusions/list", {})]
    return out


class Answers:
    """Honcho's answers, kept per (workspace, call, arguments) in a JSON file: a call asked
    before is answered from the file, so a run replayed asks Honcho nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kept: dict[str, object] = json.loads(path.read_text()) if path.exists() else {}
        self.lock = threading.Lock()

    def get(self, key: list, ask):
        name = json.dumps(key)
        with self.lock:
            if name in self.kept:
                return self.kept[name]
        answer = ask()
        with self.lock:
            self.kept[name] = answer
        return answer

    def save(self) -> None:
        self.path.write_text(json.dumps(self.kept))


class KeptClient:
    """A ReadClient's search and conclusion calls, answered from `Answers` (asking the real
    server, when given, for what they do not hold yet)."""

    def __init__(self, answers: Answers, workspace: str, url: str | None) -> None:
        self.answers, self.workspace, self.url = answers, workspace, url

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def _ask(self, method: str, *args):
        def real():
            if self.url is None:
                raise KeyError(f"{method}{args} on {self.workspace}: not kept")
            from bxmem.honcho.client import ReadClient

            with ReadClient(self.url, self.workspace, None, connect_timeout=30, read_timeout=60) as client:
                return getattr(client, method)(*args)

        return self.answers.get([self.workspace, method, *args], real)

    def search(self, query: str, limit: int) -> list[dict]:
        return self._ask("search", query, limit)

    def query_conclusions(self, query: str, peer: str, top_k: int) -> list[dict]:
        return self._ask("query_conclusions", query, peer, top_k)

    def find_conclusions(self, words: list[str], peer: str, size: int) -> list[dict]:
        return self._ask("find_conclusions", words, peer, size)


def _search(answers: Answers, url: str, workspace: str, query: str, limit: int = K) -> list[tuple[str, str]]:
    import httpx

    def ask():
        return httpx.post(
            f"{url.rstrip('/')}/v3/workspaces/{workspace}/search", json={"query": query, "limit": limit}, timeout=60
        ).json()

    return [(m["peer_id"], m["content"]) for m in answers.get([workspace, "raw search", query, limit], ask)]


def _before(answers: Answers, url: str, workspace: str, query: str, read: bool) -> list[str]:
    """What recall showed of a source before issue 26: the question as asked, k messages (the fleet:
    k + 20, its own dropped) and a read source's conclusions of its agent and the owner (k each),
    each kept when it shares two of the query's words, the two lists interleaved."""
    import httpx

    found = _search(answers, url, workspace, query, K if read else K + 20)
    messages = [t for p, t in found if relevant_before(query, t, p) and p != "agenta"]
    if not read:
        return messages[:K]
    concluded: list[str] = []
    for peer in ("agentb", "kyle"):

        def ask(peer=peer):
            answer = httpx.post(
                f"{url.rstrip('/')}/v3/workspaces/{workspace}/conclusions/query",
                timeout=60,
                json={"query": query, "top_k": K, "filters": {"observer_id": peer, "observed_id": peer}},
            )
            return answer.json() if answer.status_code == 200 else []

        concluded += [
            c["content"]
            for c in answers.get([workspace, "raw conclusions", query, peer, K], ask)
            if relevant_before(query, c["content"], peer)
        ]
    merged = [x for pair in zip(messages, concluded, strict=False) for x in pair]
    longer = messages if len(messages) > len(concluded) else concluded
    return (merged + longer[min(len(messages), len(concluded)) :])[:K]


def _answer_lines(corpus: Corpus, question: Question) -> list[str]:
    """The lines that state a question's answer: each answer turn's text, and its reply when
    the reply says the value too (a hit holding one counts; a conclusion holds its turn's text)."""
    turns = {(t.session, t.n): t for t in corpus.turns}
    lines = []
    for answer in question.answers:
        t = turns[answer]
        lines.append(t.text)
        if question.value and question.value.casefold() in t.reply.casefold():
            lines.append(t.reply)
    return lines


def _holds(hit: str, lines: list[str], value: str) -> bool:
    """Whether a hit shows an answer: it holds an answer line whole, or it is a snippet cut from
    one (recall shows a long text around the query's words) that holds the fact's value."""
    part = hit.strip("\u2026")
    return any(line and (line in hit or (part in line and value.casefold() in part.casefold())) for line in lines)


@dataclass
class Setup:
    """What one written run is: its workspaces and the corpora behind them (regenerated from the seed)."""

    prefix: str
    turns: int
    seed: int
    split: str
    corpus: str = "dialogue"  # bench/dialogue.py's (its `split`), or "plain": bench/corpus.py's

    def generate(self, turns: int, seed: int) -> Corpus:
        return dialogue.generate(turns, seed, self.split) if self.corpus == "dialogue" else plain.generate(turns, seed)

    @property
    def workspaces(self) -> tuple[str, str]:
        return f"{self.prefix}-agentb-trusted", f"{self.prefix}-fleet"

    def corpora(self) -> tuple[Corpus, Corpus, list[Question]]:
        history, notes = self.generate(self.turns, self.seed), self.generate(self.turns // 4, self.seed + 1)
        subjects = {q.subject for q in history.questions} | {q.subject for q in notes.questions}
        never = [q for q in self.generate(self.turns, self.seed + 2).questions if q.subject not in subjects][::3]
        return history, notes, never

    def concluded(self, history: Corpus) -> set[tuple[str, int]]:
        """One fact in four is B's own note: its turns become conclusions."""
        by_subject: dict[tuple, list[Question]] = {}
        for q in history.questions:
            by_subject.setdefault(q.subject, []).append(q)
        return {a for n, subject in enumerate(sorted(by_subject)) if n % 4 == 0 for a in by_subject[subject][0].answers}


def write(
    url: str,
    base: Path,
    bxmem: list[str],
    turns: int,
    seed: int,
    split: str = "held-out",
    corpus: str = "dialogue",
    prefix: str = "bxmem-bench",
) -> Setup:
    """Agent B's bxmem writes the history, its notes and its own facts into a fresh pair of workspaces."""
    setup = Setup(f"{prefix}-{secrets.token_hex(3)}", turns, seed, split, corpus)
    history, notes, _never = setup.corpora()
    b = _agent(base, "agentb", url, setup.prefix)
    _write(b, bxmem, history, notes, setup.concluded(history))
    time.sleep(3)  # Honcho embeds each message as it is stored; give the last ones a moment
    (base / "setup.json").write_text(json.dumps(setup.__dict__))
    return setup


def reader(url: str, base: Path, setup: Setup) -> dict:
    """Agent A's home: nothing local, B's workspace read as trusted, the fleet as its own."""
    ws_b, _fleet = setup.workspaces
    return _agent(
        base,
        "agenta",
        url,
        setup.prefix,
        f'\n[[honcho.read]]\nagent = "agentb"\nworkspace = "{ws_b}"\ntrust = "trusted"\n',
    )


def replay(setup: Setup, env: dict, answers: Answers, url: str | None, questions: list[Question]) -> list[dict]:
    """recall's JSON for each question, in process, every Honcho call answered from `answers`
    (asking `url` for the ones not kept yet): the same code as the CLI's, seconds a run."""
    from bxmem.commands import recall
    from bxmem.config import loader

    saved = {name: os.environ.get(name) for name in ("BOXMAKER_HOME", "BXMEM_CONFIG")}
    os.environ.update({name: env[name] for name in saved})
    real = recall._client
    recall._client = lambda config, role: KeptClient(answers, config.workspace(role).name, url)
    try:
        config = loader.load()
        with ThreadPoolExecutor(4 if url else 1) as pool:
            results = list(pool.map(lambda q: recall.render_json(recall.recall(config, q.text, K)), questions))
    finally:
        recall._client = real
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return results


def live(env: dict, bxmem: list[str], questions: list[Question]) -> tuple[list[dict], list[float]]:
    """recall's JSON for each question through the real CLI, one process each, and its wall time."""

    def one(q: Question) -> tuple[dict, float]:
        started = time.monotonic()
        done = subprocess.run(
            [*bxmem, "recall", "--json", "-k", str(K), "--", q.text], env=env, capture_output=True, text=True
        )
        return json.loads(done.stdout), time.monotonic() - started

    out = [one(q) for q in questions]  # one at a time: the latency is recall's own, not two recalls' at once
    return [data for data, _s in out], [seconds for _d, seconds in out]


def score(url: str, setup: Setup, answers: Answers, results: list[dict], seconds: list[float] | None = None) -> Shape:
    """Each system's hit@8 and never-said hits, over the same questions: recall's `results`
    (in the order of `asked(setup)`), plain BM25 over the lines Honcho holds, Honcho's raw search
    and the rule before (their answers kept in `answers` too)."""
    history, notes, never = setup.corpora()
    ws_b, ws_fleet = setup.workspaces
    lines = {
        "agentb": answers.get([ws_b, "every line"], lambda: _lines(url, ws_b)),
        "fleet": [
            (p, t) for p, t in answers.get([ws_fleet, "every line"], lambda: _lines(url, ws_fleet)) if p != "agenta"
        ],
    }
    bm25 = {place: BM25([f"{p} {t}" for p, t in held]) for place, held in lines.items()}
    # Recall reads both workspaces without knowing which holds an answer; BM25 over one of them
    # is told. BM25 over both, its top 8 shared as recall's are, is the baseline without that help.
    every = [(place, p, t) for place, held in lines.items() for p, t in held]
    bm25_both = BM25([f"{p} {t}" for _place, p, t in every])
    shape = Shape(setup.turns, workspaces=(ws_b, ws_fleet), seconds=list(seconds or []))

    def baselines(item: tuple[Question, str | None, Corpus | None]) -> None:
        q, place, _corpus = item
        for ws in ((ws_b if place == "agentb" else ws_fleet),) if place else (ws_b, ws_fleet):
            _search(answers, url, ws, q.text)
            _before(answers, url, ws, q.text, ws == ws_b)

    with ThreadPoolExecutor(4) as pool:  # the baselines' answers, asked (or read back) several at once
        list(pool.map(baselines, asked(setup)))
    for (q, place, corpus), data in zip(asked(setup), results, strict=True):
        for where in (place,) if place else SOURCES:
            ws = ws_b if where == "agentb" else ws_fleet
            answer_lines = _answer_lines(corpus, q) if corpus else []
            found = {"bxmem recall": [h["text"] for h in data["hits"] if h["source"] == where]}
            found["Honcho's search, the question as asked"] = [t for _p, t in _search(answers, url, ws, q.text)]
            found["recall before (as asked, two words)"] = _before(answers, url, ws, q.text, where == "agentb")
            found["plain BM25 over the same lines"] = [lines[where][n][1] for n in bm25[where].search(q.text, K)]
            found[BOTH] = [every[n][2] for n in bm25_both.search(q.text, K) if every[n][0] == where]
            for system, hits in found.items():
                tally = shape.tally(where, system)
                if place:
                    tally.asked += 1
                    tally.hit += any(_holds(h, answer_lines, q.value) for h in hits[:K])
                else:
                    tally.noise.append(len(hits[:K]))
    shape.questions = len(history.questions) + len(notes.questions)
    shape.never = len(never)
    return shape


def asked(setup: Setup) -> list[tuple[Question, str | None, Corpus | None]]:
    """Every question, where its answer is (None: never said there) and the corpus that holds it."""
    history, notes, never = setup.corpora()
    return (
        [(q, "agentb", history) for q in history.questions]
        + [(q, "fleet", notes) for q in notes.questions]
        + [(q, None, None) for q in never]
    )


def run(
    url: str,
    base: Path,
    bxmem: list[str],
    turns: int = 1_000,
    seed: int = 26,
    reuse: Path | None = None,
    end_to_end: bool = True,
    split: str = "held-out",
    corpus: str = "dialogue",
    prefix: str = "bxmem-bench",
) -> tuple[Shape, Shape | None]:
    """Write (or reuse) the workspaces, replay every question in process against the kept
    answers (asking Honcho what is not kept), then, if `end_to_end`, once more through the CLI.
    Returns the replayed shape and the live one."""
    if reuse is not None:
        setup = Setup(**json.loads((reuse / "setup.json").read_text()))
        base = reuse
    else:
        setup = write(url, base, bxmem, turns, seed, split, corpus, prefix)
    answers = Answers(base / "honcho-answers.json")
    a = (
        reader(url, base / "reader", setup)
        if not (base / "reader" / "agenta").exists()
        else {
            **os.environ,
            "BOXMAKER_HOME": str(base / "reader" / "agenta" / "home"),
            "BXMEM_CONFIG": str(base / "reader" / "agenta" / "bxmem.toml"),
        }
    )
    questions = [q for q, _place, _corpus in asked(setup)]
    replayed = score(url, setup, answers, replay(setup, a, answers, url, questions))
    answers.save()
    if not end_to_end:
        return replayed, None
    results, seconds = live(a, bxmem, questions)
    return replayed, score(url, setup, answers, results, seconds)


def table(shapes: list[Shape]) -> list[str]:
    lines = [
        "| turns | place | system | hit@8 | never-said: hits a question | never-said: with any hit |",
        "| ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for s in shapes:
        for place, systems in s.tallies.items():
            for system, t in systems.items():
                lines.append(
                    f"| {s.turns:,} | {'another agent (read)' if place == 'agentb' else 'the fleet'} | {system} | "
                    f"{t.rate:.1f} % ({t.hit}/{t.asked}) | {t.noise_mean:.2f} | {t.noise_any:.0f} % |"
                )
    return lines


def latency(shape: Shape) -> str:
    return (
        f"recall, whole process, two Honcho sources: median {statistics.median(shape.seconds) * 1000:.0f} ms, "
        f"p95 {shape.p95() * 1000:.0f} ms, worst {max(shape.seconds) * 1000:.0f} ms ({len(shape.seconds)} questions)"
    )
