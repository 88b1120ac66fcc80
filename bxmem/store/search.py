"""The local search: every match ranked by BM25 at a bounded cost (docs/decisions.md has the rule). The cost
of the bound: a passage holding only common words can outrank one holding a rarer word only by holding several.
"""

from __future__ import annotations

import math

from bxmem.retrieval.snippets import SNIPPET_CHARS, around
from bxmem.retrieval.terms import TOKENIZER, forms, query_words, words

IDENTITY_BASE = 1 << 48  # as index.IDENTITY_BASE (a test holds the two equal): identity entries' passages from here

BUDGET = 2_000  # passages scored by bm25 for one query, at most (docs/performance.md, "Recall")
WINDOW = 1_000  # when every word is common: the newest passages scored, for all of them and for any
COMMON = 16_000  # a word in this many passages is left out of the ranking (counting stops there)
IDENTITY_EXTRA = 64  # identity entries ranked below the best, kept in case they move up
POOL = 64  # the best documents by bm25 scored again (_rescored)
EXACT = 0.45  # a query word held as the query wrote it (not only as a stem): this share of its idf more
FOLLOWS = 0.85  # a turn answering (or going on from) a turn that matched: this share of that turn's score
MARK, UNMARK = "\x01", "\x02"  # neutralise() keeps neither in stored text, so a mark is always ours


class LocalHit:
    __slots__ = ("key", "kind", "tag", "trust_class", "session", "ts", "text", "who", "score", "matched", "follows")

    def __init__(
        self,
        key: str,
        kind: str,
        tag: str,
        trust_class: str,
        session: str | None,
        ts: str | None,
        text: str,
        who: str | None = None,
        score: float = 0.0,
        matched: tuple[str, ...] = (),
        follows: str | None = None,
    ) -> None:
        self.key, self.kind, self.tag, self.trust_class = key, kind, tag, trust_class
        self.session, self.ts, self.text, self.who = session, ts, text, who
        self.score, self.matched, self.follows = score, matched, follows


class Term:
    """A query word as the index knows it: the phrases that match it (the word, and its
    irregular forms), and how many passages hold any of them (at most)."""

    __slots__ = ("expr", "df", "word")

    def __init__(self, alternatives: list[tuple[str, int]], word: str = "") -> None:
        # Each a quoted string: matched as a word, never obeyed as query syntax.
        quoted = ['"' + word.replace('"', '""') + '"' for word, _df in alternatives]
        self.expr = quoted[0] if len(quoted) == 1 else "(" + " OR ".join(quoted) + ")"
        self.df = sum(df for _word, df in alternatives)
        self.word = word or alternatives[0][0]  # the query's word, as it was written


def _scratch(db, table: str) -> None:
    """A per-connection scratch table (temp, so a read-only connection may make it):
    bx_words tokenizes the query as the index does (contentless: the fewest tables to
    make on each recall); bx_hits marks and checks a few texts."""
    if table == "bx_words":
        db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.bx_words USING"
            f" fts5(w, content='', columnsize=0, tokenize='{TOKENIZER}')"
        )
        db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.bx_word_terms USING fts5vocab(temp, bx_words, instance)")
        db.execute("INSERT INTO temp.bx_words(bx_words) VALUES ('delete-all')")
    else:
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.bx_hits USING fts5(text, who, tokenize='{TOKENIZER}')")
        db.execute("DELETE FROM temp.bx_hits")


