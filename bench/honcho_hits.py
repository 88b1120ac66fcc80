"""What recall's filter on Honcho's hits keeps and drops, against a real Honcho.

Honcho's search ranks every message it holds (semantic and full-text, fused)
and has no cut-off: it always answers with its nearest texts. Its conclusion
query takes a `distance` (the largest cosine distance to keep); message search
returns no score at all. recall keeps a Honcho hit only when it shares two of
the query's words (relevance.relevant; one, before). This measures, on the
generated corpus with its paraphrased questions:

- another agent's workspace: that agent's turns as messages, and facts of its
  own as conclusions (as mirror writes identity entries);
- the fleet workspace: notes of several peers, as messages;

for questions whose answer is there (is it kept?) and questions about something
never written there (is anything kept? every kept hit is a near miss), each
filter: none, one word, two words, half the query's words, a distance, and a
distance with each word filter (`measure`); and what the agent then sees:
recall's interleaved top 8 of the local index and both workspaces (`end_to_end`).

    BXMEM_BENCH_HONCHO_URL=http://127.0.0.1:8000 ./dev bench honcho

Needs a server with auth off and real embeddings (the rig's STUB_EMBED=wordllama);
every workspace it makes is named i19-<run>-…, and left in place.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field

from bxmem.retrieval.relevance import stems

from .corpus import Corpus, Question, generate

K = 8  # as recall asks: -k 8

# The filter recall had before (kept to compare): one word shared, first 5 letters, about 50 stop words.
_BEFORE_STOP_WORDS = """
a an and are as at be but by can did do does for from had has have how i if in is it its me my no
not of on or our so that the their then there these they this to was we were what when where which
who why will with you your
"""
_BEFORE_STOP = frozenset(_BEFORE_STOP_WORDS.split())


def relevant(query: str, text: str, author: str | None = None) -> bool:
    """recall's rule before issue 26 (kept to compare): two of the query's words shared (every
    one, when it has fewer), the author one of them, words by their first 5 letters."""
    asked = stems(query)
    held = stems(text) | (stems(author.replace("_", " ")) if author else set())
    return bool(asked) and len(asked & held) >= min(2, len(asked))


def one_word_before(query: str, text: str) -> bool:
    def cut(t: str) -> set[str]:
        return {w[:5] for w in re.findall(r"\w+", t.casefold()) if w not in _BEFORE_STOP}

    return not cut(query).isdisjoint(cut(text))


DISTANCES = (0.4, 0.5, 0.6)


def _words_filters(query: str, hits: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The word filters over (author, text) hits: recall's before (one word), now (two words,
    the author one of them), and a stricter one (half the query's words)."""
    asked = stems(query)

    def held(author: str, text: str) -> set[str]:
        return stems(text) | stems(author.replace("_", " "))

    return {
        "one word (before)": [t for _a, t in hits if one_word_before(query, t)],
        "two words (now)": [t for a, t in hits if relevant(query, t, a)],
        "half the query's words": [t for a, t in hits if asked and 2 * len(asked & held(a, t)) >= len(asked)],
    }


@dataclass
class Tally:
    asked: int = 0
    answered: int = 0  # questions with an answer among the kept hits
    shown: int = 0  # questions (absent: about something never written) with any kept hit
    noise: int = 0  # kept hits that are not an answer

    def add(self, kept: list[str], answers: set[str]) -> None:
        self.asked += 1
        found = [text for text in kept if text in answers]
        self.answered += bool(found)
        self.shown += bool(kept)
        self.noise += len(kept) - len(found)


