"""The local index, SQLite FTS5. A document is stored once and indexed as passages read from it through a
view. Identity entries' passages take rowids from IDENTITY_BASE up, so store/search.py keeps every matching
identity entry in sight by rowid alone.
"""

from __future__ import annotations

# The C module, not the `sqlite3` package: the package only re-exports it and
# registers the default date adapters, which imports datetime on every recall
# (docs/performance.md, "Recall"). Nothing here binds or converts dates: timestamps are text.
import _sqlite3 as sqlite3
import os
from pathlib import Path

from bxmem.retrieval.terms import TOKENIZER, passages
from bxmem.store.files import check_regular
from bxmem.trust.sanitize import neutralise

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from bxmem.store.search import LocalHit

INDEX_FILE = "index.sqlite3"
IDENTITY_BASE = 1 << 48  # the first rowid of an identity entry's passage; turns and notes stay below
# A change to what is indexed (the schema, the tokenizer, terms.passages) is a
# new version: an index of another version is rebuilt, never read.
SCHEMA_VERSION = 2

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS docs(
    id INTEGER PRIMARY KEY,
    key TEXT UNIQUE NOT NULL,      -- turn:<session>:<n> | edit:<id>#<n> | undo:<id>#<n>
    kind TEXT NOT NULL,            -- turn | identity | note
    tag TEXT NOT NULL,             -- identity | memory | memory-tainted
    class TEXT NOT NULL,           -- public | private | secret
    file TEXT,                     -- memory.md | user.md for identity entries
    session TEXT,
    ts TEXT,
    who TEXT,                      -- the speaker's peer name, for a turn that has one
    text TEXT NOT NULL,            -- a turn: what was said, a newline, the reply
    reply_at INTEGER               -- where the reply starts in text (a turn with a reply)
);
CREATE INDEX IF NOT EXISTS docs_entry ON docs(kind, file, text);
CREATE TABLE IF NOT EXISTS edit_spans(id TEXT PRIMARY KEY, off INTEGER, len INTEGER);
CREATE TABLE IF NOT EXISTS passages(id INTEGER PRIMARY KEY, doc INTEGER NOT NULL, start INTEGER NOT NULL,
                                    len INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc);
CREATE VIEW IF NOT EXISTS passage_text(id, text, who) AS
    SELECT p.id, substr(d.text, p.start + 1, p.len), coalesce(d.who, '') FROM passages p JOIN docs d ON d.id = p.doc;
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    text, who, content='passage_text', content_rowid='id', tokenize='{TOKENIZER}'
);
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts(docs_fts, rowid, text, who)
        SELECT 'delete', p.id, substr(old.text, p.start + 1, p.len), coalesce(old.who, '') FROM passages p WHERE p.doc = old.id;
    DELETE FROM passages WHERE doc = old.id;