def terms_of(db, words: list[str]) -> list[Term]:
    """The query's words as the index knows them: stemmed as it stems, each once, with
    how many passages hold them (counted up to COMMON); words it has never seen are left out."""
    entries = [(n, form) for n, word in enumerate(words) for form in forms(word)]
    stems: dict[int, tuple[str, ...]] = {e: (form,) for e, (_n, form) in enumerate(entries)}
    if _may_share_a_stem(words):  # "backup backups": stem them as the index does, to count the word once
        _scratch(db, "bx_words")
        db.executemany(
            "INSERT INTO temp.bx_words(rowid, w) VALUES (?, ?)", ((e, form) for e, (_n, form) in enumerate(entries))
        )
        stems = {}
        for e, stem in db.execute("SELECT doc, term FROM temp.bx_word_terms ORDER BY doc, offset"):
            stems[e] = (*stems.get(e, ()), stem)
    families: dict[int, dict[tuple[str, ...], str]] = {}
    for e, (n, form) in enumerate(entries):
        if e in stems:
            families.setdefault(n, {}).setdefault(stems[e], form)
    count = "SELECT count(*) FROM (SELECT 1 FROM docs_fts WHERE docs_fts MATCH ? LIMIT ?)"
    terms: list[Term] = []
    seen: set[frozenset[tuple[str, ...]]] = set()
    for n, family in families.items():
        stemmed = frozenset(family)
        if stemmed in seen:
            continue
        seen.add(stemmed)
        # A form the tokenizer cuts in two is matched, and counted, as a phrase.
        alternatives = [
            (form, db.execute(count, ('"' + form.replace('"', '""') + '"', COMMON)).fetchone()[0])
            for form in family.values()
        ]
        alternatives = [alt for alt in alternatives if alt[1] > 0]
        if alternatives:
            terms.append(Term(alternatives, words[n]))
    return terms


def _may_share_a_stem(words: list[str]) -> bool:
    """Whether two of the words could stem alike. porter only cuts and mends a word's end, so
    two words with one stem begin with the same three letters; most questions have none such,
    and skip making the scratch table (half a millisecond)."""
    starts = [w[:3] for w in words]
    return len(set(starts)) < len(starts)


def _any(terms: list[Term]) -> str:
    return " OR ".join(t.expr for t in terms)


def _ranked(db, terms: list[Term], most: int) -> list[tuple[int, float]]:
    """(passage, bm25) of the best `most` passages, and of every identity entry's passage
    among the candidates, best first (bm25 is lower for better)."""
    picked: list[Term] = []
    total = 0
    for term in terms:  # rarest first
        if not picked or total + term.df <= BUDGET:
            picked.append(term)
            total += term.df
    rest = terms[len(picked) :]
    score = "SELECT rowid AS id, bm25(docs_fts) AS s FROM docs_fts WHERE docs_fts MATCH"
    if terms[0].df <= BUDGET:
        if rest:
            some, others = _any(picked), _any(rest)
            matches = [f"({some}) AND ({others})", f"({some}) NOT ({others})"]
        else:
            matches = [_any(picked)]
        parts, joiner = [f"{score} ?" for _ in matches], " UNION ALL "  # disjoint
    else:
        # Every word is common: the newest passages holding all of them, then the newest holding any.
        # Identity entries' rowids are the highest: the newest begin with them.
        matches = [_any(terms)]
        if len(terms) > 1:
            matches.insert(0, " AND ".join(t.expr for t in terms))
        parts, joiner = [f"SELECT * FROM ({score} ? ORDER BY rowid DESC LIMIT {WINDOW})" for _ in matches], " UNION "
    rows = db.execute(
        f"WITH c AS MATERIALIZED ({joiner.join(parts)}) SELECT id, s FROM"
        f" (SELECT id, s FROM c ORDER BY s, id DESC LIMIT ?) UNION SELECT id, s FROM c WHERE id >= {IDENTITY_BASE}",
        (*matches, most),
    ).fetchall()
    return sorted(rows, key=lambda row: (row[1], -row[0]))


class _Doc:
    __slots__ = (
        "id",
        "score",
        "passage",
        "key",
        "kind",
        "tag",
        "trust_class",
        "session",
        "ts",
        "who",
        "text",
        "reply_at",
        "start",
        "length",
        "covers",
        "follows",
    )

    def __init__(
        self, row: tuple, score: float, passage: int, start: int, length: int, follows: str | None = None
    ) -> None:
        (
            self.id,
            self.key,
            self.kind,
            self.tag,
            self.trust_class,
            self.session,
            self.ts,
            self.who,
            self.text,
            self.reply_at,
        ) = row
        self.score, self.passage, self.start, self.length = score, passage, start, length
        self.follows = follows
        self.covers: frozenset[int] = frozenset()