@dataclass
class Report:
    # target -> filter -> (present, absent)
    tallies: dict[str, dict[str, tuple[Tally, Tally]]] = field(default_factory=dict)
    seconds: float = 0.0

    def tally(self, target: str, name: str) -> tuple[Tally, Tally]:
        return self.tallies.setdefault(target, {}).setdefault(name, (Tally(), Tally()))

    def lines(self) -> list[str]:
        out = [
            "| workspace, hits | filter | answer kept (answer there) | hits kept that are no answer, a question | "
            "questions about the never-said with a hit kept |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for target, filters in self.tallies.items():
            for name, (present, absent) in filters.items():
                noise = (present.noise + absent.noise) / max(1, present.asked + absent.asked)
                out.append(
                    f"| {target} | {name} | {present.answered}/{present.asked} "
                    f"({100 * present.answered / max(1, present.asked):.0f} %) | {noise:.2f} | "
                    f"{absent.shown}/{absent.asked} ({100 * absent.shown / max(1, absent.asked):.0f} %) |"
                )
        return out


class _Honcho:
    def __init__(self, url: str) -> None:
        import httpx

        self.http = httpx.Client(base_url=url.rstrip("/") + "/v3", timeout=30)

    def post(self, path: str, body: dict) -> object:
        answer = self.http.post(path, json=body)
        answer.raise_for_status()
        return answer.json() if answer.content else None

    def workspace(self, ws: str, peers: set[str]) -> None:
        self.post("/workspaces", {"id": ws})
        for peer in sorted(peers):
            self.post(f"/workspaces/{ws}/peers", {"id": peer})

    def session(self, ws: str, session: str, peers: set[str]) -> None:
        self.post(f"/workspaces/{ws}/sessions", {"id": session, "peers": {p: {} for p in sorted(peers)}})

    def messages(self, ws: str, session: str, messages: list[dict]) -> None:
        for first in range(0, len(messages), 100):
            self.post(f"/workspaces/{ws}/sessions/{session}/messages", {"messages": messages[first : first + 100]})

    def search(self, ws: str, query: str, limit: int) -> list[str]:
        return [content for _peer, content in self.search_by(ws, query, limit)]

    def search_by(self, ws: str, query: str, limit: int) -> list[tuple[str, str]]:
        """(who wrote it, what it says) of each message found."""
        found = self.post(f"/workspaces/{ws}/search", {"query": query, "limit": limit})
        return (
            [(str(m.get("peer_id") or ""), str(m.get("content") or "")) for m in found]
            if isinstance(found, list)
            else []
        )

    def conclusions(self, ws: str, query: str, peer: str, distance: float | None) -> list[str]:
        body: dict = {"query": query, "top_k": K, "filters": {"observer_id": peer, "observed_id": peer}}
        if distance is not None:
            body["distance"] = distance
        found = self.post(f"/workspaces/{ws}/conclusions/query", body)
        return [str(c.get("content") or "") for c in found] if isinstance(found, list) else []


def _said(corpus: Corpus, question: Question) -> set[str]:
    turns = {(t.session, t.n): t for t in corpus.turns}
    return {turns[a].text for a in question.answers} | {turns[a].reply for a in question.answers}


def _plant(
    honcho: _Honcho, run: str, other: Corpus, fleet: Corpus
) -> tuple[str, str, dict[str, dict[tuple, set[str]]]]:
    """Agent `agentb`'s workspace (its turns as messages, but one fact in two stated only as
    a conclusion of its own, as mirror writes an identity entry) and the fleet (notes of three
    peers). Returns the workspaces and, per place, by subject, the texts that answer there."""
    b, f = f"i19-{run}-b", f"i19-{run}-fleet"
    subjects = sorted({q.subject for q in other.questions})
    concluded = set(subjects[1::2])
    answer_of: dict[tuple[str, int], tuple] = {}
    for q in other.questions:
        for a in q.answers:
            answer_of[a] = q.subject
    speakers = {t.speaker for t in other.turns} - {"agentb"}
    honcho.workspace(b, speakers | {"agentb"})
    by_session: dict[str, list] = {}
    for t in other.turns:
        by_session.setdefault(t.session, []).append(t)
    conclusions = []
    places: dict[str, dict[tuple, set[str]]] = {"agent's messages": {}, "agent's conclusions": {}, "fleet notes": {}}
    for session, turns in by_session.items():
        honcho.session(b, session, {t.speaker for t in turns} | {"agentb"})
        messages = []
        for t in turns:
            subject = answer_of.get((t.session, t.n))
            if subject in concluded:
                conclusions.append(
                    {"content": t.text, "observer_id": "agentb", "observed_id": "agentb", "session_id": session}
                )
                places["agent's conclusions"].setdefault(subject, set()).add(t.text)
                continue
            messages += [{"peer_id": t.speaker, "content": t.text}, {"peer_id": "agentb", "content": t.reply}]
            if subject is not None:
                places["agent's messages"].setdefault(subject, set()).update((t.text, t.reply))
        if messages:
            honcho.messages(b, session, messages)
    for first in range(0, len(conclusions), 50):
        honcho.post(f"/workspaces/{b}/conclusions", {"conclusions": conclusions[first : first + 50]})
    peers = ["agentc", "agentd", "owner"]
    honcho.workspace(f, set(peers))
    honcho.session(f, "notes", set(peers))
    honcho.messages(f, "notes", [{"peer_id": peers[n % 3], "content": t.text} for n, t in enumerate(fleet.turns)])
    fleet_turns = {(t.session, t.n): t for t in fleet.turns}
    for q in fleet.questions:
        places["fleet notes"].setdefault(q.subject, set()).update(fleet_turns[a].text for a in q.answers)
    return b, f, places


def measure(url: str, turns: int = 300, seed: int = 190) -> Report:
    started = time.monotonic()
    run = secrets.token_hex(3)
    other, fleet, absent_from = generate(turns, seed), generate(turns // 2, seed + 1), generate(turns, seed + 2)
    honcho = _Honcho(url)
    b, f, places = _plant(honcho, run, other, fleet)
    planted = set(places["agent's messages"]) | set(places["agent's conclusions"]) | set(places["fleet notes"])
    never = [q for q in absent_from.questions if q.subject not in planted]
    report = Report()
    for target, ws in (("agent's messages", b), ("agent's conclusions", b), ("fleet notes", f)):
        here = places[target]
        present = [q for q in other.questions + fleet.questions if q.subject in here]
        for questions, absent in ((present, False), (never, True)):
            for q in questions:
                answers = set() if absent else here[q.subject]
                if target == "agent's conclusions":
                    everything = honcho.conclusions(ws, q.text, "agentb", None)
                    results = {"none": everything, **_words_filters(q.text, [("agentb", t) for t in everything])}
                    for distance in DISTANCES:
                        near = honcho.conclusions(ws, q.text, "agentb", distance)
                        results[f"distance <= {distance}"] = near
                        for name, kept in _words_filters(q.text, [("agentb", t) for t in near]).items():
                            results[f"distance <= {distance} and {name}"] = kept
                else:
                    limit = K if target != "fleet notes" else K + 20  # as recall asks the fleet
                    found = honcho.search_by(ws, q.text, limit)
                    results = {"none": [t for _a, t in found], **_words_filters(q.text, found)}
                for name, kept in results.items():
                    report.tally(target, name)[1 if absent else 0].add(kept[:K], answers)
    report.seconds = time.monotonic() - started
    return report


# --- what the agent sees: recall's interleaved top k, with each filter ------------------------


def _before(query: str, text: str, _author: str) -> bool:
    return one_word_before(query, text)


POLICIES: dict[str, tuple] = {
    # name: (the filter on messages and fleet notes, on conclusions, the distance asked for conclusions)
    "no filter": (None, None, None),
    "one word (recall before)": (_before, _before, None),
    "two words (recall now)": (relevant, relevant, None),
    "conclusions within 0.5, messages two words": (relevant, None, 0.5),
    "conclusions within 0.6, messages two words": (relevant, None, 0.6),
}


@dataclass
class Seen:
    asked: int = 0
    answered: int = 0  # an answer among the k hits recall gives
    foreign: int = 0  # hits from Honcho that answer nothing

    def line(self) -> str:
        return (
            f"{self.answered}/{self.asked} ({100 * self.answered / max(1, self.asked):.0f} %), "
            f"{self.foreign / max(1, self.asked):.1f}"
        )


def end_to_end(url: str, local_turns: int = 1_000, other_turns: int = 300, seed: int = 190) -> list[str]:
    """hit@8 of recall's interleaved hits (the local index, the agent's workspace, the fleet)
    for questions answered locally, in the other agent's workspace, in the fleet, or nowhere."""
    import tempfile
    from pathlib import Path

    from bxmem.commands.recall import Hit, run_sources, snippet
    from bxmem.store.index import Index

    mine, other, fleet = generate(local_turns, 19), generate(other_turns, seed), generate(other_turns // 2, seed + 1)
    absent_from = generate(other_turns, seed + 2)
    honcho = _Honcho(url)
    b, f, places = _plant(honcho, secrets.token_hex(3), other, fleet)
    remote: dict[tuple, set[str]] = {}
    for here in places.values():
        for subject, texts in here.items():
            remote.setdefault(subject, set()).update(snippet(t) for t in texts)
    local_subjects = {q.subject for q in mine.questions}
    groups = {
        "answer in the local index": [q for q in mine.questions[::3]],
        "answer in the other agent's workspace": [q for q in other.questions if q.subject in remote],
        "answer in the fleet": [q for q in fleet.questions if q.subject in remote],
        "never said anywhere": [
            q for q in absent_from.questions if q.subject not in remote and q.subject not in local_subjects
        ][::2],
    }
    seen = {(policy, group): Seen() for policy in POLICIES for group in groups}
    with tempfile.TemporaryDirectory() as tmp:
        index = Index(Path(tmp) / "index.sqlite3")
        db = index.db()
        db.execute("BEGIN")
        for t in mine.turns:
            index.add(
                f"turn:{t.session}:{t.n}",
                "turn",
                "memory",
                "private",
                t.text,
                reply=t.reply,
                session=t.session,
                ts=t.ts,
                who=t.speaker,
            )
        db.execute("COMMIT")
        for group, questions in groups.items():
            for q in questions:
                local = [
                    Hit(
                        "local",
                        h.tag,
                        h.trust_class,
                        h.text,
                        where=f"turn {h.key.rsplit(':', 1)[1]}",
                        session=h.session,
                    )
                    for h in index.search(q.text, K)
                ]
                messages = honcho.search_by(b, q.text, K)
                concluded = {None: honcho.conclusions(b, q.text, "agentb", None)}
                for distance in {p[2] for p in POLICIES.values() if p[2] is not None}:
                    concluded[distance] = honcho.conclusions(b, q.text, "agentb", distance)
                notes = honcho.search_by(f, q.text, K + 20)
                answers = {(s, n) for s, n in q.answers} if group == "answer in the local index" else set()
                texts = remote.get(q.subject, set()) if group != "answer in the local index" else set()
                for policy, (words, concluding, distance) in POLICIES.items():
                    kept_messages = [m for a, m in messages if words is None or words(q.text, m, a)]
                    kept_conclusions = [
                        c for c in concluded[distance] if concluding is None or concluding(q.text, c, "agentb")
                    ]
                    merged = [x for pair in zip(kept_messages, kept_conclusions, strict=False) for x in pair]
                    longer = kept_messages if len(kept_messages) > len(kept_conclusions) else kept_conclusions
                    merged += longer[min(len(kept_messages), len(kept_conclusions)) :]
                    read = [Hit("agentb", "memory", "private", snippet(t)) for t in merged][:K]
                    fleet_hits = [
                        Hit("fleet", "memory-tainted", "private", snippet(t))
                        for a, t in notes
                        if words is None or words(q.text, t, a)
                    ][:K]
                    result = run_sources(
                        [
                            ("local", 1.0, local.copy),
                            ("agentb", 1.0, read.copy),
                            ("fleet", 1.0, fleet_hits.copy),
                        ],
                        K,
                    )
                    tally = seen[(policy, group)]
                    tally.asked += 1
                    hit = False
                    for h in result.hits:
                        if h.source == "local":
                            hit = hit or (h.session, int((h.where or "turn 0").split()[-1])) in answers
                        elif h.text in texts:
                            hit = True
                        else:
                            tally.foreign += 1
                    tally.answered += hit
    head = "| filter on Honcho's hits | " + " | ".join(groups) + " |"
    lines = [head, "| --- |" + " ---: |" * len(groups)]
    for policy in POLICIES:
        lines.append(f"| {policy} | " + " | ".join(seen[(policy, g)].line() for g in groups) + " |")
    return lines