END;
"""


class IndexUnavailable(Exception):
    """The index is missing, corrupt or locked; the message says which."""


class IndexOutdated(IndexUnavailable):
    """The index was built by another version of bxmem: it is rebuilt, never read."""


def _version(db: sqlite3.Connection) -> int | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) and not db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            return None
        raise
    try:
        return int(row[0]) if row else 0
    except (TypeError, ValueError):
        return 0


def outdated_message(path: Path, version: int) -> str:
    return (
        f"{path}: built by another version of bxmem (schema {version}, this one reads {SCHEMA_VERSION}); "
        "the next decide or mirror rebuilds it, or run bxmem index rebuild"
    )


class Index:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._in_transaction = False
        self._next_passage: dict[bool, int] = {}  # identity or not -> the next passage rowid, within a transaction

    @classmethod
    def for_state(cls, state_dir: Path) -> Index:
        return cls(state_dir / INDEX_FILE)

    @classmethod
    def in_memory(cls) -> Index:
        """An index in memory alone, of the same schema and tokenizer: recall ranks a Honcho
        source's candidates in one, with the local search's own code (store/search.py)."""
        index = cls(Path(":memory:"))
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.executescript(SCHEMA)
        index._db = db
        return index

    def _check_files(self) -> None:
        """SQLite opens its files blocking and through links: a FIFO in place of one would hang every job's index
        refresh, and recall."""
        try:
            for suffix in ("", "-wal", "-shm"):
                check_regular(f"{self.path}{suffix}")
        except OSError as exc:
            raise IndexUnavailable(f"{exc.filename}: {exc.strerror}") from None

    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._check_files()
            if not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            try:
                db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
                version = _version(db)
                if version is not None and version != SCHEMA_VERSION:
                    db.close()
                    raise IndexOutdated(outdated_message(self.path, version))
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                if version is None:
                    db.executescript(SCHEMA)
                    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            except sqlite3.DatabaseError as exc:
                raise IndexUnavailable(f"{self.path}: {exc}") from None
            self._db = db
        return self._db

    def open_readonly(self) -> Index:
        """For recall: never creates the file, never writes, never waits on a writer long."""
        self._check_files()
        if not self.path.exists():
            raise IndexUnavailable("no local index yet (decide or mirror build it)")
        try:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=1, isolation_level=None)
            version = _version(self._db)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise IndexUnavailable(f"{self.path}: {exc}") from None
        if version != SCHEMA_VERSION:
            self.close()
            raise IndexOutdated(outdated_message(self.path, version or 0))
        return self

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # --- writes -------------------------------------------------------------------

    def add(
        self,
        key: str,
        kind: str,
        tag: str,
        trust_class: str,
        text: str,
        *,
        reply: str | None = None,
        file: str | None = None,
        session: str | None = None,
        ts: str | None = None,
        who: str | None = None,
    ) -> None:
        """Store one document under `key` (replacing what it held) and index its passages."""
        text = neutralise(text)  # what recall shows anyway; and SQLite cannot store a lone surrogate
        reply_at = None
        if reply is not None:
            reply_at = len(text) + 1
            text = f"{text}\n{neutralise(reply)}"
        db = self.db()
        values = (key, kind, tag, trust_class, file, session, ts, who, text, reply_at)
        insert = "INSERT INTO docs(key, kind, tag, class, file, session, ts, who, text, reply_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
        cursor = db.execute(insert.replace("INSERT", "INSERT OR IGNORE", 1), values)
        if cursor.rowcount == 0:  # the key holds a document: replace it (the trigger takes its passages out)
            db.execute("DELETE FROM docs WHERE key = ?", (key,))
            cursor = db.execute(insert, values)
        doc = cursor.lastrowid
        identity = kind == "identity"
        first = self._next_passage.get(identity)
        if first is None:
            low, high = (IDENTITY_BASE, 1 << 62) if identity else (0, IDENTITY_BASE)
            first = db.execute(
                "SELECT coalesce(max(id) + 1, ?) FROM passages WHERE id >= ? AND id < ?", (low + 1, low, high)
            ).fetchone()[0]
        rows = [(first + n, doc, start, length) for n, (start, length) in enumerate(passages(text))]
        # Within a transaction nobody else writes: the next id is known. Outside one, ask again next time.
        self._next_passage = {**self._next_passage, identity: first + len(rows)} if self._in_transaction else {}
        db.executemany("INSERT INTO passages(id, doc, start, len) VALUES (?,?,?,?)", rows)
        db.executemany(
            "INSERT INTO docs_fts(rowid, text, who) VALUES (?,?,?)",
            [(pid, text[start : start + length], who or "") for pid, _doc, start, length in rows],
        )

    def remove_key(self, key: str) -> None:
        self.db().execute("DELETE FROM docs WHERE key = ?", (key,))

    def remove_entry(self, kind: str, file: str | None, text: str) -> bool:
        """Remove one doc holding this entry (the latest), as an identity remove does."""
        text = neutralise(text)
        row = (
            self.db()
            .execute(
                "SELECT id FROM docs WHERE kind = ? AND file IS ? AND text = ? ORDER BY id DESC LIMIT 1",
                (kind, file, text),
            )
            .fetchone()
        )
        if row:
            self.db().execute("DELETE FROM docs WHERE id = ?", (row[0],))
        return row is not None

    def transaction(self):
        return _Transaction(self)

    # --- reads --------------------------------------------------------------------

    def search(self, query: str, limit: int) -> list[LocalHit]:
        from bxmem.store.search import search  # deferred: lean (decide and mirror write the index, never search it)

        try:
            return search(self.db(), query, limit)
        except sqlite3.DatabaseError as exc:
            raise IndexUnavailable(f"{self.path}: {exc}") from None

    def count(self) -> int:
        return self.db().execute("SELECT count(*) FROM docs").fetchone()[0]


class _Transaction:
    def __init__(self, index: Index) -> None:
        self.index = index

    def __enter__(self):
        self.index.db().execute("BEGIN IMMEDIATE")
        self.index._in_transaction, self.index._next_passage = True, {}
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self.index._in_transaction, self.index._next_passage = False, {}
        self.index.db().execute("ROLLBACK" if exc_type else "COMMIT")