def _documents(db, ranked: list[tuple[int, float]], top: int, terms: list[Term]) -> tuple[list[_Doc], int]:
    """The documents of the ranked passages, each at its best passage, in rank order: the best `top`, then the best
    IDENTITY_EXTRA identity entries below them; and how many documents the passages held."""
    ids = [pid for pid, _s in ranked]
    if not ids:
        return [], 0
    places = {
        pid: (doc, start, length)
        for pid, doc, start, length in db.execute(
            f"SELECT id, doc, start, len FROM passages WHERE id IN ({','.join('?' * len(ids))})", ids
        )
    }
    best: dict[int, tuple[int, float]] = {}
    for pid, s in ranked:
        doc = places[pid][0]
        if doc not in best:
            best[doc] = (pid, s)
    order, best, follows = _rescored(db, list(best), best, places, terms)
    extra = [doc for doc in order[top:] if best[doc][0] >= IDENTITY_BASE][:IDENTITY_EXTRA]
    wanted = order[:top] + extra
    rows = db.execute(
        "SELECT id, key, kind, tag, class, session, ts, who, text, reply_at FROM docs"
        f" WHERE id IN ({','.join('?' * len(wanted))})",
        wanted,
    ).fetchall()
    by_id = {row[0]: row for row in rows}
    docs = []
    for doc in wanted:
        if doc in by_id:
            pid, s = best[doc]
            docs.append(_Doc(by_id[doc], s, pid, places[pid][1], places[pid][2], follows.get(doc)))
    return docs, len(order)


def _rescored(
    db, order: list[int], best: dict[int, tuple[int, float]], places: dict, terms: list[Term]
) -> tuple[list[int], dict[int, tuple[int, float]], dict[int, str]]:
    """The best POOL documents scored again: bm25 of the best passage, plus EXACT x each query
    word's idf for the words it holds as the query wrote them; then each turn that follows one of
    them (an answer to its question, or the same speaker going on) gains FOLLOWS x that turn's
    score, and is brought in when bm25 had not found it. Returns the order, the scores, and for
    each document lifted so, the document it follows."""
    pool = order[:POOL]
    total = (db.execute("SELECT max(id) FROM passages WHERE id < ?", (IDENTITY_BASE,)).fetchone()[0] or 0) + 1
    idf = {t.word: math.log(1 + (total - t.df + 0.5) / (t.df + 0.5)) for t in terms}
    rows = db.execute(
        f"SELECT id, key, who, text, reply_at FROM docs WHERE id IN ({','.join('?' * len(pool))})", pool
    ).fetchall()
    score = {doc: s for doc, (_pid, s) in best.items()}
    said: dict[int, tuple[str, str | None, str]] = {}  # key, speaker, what the speaker said (the reply left out)
    after: dict[str, int] = {}  # the key of the turn after a pool document -> that document
    for doc, key, who, text, reply_at in rows:
        _doc, start, length = places[best[doc][0]]
        score[doc] -= EXACT * _exact(text[start : start + length], who, idf)
        said[doc] = (key, who, text[: reply_at - 1] if reply_at else text)
        if key.startswith("turn:"):
            head, _sep, n = key.rpartition(":")
            if n.isdigit():
                after[f"{head}:{int(n) + 1}"] = doc
    follows: dict[int, str] = {}
    if after:
        lifted = dict(score)
        for key, doc, who, text in db.execute(
            f"SELECT key, id, who, text FROM docs WHERE key IN ({','.join('?' * len(after))})", list(after)
        ):
            before = after[key]
            _key, first_who, asked = said[before]
            same = bool(who) and who == first_who
            if score[before] >= 0 or not (same or "?" in asked):
                continue
            if doc not in said:  # its own score, as a pool document's (its best passage is not known: its start)
                own = score.get(doc, 0.0) - (
                    EXACT * _exact(text[: 4 * SNIPPET_CHARS], who, idf) if doc not in score else 0.0
                )
            else:
                own = score[doc]
            if own + FOLLOWS * score[before] < lifted.get(doc, 0.0):
                lifted[doc] = own + FOLLOWS * score[before]
                follows[doc] = said[before][0]
        new = [doc for doc in follows if doc not in best]
        if new:
            for pid, doc, start, length in db.execute(
                "SELECT id, doc, start, len FROM passages WHERE id IN"
                f" (SELECT min(id) FROM passages WHERE doc IN ({','.join('?' * len(new))}) GROUP BY doc)",
                new,
            ):
                best[doc] = (pid, 0.0)
                places[pid] = (doc, start, length)
        score = lifted
    best = {doc: (best[doc][0], score[doc]) for doc in score if doc in best}
    return sorted(best, key=lambda doc: (best[doc][1], -doc)), best, follows


