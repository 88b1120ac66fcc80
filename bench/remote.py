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

`./dev bench retrieval` runs it against BXMEM_BENCH_HONCHO_URL (a real server, auth
off); tests/test_retrieval_bench.py runs a small one on the fake server (ranking only).
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .bm25 import BM25
from .corpus import Corpus, Question, generate
from .honcho_hits import relevant as relevant_before

K = 8
SOURCES = ("agentb", "fleet")


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
    config.write_text(f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{url}"\nagent = "{name}"\nowner = "kyle"\n'
                      f'trusted = "{prefix}-{name}-trusted"\nuntrusted = "{prefix}-{name}-untrusted"\n'
                      f'fleet = "{prefix}-fleet"\n' + reads)
    return {**os.environ, "BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}


def _write(env: dict, bxmem: list[str], corpus: Corpus, notes: Corpus, concluded: set[tuple[str, int]]) -> None:
    """B's logs and journal, then decide, mirror and send until the outbox is empty."""
    from bxmem.demo.brokerd import StubBrokerd

    home = Path(env["BOXMAKER_HOME"])
    journal = []
    for t in corpus.turns:
        lines = [{"type": "user", "turn": t.n, "ts": t.ts, "speaker": t.speaker, "text": t.text},
                 {"type": "assistant", "turn": t.n, "ts": t.ts, "final": True, "text": t.reply},
                 {"type": "turn_end", "turn": t.n, "ts": t.ts, "status": "completed"}]
        if (t.session, t.n) in concluded:  # said as B's own note, and the turn only acknowledges it
            journal.append({"id": f"c-{t.session}-{t.n}", "ts": t.ts, "session": t.session, "op": "note",
                            "trust": "trusted", "entry": f"{t.speaker}: {t.text} / {t.reply}"})
            lines[0]["text"], lines[1]["text"] = "(a note for you)", "Noted."
        with open(home / "logs" / f"{t.session}.jsonl", "a") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
    for n, t in enumerate(notes.turns):
        journal.append({"id": f"f-{n}", "ts": t.ts, "session": "fleet-notes", "op": "note", "trust": "untrusted",
                        "entry": t.text})
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
            out += [(m["peer_id"], m["content"]) for m in pages(f"/workspaces/{workspace}/sessions/{session['id']}/messages/list", {})]
        out += [(c["observer_id"], c["content"]) for c in pages(f"/workspaces/{workspace}/conclusions/list", {})]
    return out


def _search(url: str, workspace: str, query: str, limit: int = K) -> list[tuple[str, str]]:
    import httpx

    answer = httpx.post(f"{url.rstrip('/')}/v3/workspaces/{workspace}/search", json={"query": query, "limit": limit},
                        timeout=60).json()
    return [(m["peer_id"], m["content"]) for m in answer]


def _before(url: str, workspace: str, query: str, read: bool) -> list[str]:
    """What recall showed of a source before issue 26: the question as asked, k messages (the fleet:
    k + 20, its own dropped) and a read source's conclusions of its agent and the owner (k each),
    each kept when it shares two of the query's words, the two lists interleaved."""
    import httpx

    found = _search(url, workspace, query, K if read else K + 20)
    messages = [t for p, t in found if relevant_before(query, t, p) and p != "agenta"]
    if not read:
        return messages[:K]
    concluded: list[str] = []
    for peer in ("agentb", "kyle"):
        answer = httpx.post(f"{url.rstrip('/')}/v3/workspaces/{workspace}/conclusions/query", timeout=60,
                            json={"query": query, "top_k": K, "filters": {"observer_id": peer, "observed_id": peer}})
        if answer.status_code == 200:
            concluded += [c["content"] for c in answer.json() if relevant_before(query, c["content"], peer)]
    merged = [x for pair in zip(messages, concluded, strict=False) for x in pair]
    longer = messages if len(messages) > len(concluded) else concluded
    return (merged + longer[min(len(messages), len(concluded)):])[:K]


def _answers(question: Question, texts: list[str]) -> set[str]:
    """The lines that state a question's answer: those holding its value."""
    value = question.value.casefold()
    return {t for t in texts if value and value in t.casefold()}


def run(url: str, base: Path, bxmem: list[str], turns: int = 1_000, seed: int = 26) -> Shape:
    prefix = f"i26-bench-{secrets.token_hex(3)}"
    history, notes = generate(turns, seed), generate(turns // 4, seed + 1)
    subjects = {q.subject for q in history.questions} | {q.subject for q in notes.questions}
    never = [q for q in generate(turns, seed + 2).questions if q.subject not in subjects][::3]
    by_subject: dict[tuple, list[Question]] = {}
    for q in history.questions:
        by_subject.setdefault(q.subject, []).append(q)
    concluded = {a for n, subject in enumerate(sorted(by_subject)) if n % 4 == 0 for a in by_subject[subject][0].answers}
    b = _agent(base, "agentb", url, prefix)
    _write(b, bxmem, history, notes, concluded)
    ws_b, ws_fleet = f"{prefix}-agentb-trusted", f"{prefix}-fleet"
    a = _agent(base, "agenta", url, prefix, f'\n[[honcho.read]]\nagent = "agentb"\nworkspace = "{ws_b}"\ntrust = "trusted"\n')
    time.sleep(3)  # Honcho embeds each message as it is stored; give the last ones a moment
    lines = {"agentb": _lines(url, ws_b), "fleet": [(p, t) for p, t in _lines(url, ws_fleet) if p != "agenta"]}
    bm25 = {place: BM25([f"{p} {t}" for p, t in held]) for place, held in lines.items()}
    shape = Shape(turns, workspaces=(ws_b, ws_fleet))
    asked = [(q, "agentb") for q in history.questions] + [(q, "fleet") for q in notes.questions] + \
            [(q, None) for q in never]

    def one(item: tuple[Question, str | None]) -> tuple[Question, str | None, dict, float]:
        q, _place = item
        started = time.monotonic()
        done = subprocess.run([*bxmem, "recall", "--json", "-k", str(K), "--", q.text], env=a, capture_output=True,
                              text=True)
        return item[0], item[1], json.loads(done.stdout), time.monotonic() - started

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, asked))
    for q, place, data, seconds in results:
        shape.seconds.append(seconds)
        for where in (place,) if place else SOURCES:
            ws = ws_b if where == "agentb" else ws_fleet
            texts = [t for _p, t in lines[where]]
            answers = _answers(q, texts) if place else set()
            found = {"bxmem recall": [h["text"] for h in data["hits"] if h["source"] == where]}
            found["Honcho's search, the question as asked"] = [t for _p, t in _search(url, ws, q.text)]
            found["recall before (as asked, two words)"] = _before(url, ws, q.text, where == "agentb")
            found["plain BM25 over the same lines"] = [lines[where][n][1] for n in bm25[where].search(q.text, K)]
            for system, hits in found.items():
                tally = shape.tally(where, system)
                if place:
                    tally.asked += 1
                    # a hit's text may be a snippet of a long line: it counts when it holds the answer's value
                    tally.hit += any(h in answers or (q.value and q.value.casefold() in h.casefold()) for h in hits[:K])
                else:
                    tally.noise.append(len(hits[:K]))
    shape.questions = len(history.questions) + len(notes.questions)
    shape.never = len(never)
    return shape


def table(shapes: list[Shape]) -> list[str]:
    lines = ["| turns | place | system | hit@8 | never-said: hits a question | never-said: with any hit |",
             "| ---: | --- | --- | ---: | ---: | ---: |"]
    for s in shapes:
        for place, systems in s.tallies.items():
            for system, t in systems.items():
                lines.append(f"| {s.turns:,} | {'another agent (read)' if place == 'agentb' else 'the fleet'} | {system} | "
                             f"{t.rate:.1f} % ({t.hit}/{t.asked}) | {t.noise_mean:.2f} | {t.noise_any:.0f} % |")
    return lines


def latency(shape: Shape) -> str:
    return (f"recall, whole process, two Honcho sources: median {statistics.median(shape.seconds) * 1000:.0f} ms, "
            f"p95 {shape.p95() * 1000:.0f} ms, worst {max(shape.seconds) * 1000:.0f} ms ({len(shape.seconds)} questions)")
