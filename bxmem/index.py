"""The local index: SQLite FTS5 over this agent's own turns and memory entries.

Kept current by `decide` (every decided turn, with its exact labels: secret
turns included, they never leave the host) and by `mirror` (identity entries,
notes; replace, remove, consolidate and undo update it). It can be rebuilt
from the ledger, the logs and the journal, with the same result.

Tags, as recall reports them: `identity` for identity entries, `memory` for
trusted notes and clean turns, `memory-tainted` for untrusted and flagged
notes and for turns of sessions that read untrusted content.
"""

from __future__ import annotations

# The C module, not the `sqlite3` package: the package only re-exports it and
# registers the default date adapters, which imports datetime (2.5 ms of every
# recall at start-up). Nothing here binds or converts dates: timestamps are text.
import _sqlite3 as sqlite3
import os
import re
from pathlib import Path

from .labels import entry_class, note_tag, turn_labels

INDEX_FILE = "index.sqlite3"
SCHEMA_VERSION = 1

SCHEMA = """
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
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_entry ON docs(kind, file, text);
CREATE TABLE IF NOT EXISTS edit_spans(id TEXT PRIMARY KEY, off INTEGER, len INTEGER);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    text, content='docs', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts(docs_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""

_WORD = re.compile(r"\w+", re.UNICODE)


class IndexUnavailable(Exception):
    """The index is missing, corrupt or locked; the message says which."""


class LocalHit:
    __slots__ = ("key", "kind", "tag", "klass", "session", "ts", "text")

    def __init__(self, key: str, kind: str, tag: str, klass: str, session: str | None, ts: str | None, text: str) -> None:
        self.key, self.kind, self.tag, self.klass = key, kind, tag, klass
        self.session, self.ts, self.text = session, ts, text


# bm25 is computed over the newest CANDIDATES matches only. Its fixed cost
# (FTS5 counts each word's documents over the whole table) cannot be avoided,
# but the part that grows with the window can: 2,000 cost 7.7 ms for three
# words found in all of 100,000 turns, 1,000 cost 5.6 ms.
CANDIDATES = 1_000


def fts_query(text: str, max_terms: int = 32, joiner: str = " OR ") -> str | None:
    """The query as FTS5 string tokens: quotes, operators, column filters and
    NEAR in agent-supplied text are matched as words, never obeyed."""
    words = _WORD.findall(text)[:max_terms]
    if not words:
        return None
    return joiner.join('"' + w.replace('"', '""') + '"' for w in words)


class Index:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    @classmethod
    def for_state(cls, state_dir: Path) -> Index:
        return cls(state_dir / INDEX_FILE)

    def db(self) -> sqlite3.Connection:
        if self._db is None:
            new = not self.path.exists()
            if new:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
                os.close(fd)
            try:
                db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(SCHEMA)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            except sqlite3.DatabaseError as exc:
                raise IndexUnavailable(f"{self.path}: {exc}") from None
            self._db = db
        return self._db

    def open_readonly(self) -> Index:
        """For recall: never creates the file, never writes, never waits on a writer long."""
        if not self.path.exists():
            raise IndexUnavailable("no local index yet (decide or mirror build it)")
        try:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=1, isolation_level=None)
            self._db.execute("SELECT 1 FROM docs LIMIT 1")
        except sqlite3.DatabaseError as exc:
            raise IndexUnavailable(f"{self.path}: {exc}") from None
        return self

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # --- writes -------------------------------------------------------------------

    def add(self, key: str, kind: str, tag: str, klass: str, text: str, *, file: str | None = None,
            session: str | None = None, ts: str | None = None) -> None:
        from .sanitize import neutralise

        text = neutralise(text)  # what recall shows anyway; and SQLite cannot store a lone surrogate
        self.db().execute(
            "INSERT OR REPLACE INTO docs(key, kind, tag, class, file, session, ts, text) VALUES (?,?,?,?,?,?,?,?)",
            (key, kind, tag, klass, file, session, ts, text),
        )

    def remove_key(self, key: str) -> None:
        self.db().execute("DELETE FROM docs WHERE key = ?", (key,))

    def remove_entry(self, kind: str, file: str | None, text: str) -> bool:
        """Remove one doc holding this entry (the latest), as an identity remove does."""
        from .sanitize import neutralise

        text = neutralise(text)
        row = self.db().execute(
            "SELECT id FROM docs WHERE kind = ? AND file IS ? AND text = ? ORDER BY id DESC LIMIT 1", (kind, file, text)
        ).fetchone()
        if row:
            self.db().execute("DELETE FROM docs WHERE id = ?", (row[0],))
        return row is not None

    def transaction(self):
        return _Transaction(self.db())

    # --- reads --------------------------------------------------------------------

    def search(self, query: str, limit: int) -> list[LocalHit]:
        """Documents holding every word first, then any word; each ranked by bm25
        within the newest CANDIDATES matches (so a word that is everywhere costs
        a bounded amount: ranking all matches of a common word took 90 ms at
        100,000 turns), plus every matching identity entry, however old (there
        are few). Among documents holding every word, identity entries come
        first: they are what the agent keeps as current (a replaced or undone
        entry leaves the index), while an old turn may still hold the old text.
        Equal scores: the newest first (docs/decisions.md)."""
        hits: list[LocalHit] = []
        seen: set[str] = set()
        joiners = (" ", " OR ") if len(_WORD.findall(query)) > 1 else (" ",)  # one word: AND is OR
        for joiner in joiners:
            match = fts_query(query, joiner=joiner)
            if match is None:
                return []
            try:
                rows = self._ranked(match, limit, identity_first=joiner == " ")
            except sqlite3.DatabaseError as exc:
                raise IndexUnavailable(f"{self.path}: {exc}") from None
            for row in rows:
                if row[0] not in seen and len(hits) < limit:
                    seen.add(row[0])
                    hits.append(LocalHit(*row[:7]))
            if len(hits) >= limit:
                break
        return hits

    def _ranked(self, match: str, limit: int, identity_first: bool) -> list[tuple]:
        """The best `limit` of: the newest CANDIDATES matches scored by bm25, and the
        matching identity entries older than them scored 0.0, in search's order.
        Two queries merged here, not one statement with UNION ALL and GROUP BY,
        which sorted the whole window again and asked for old identity entries
        when none could be older (1.5 ms to 9.9 ms a recall; 0.5 ms now).
        tests/test_index_search.py holds the two equal."""
        db = self.db()
        first = "(d.kind = 'identity') DESC, " if identity_first else ""
        rows = db.execute(
            "WITH c AS (SELECT rowid AS id, bm25(docs_fts) AS score FROM docs_fts WHERE docs_fts MATCH ?"
            "  ORDER BY rowid DESC LIMIT ?) "
            "SELECT d.key, d.kind, d.tag, d.class, d.session, d.ts, d.text, c.score, c.id,"
            " (SELECT count(*) FROM c), (SELECT min(id) FROM c)"
            f" FROM c JOIN docs d ON d.id = c.id ORDER BY {first}c.score, c.id DESC LIMIT ?",
            (match, CANDIDATES, limit),
        ).fetchall()
        if not rows or rows[0][9] < CANDIDATES:
            return rows  # every match is in the window
        older = db.execute(
            "SELECT d.key, d.kind, d.tag, d.class, d.session, d.ts, d.text, 0.0, d.id FROM docs d WHERE d.id IN ("
            " SELECT rowid FROM docs_fts WHERE docs_fts MATCH ? AND rowid IN ("
            "  SELECT id FROM docs WHERE kind = 'identity' AND id < ?))",
            (match, rows[0][10]),
        ).fetchall()
        if not older:
            return rows
        # the order of the ORDER BY above: identity first (when asked), score, newest first
        merged = sorted(rows + older, key=lambda r: (identity_first and r[1] != "identity", r[7], -r[8]))
        return merged[:limit]

    def count(self) -> int:
        return self.db().execute("SELECT count(*) FROM docs").fetchone()[0]


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


# --- what decide and mirror put in it --------------------------------------------------


def index_turn(index: Index, decided: dict, user_text: str, reply_text: str | None) -> None:
    tag, klass = turn_labels(decided)
    text = user_text if reply_text is None else f"{user_text}\n{reply_text}"
    index.add(decided["item"], "turn", tag, klass, text, session=decided["session"], ts=decided.get("at"))


def index_edit(index: Index, record: dict, target: dict | None) -> None:
    """Apply one journal edit to the index; `target` is the record an undo names."""
    op, file, edit_id = record.get("op"), record.get("file"), record.get("id")
    entry = record.get("entry")
    if op in ("identity_add", "identity_replace") and isinstance(entry, str):
        if op == "identity_replace" and isinstance(record.get("old"), str):
            index.remove_entry("identity", file, record["old"])
        index.add(f"edit:{edit_id}#0", "identity", "identity", entry_class(entry), entry, file=file, session=record.get("session"), ts=record.get("ts"))
    elif op == "identity_remove" and isinstance(entry, str):
        index.remove_entry("identity", file, entry)
    elif op == "consolidate":
        for dropped in record.get("dropped") or []:
            if isinstance(dropped, str):
                index.remove_entry("identity", file, dropped)
    elif op == "note" and isinstance(entry, str):
        tag = note_tag(record.get("trust"))
        index.add(f"edit:{edit_id}#0", "note", tag, entry_class(entry), entry, session=record.get("session"), ts=record.get("ts"))
    elif op == "undo" and target is not None:
        _undo(index, record, target)


def _undo(index: Index, undo: dict, target: dict) -> None:
    op, file = target.get("op"), target.get("file")
    index.remove_key(f"edit:{target.get('id')}#0")
    restore: list[str] = []
    if op == "identity_replace" and isinstance(target.get("old"), str):
        restore = [target["old"]]
    elif op == "identity_remove" and isinstance(target.get("entry"), str):
        restore = [target["entry"]]
    elif op == "consolidate":
        restore = [d for d in target.get("dropped") or [] if isinstance(d, str)]
    for n, text in enumerate(restore):
        index.add(f"undo:{undo.get('id')}#{n}", "identity", "identity", entry_class(text), text, file=file, session=target.get("session"), ts=undo.get("ts"))


# --- the fold: catch up with the ledger (turns) and the journal (edits) ------------------


def _meta(index: Index, key: str, default: int = 0) -> int:
    row = index.db().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row else default


def _set_meta(index: Index, key: str, value: int) -> None:
    index.db().execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(value)))


def catch_up(index: Index, paths) -> int:
    """Apply what the ledger and the journal gained since the last catch-up, in
    one transaction with the new offsets: a crash leaves the index as it was."""
    from .ledger import Ledger
    from .ledger_events import TURN, is_decided
    from .local_key import load as load_key
    from .sources import journal
    from .sources.loopd import SpanChanged, SpanReader

    ledger = Ledger(paths.ledger)
    journal_size = paths.journal.stat().st_size if paths.journal.exists() else 0
    if ledger.size() == _meta(index, "ledger_offset") and journal_size == _meta(index, "journal_offset"):
        return 0
    applied = changed = 0
    with index.transaction(), SpanReader(load_key(paths.state, create=False)) as spans:
        # Offsets are read again under the write lock: decide and mirror may catch up at once.
        ledger_at = _meta(index, "ledger_offset")
        journal_at = _meta(index, "journal_offset")
        from .ledger import ReadResult

        result, db = ReadResult(), index.db()
        for ev in ledger.iter_from(ledger_at, result):
            # A decision is final: a second one for an indexed turn changes nothing (outbox.py).
            if not is_decided(ev, TURN) or db.execute("SELECT 1 FROM docs WHERE key = ?", (ev.get("item"),)).fetchone():
                continue
            try:
                texts, reply = spans.turn_texts(paths.logs, ev)
            except (OSError, ValueError, KeyError, TypeError) as exc:  # the log is gone, shorter, or changed
                changed += isinstance(exc, SpanChanged)  # another line's text is never indexed under these labels
                continue
            index_turn(index, ev, "\n".join(texts), reply)
            applied += 1
        _set_meta(index, "ledger_offset", result.end)
        if paths.journal.exists():
            pos = journal_at
            with open(paths.journal, "rb") as f:
                for start, end, raw in journal.lines(f, journal_at):
                    pos = end
                    record = journal.parse(raw)
                    if record is None or raw is None:
                        continue
                    index.db().execute("INSERT OR IGNORE INTO edit_spans VALUES (?,?,?)", (record["id"], start, len(raw)))
                    target = _journal_record(index, f, record.get("target")) if record.get("op") == "undo" else None
                    index_edit(index, record, target)
                    applied += 1
            _set_meta(index, "journal_offset", pos)
    if changed:
        from .log import log

        log.warning(f"{changed} decided turn(s) not indexed: their log changed since they were decided")
    return applied


def _journal_record(index: Index, f, edit_id: object) -> dict | None:
    """The record an undo names, read at the span noted when its line was indexed."""
    from .sources.journal import record_at

    if not isinstance(edit_id, str):
        return None
    row = index.db().execute("SELECT off, len FROM edit_spans WHERE id = ?", (edit_id,)).fetchone()
    return record_at(f, row[0], row[1]) if row else None


def refresh(paths) -> None:
    """Catch up after a job's run; a problem is one warning line, never fatal."""
    from .log import log

    try:
        _applied, warning = update(paths)
    except Exception as exc:  # the index is a cache: its failure must never stop a job
        warning = f"local index not updated ({type(exc).__name__}: {exc}); recall may miss the newest entries"
    if warning:
        log.warning(" ".join(warning.split()))


def update(paths, rebuild: bool = False) -> tuple[int, str | None]:
    """Catch the index up (or rebuild it). A corrupt index is moved aside and
    rebuilt. Returns (entries applied, a warning or None); never raises for
    the index's sake: the ledger, the logs and the journal stay the truth."""
    path = paths.state / INDEX_FILE
    warning = None
    if rebuild:
        _remove(path)
    for attempt in (1, 2):
        index = Index(path)
        try:
            return catch_up(index, paths), warning
        except (IndexUnavailable, sqlite3.DatabaseError) as exc:
            if "disk is full" in str(exc) or "disk I/O error" in str(exc):  # refused, not corrupt: nothing to move aside
                return 0, f"local index not updated ({exc}); it catches up once the disk takes writes again"
            if attempt == 2:
                return 0, f"local index unusable ({exc}); recall answers without it"
            aside = path.with_name(path.name + ".corrupt")
            _remove(aside)
            try:
                os.replace(path, aside)
            except OSError:
                pass
            _remove(path)
            warning = f"local index {path} was unreadable ({exc}); moved aside to {aside.name} and rebuilt"
        finally:
            index.close()
    return 0, warning


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
