"""The index's two-query ranking gives exactly what the one statement before it
gave (b2c19b1), on indexes with old and new identity entries, a full window or not."""

from __future__ import annotations

import random

import pytest

from bxmem import index as index_module
from bxmem.index import Index, fts_query

# The statement _ranked replaced: the window and every matching identity entry in
# one UNION ALL, deduplicated by GROUP BY. Kept here as the reference.
ONE_STATEMENT = (
    "SELECT d.key, d.kind, d.tag, d.class, d.session, d.ts, d.text FROM (SELECT id, min(score) AS score FROM ("
    "  SELECT * FROM (SELECT rowid AS id, bm25(docs_fts) AS score FROM docs_fts WHERE docs_fts MATCH ?"
    "    ORDER BY rowid DESC LIMIT ?) UNION ALL SELECT rowid, 0.0 FROM docs_fts WHERE docs_fts MATCH ?"
    "    AND rowid IN (SELECT id FROM docs WHERE kind = 'identity')) GROUP BY id"
    ") AS c JOIN docs d ON d.id = c.id ORDER BY {first}c.score, c.id DESC LIMIT ?"
)
WORDS = ["koala", "wombat", "quokka", "numbat", "bilby"]


@pytest.mark.parametrize("seed", range(12))
def test_two_queries_rank_as_the_one_statement_did(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(index_module, "CANDIDATES", 6)  # so windows fill and identity entries fall out of them
    rng = random.Random(seed)
    index = Index(tmp_path / "index.sqlite")
    db = index.db()
    db.execute("BEGIN")
    for n in range(rng.randrange(0, 40)):
        kind = rng.choice(["turn", "turn", "turn", "identity", "note"])
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 6)))
        index.add(f"k{n}", kind, kind if kind == "identity" else "memory", "private", text, session="s")
    db.execute("COMMIT")
    for query in ("koala", "koala wombat", "quokka numbat bilby", "echidna"):
        for joiner, first in ((" ", "(d.kind = 'identity') DESC, "), (" OR ", "")):
            match = fts_query(query, joiner=joiner)
            for limit in (1, 3, 8):
                want = db.execute(ONE_STATEMENT.format(first=first), (match, 6, match, limit)).fetchall()
                got = [row[:7] for row in index._ranked(match, limit, identity_first=bool(first))]
                assert got == want, (seed, query, joiner, limit)