def _exact(text: str, who: str | None, idf: dict[str, float]) -> float:
    """The idf of the query's words `text` (or its speaker) holds as the query wrote them."""
    held = set(words(text))
    if who:
        held.add(who.casefold())
    return sum(weight for word, weight in idf.items() if word in held)


def _window(doc: _Doc) -> tuple[int, str]:
    if len(doc.text) <= 4 * SNIPPET_CHARS:
        return 0, doc.text
    start = max(0, doc.start - 2 * SNIPPET_CHARS)
    return start, doc.text[start : doc.start + doc.length + 2 * SNIPPET_CHARS]


def _mark(db, docs: list[_Doc], terms: list[Term]) -> dict[int, list[tuple[int, int]]]:
    """The matched words of each document (spans in its text), and which terms each one
    holds (_Doc.covers, as indexes into `terms`), from a scratch copy of each."""
    _scratch(db, "bx_hits")
    offsets = {}
    for doc in docs:
        offsets[doc.id], copy = _window(doc)
        db.execute("INSERT INTO temp.bx_hits(rowid, text, who) VALUES (?, ?, ?)", (doc.id, copy, doc.who or ""))
    marks: dict[int, list[tuple[int, int]]] = {}
    for doc_id, marked in db.execute(
        f"SELECT rowid, highlight(bx_hits, 0, '{MARK}', '{UNMARK}') FROM bx_hits WHERE bx_hits MATCH ?", (_any(terms),)
    ):
        marks[doc_id] = _spans(marked, offsets[doc_id])
    held: dict[int, set[int]] = {}
    for n, term in enumerate(terms):
        for (doc_id,) in db.execute("SELECT rowid FROM bx_hits WHERE bx_hits MATCH ?", (term.expr,)):
            held.setdefault(doc_id, set()).add(n)
    for doc in docs:
        doc.covers = frozenset(held.get(doc.id, ()))
    return marks


def _spans(marked: str, offset: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    at = plain = 0
    while True:
        start = marked.find(MARK, at)
        if start < 0:
            return spans
        end = marked.find(UNMARK, start)
        plain += start - at
        spans.append((offset + plain, offset + plain + end - start - 1))
        plain += end - start - 1
        at = end + 1


def _identity_first(docs: list[_Doc]) -> list[_Doc]:
    """Each identity entry, in rank order, moves up past every document just above it
    that is not an identity entry and holds no query word the entry does not."""
    out: list[_Doc] = []
    for doc in docs:
        at = len(out)
        if doc.kind == "identity":
            while at and out[at - 1].kind != "identity" and out[at - 1].covers <= doc.covers:
                at -= 1
        out.insert(at, doc)
    return out


def search(db, query: str, limit: int) -> list[LocalHit]:
    words = query_words(query)
    if not words or limit < 1:
        return []
    terms = terms_of(db, words)
    if not terms:
        return []
    useful = sorted((t for t in terms if t.df < COMMON), key=lambda t: t.df) or [min(terms, key=lambda t: t.df)]
    top, most = limit + 8, 8 * (limit + 8)  # a few more than asked: identity entries may move up among them
    while True:
        ranked = _ranked(db, useful, most)
        docs, held = _documents(db, ranked, top, useful)
        if held >= top or len(ranked) < most:
            break
        most *= 4  # a long document held most of the best passages: look further
    # Marks for the texts a snippet will cut, and which words each holds: every hit says which it
    # matched, and an identity entry moves up by them.
    identity = any(d.kind == "identity" for d in docs)
    marks = _mark(db, docs if identity else docs[:limit], useful) if docs else {}
    if identity:
        docs = _identity_first(docs)
    return [
        LocalHit(
            d.key,
            d.kind,
            d.tag,
            d.trust_class,
            d.session,
            d.ts,
            around(d.text, d.reply_at, marks.get(d.id, [])),
            d.who,
            d.score,
            _in_query_order(words, {useful[n].word for n in d.covers}),
            d.follows,
        )
        for d in docs[:limit]
    ]


def _in_query_order(words: list[str], held: set[str]) -> tuple[str, ...]:
    return tuple(word for word in words if word in held)
