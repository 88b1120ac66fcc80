"""What goes into the local index, and when. One writer at a time: a catch-up or a rebuild holds a lock
on a byte of the ledger (store/files.JobLock).
"""

from __future__ import annotations

# The C module, as store/index.py imports it: the `sqlite3` package would import datetime.
import _sqlite3 as sqlite3
import os
import time
from contextlib import nullcontext
from pathlib import Path

from bxmem.log import log
from bxmem.sources import journal
from bxmem.sources.loopd import SpanChanged, SpanReader
from bxmem.store.files import JobLock, NotRegularFile
from bxmem.store.index import INDEX_FILE, Index, IndexOutdated, IndexUnavailable
from bxmem.store.ledger import Ledger, ReadResult
from bxmem.store.ledger_events import TURN, is_decided
from bxmem.store.local_key import load as load_key
from bxmem.trust.labels import entry_class, note_tag, turn_labels
from bxmem.trust.rules import DOT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    #: What shows a rebuild's progress (the CLI's bar): given the ledger's size, a context
    #: manager that yields the function told each offset the fold has read, or None.
    Progress = Callable[[int], AbstractContextManager[Callable[[int], None] | None]]

WAIT_S = 30.0  # a catch-up waits this long for another one (or a rebuild) to finish


def index_turn(index: Index, decided: dict, user_text: str, reply_text: str | None) -> None:
    tag, trust_class = turn_labels(decided)
    peer = decided.get("peer")
    # The speaker, as searched: the peer id with its `.` given back ("ana_Dot_lima" is "ana", "lima").
    who = peer.replace(DOT, ".") if isinstance(peer, str) else None
    index.add(
        decided["item"],
        "turn",
        tag,
        trust_class,
        user_text,
        reply=reply_text,
        session=decided["session"],
        ts=decided.get("at"),
        who=who,
    )


def index_edit(index: Index, record: dict, target: dict | None) -> None:
    op, file, edit_id = record.get("op"), record.get("file"), record.get("id")
    entry = record.get("entry")
    if op in ("identity_add", "identity_replace") and isinstance(entry, str):
        if op == "identity_replace" and isinstance(record.get("old"), str):
            index.remove_entry("identity", file, record["old"])
        index.add(
            f"edit:{edit_id}#0",
            "identity",
            "identity",
            entry_class(entry),
            entry,
            file=file,
            session=record.get("session"),
            ts=record.get("ts"),
        )
    elif op == "identity_remove" and isinstance(entry, str):
        index.remove_entry("identity", file, entry)
    elif op == "consolidate":
        for dropped in record.get("dropped") or []:
            if isinstance(dropped, str):
                index.remove_entry("identity", file, dropped)
    elif op == "note" and isinstance(entry, str):
        tag = note_tag(record.get("trust"))
        index.add(
            f"edit:{edit_id}#0",
            "note",
            tag,
            entry_class(entry),
            entry,
            session=record.get("session"),
            ts=record.get("ts"),
        )
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
        index.add(
            f"undo:{undo.get('id')}#{n}",
            "identity",
            "identity",
            entry_class(text),
            text,
            file=file,
            session=target.get("session"),
            ts=undo.get("ts"),
        )


# --- the fold: catch up with the ledger (turns) and the journal (edits) ------------------


def _meta(index: Index, key: str, default: int = 0) -> int:
    """An offset the index recorded; one that is not (the file is not what this
    code writes) makes the index unusable, so it is moved aside and rebuilt."""
    row = index.db().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if row is not None and not (isinstance(row[0], str) and row[0].isascii() and row[0].isdigit()):
        raise IndexUnavailable(f"{index.path}: its {key} is not a byte offset")
    return int(row[0]) if row else default


def _ledger_mark(index: Index) -> dict | None:
    row = index.db().execute("SELECT value FROM meta WHERE key = 'ledger_mark'").fetchone()
    if row is None or not isinstance(row[0], str) or row[0].count(":") != 1:
        return None
    head, tail = row[0].split(":")
    return {"head": head, "tail": tail}


def _set_meta(index: Index, key: str, value: int) -> None:
    index.db().execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(value)))


class Behind:
    """Where a catch-up stopped at its deadline (its offsets are committed: the next one goes on)."""

    def __init__(self) -> None:
        self.at: int | None = None  # the ledger offset it reached, None: caught up
        self.size = 0


def catch_up(index: Index, paths, progress=None, deadline: float | None = None, behind: Behind | None = None) -> int:
    """Apply what the ledger and the journal gained since the last catch-up, in one transaction with the new offsets:
    a crash leaves the index as it was. Past `deadline` (time.monotonic) it stops between two lines and commits
    what it did, so a job's run stays within its unit's time; the next run goes on (`behind`)."""
    ledger = Ledger(paths.ledger)
    journal_size = journal.size(paths.journal)
    if ledger.size() == _meta(index, "ledger_offset") and journal_size == _meta(index, "journal_offset"):
        return 0
    applied = changed = seen = 0
    stopped = False
    refused: dict[str, str] = {}  # a log that is not a regular file -> what it is
    with index.transaction(), SpanReader(load_key(paths.state, create=False)) as spans:
        # Offsets are read again under the write lock: decide and mirror may catch up at once.
        ledger_at = _meta(index, "ledger_offset")
        journal_at = _meta(index, "journal_offset")
        rewritten = ledger.changed(ledger_at, _ledger_mark(index))
        if rewritten is not None:  # read on from its offset, the index would take a line's tail for a line
            raise IndexOutdated(f"{index.path}: the ledger is {rewritten}; the index is built again from it")
        result, db = ReadResult(), index.db()
        for ev in ledger.iter_from(ledger_at, result):
            seen += 1
            if deadline is not None and seen % 64 == 0 and time.monotonic() > deadline:
                stopped = True  # this line is not applied: the offset kept is its start
                break
            if progress is not None:
                progress(result.end)
            # A decision is final: a second one for an indexed turn changes nothing (store/outbox.py).
            if not is_decided(ev, TURN) or db.execute("SELECT 1 FROM docs WHERE key = ?", (ev.get("item"),)).fetchone():
                continue
            try:
                texts, reply = spans.turn_texts(paths.logs, ev)
            except (OSError, ValueError, KeyError, TypeError) as exc:  # the log is gone, shorter, or changed
                changed += isinstance(exc, SpanChanged)  # another line's text is never indexed under these labels
                if isinstance(exc, NotRegularFile):
                    refused[exc.filename] = exc.strerror or "not a regular file"
                continue
            index_turn(index, ev, "\n".join(texts), reply)
            applied += 1
        reached = result.at if stopped else result.end
        _set_meta(index, "ledger_offset", reached)
        mark = ledger.mark(reached)
        index.db().execute(
            "INSERT OR REPLACE INTO meta VALUES ('ledger_mark', ?)",
            (f"{mark['head']}:{mark['tail']}" if mark else None,),
        )
        if behind is not None:
            behind.at, behind.size = (reached if stopped else None), ledger.size()
        f = None if stopped else journal.open_if_present(paths.journal)
        if f is not None:
            pos = journal_at
            with f:
                for start, end, raw in journal.lines(f, journal_at):
                    seen += 1
                    if deadline is not None and seen % 64 == 0 and time.monotonic() > deadline:
                        if behind is not None:
                            behind.at = reached  # the ledger is done; the journal goes on next time
                        break
                    pos = end
                    record = journal.parse(raw)
                    if record is None or raw is None:
                        continue
                    index.db().execute(
                        "INSERT OR IGNORE INTO edit_spans VALUES (?,?,?)", (record["id"], start, len(raw))
                    )
                    target = _journal_record(index, f, record.get("target")) if record.get("op") == "undo" else None
                    index_edit(index, record, target)
                    applied += 1
            _set_meta(index, "journal_offset", pos)

    if changed:
        log.warning(f"{changed} decided turn(s) not indexed: their log changed since they were decided")
    for path, why in refused.items():
        log.warning(f"{path}: {why}; its decided turns are not indexed")
    return applied


def _journal_record(index: Index, f, edit_id: object) -> dict | None:
    if not isinstance(edit_id, str):
        return None
    row = index.db().execute("SELECT off, len FROM edit_spans WHERE id = ?", (edit_id,)).fetchone()
    if row is not None and not all(type(n) is int and n >= 0 for n in row):
        raise IndexUnavailable(f"{index.path}: the span it keeps of edit {edit_id} is not a span")
    return journal.record_at(f, row[0], row[1]) if row else None


# --- updates and rebuilds ---------------------------------------------------------------


def refresh(paths, progress: Progress | None = None, deadline: float | None = None) -> bool:
    """Catch up after a job's run; a problem is one warning line, never fatal. Past `deadline` it stops, said at
    info, and returns True: the job's next run must go on with it."""
    behind = Behind()
    try:
        _applied, warning = update(paths, progress=progress, deadline=deadline, behind=behind)
    except Exception as exc:  # the index is a cache: its failure must never stop a job
        why = (
            f"{exc.filename}: {exc.strerror}"
            if isinstance(exc, OSError) and exc.filename
            else f"{type(exc).__name__}: {exc}"
        )
        warning = f"local index not updated ({why}); recall may miss the newest entries"
    if warning:
        log.warning(" ".join(warning.split()))
    if behind.at is not None:
        log.info(
            f"local index: {behind.at:,} of the ledger's {behind.size:,} bytes read in this run's time; the next "
            "run goes on (recall finds what is indexed so far)"
        )
    return behind.at is not None


def update(
    paths,
    rebuild: bool = False,
    progress: Progress | None = None,
    deadline: float | None = None,
    behind: Behind | None = None,
) -> tuple[int, str | None]:
    """Catch the index up, or rebuild it (asked, built by another version, or corrupt: moved aside first). Returns
    (entries applied, a warning or None); never raises for the index's sake: the ledger, the logs and the journal
    stay the truth."""
    path = paths.state / INDEX_FILE
    lock = _Lock(paths.ledger)
    if not lock.acquire(WAIT_S * (4 if rebuild else 1)):
        return 0, f"local index not updated: another run held its lock for {WAIT_S:g} s; the next run catches up"
    try:
        if rebuild:
            return _rebuilt(paths, path, None, progress)
        index = Index(path)
        try:
            return catch_up(index, paths, deadline=deadline, behind=behind), None
        except IndexOutdated as exc:
            index.close()
            return _rebuilt(paths, path, str(exc), progress, deadline, behind)
        except (IndexUnavailable, sqlite3.DatabaseError) as exc:
            if "disk is full" in str(exc) or "disk I/O error" in str(
                exc
            ):  # refused, not corrupt: nothing to move aside
                return 0, f"local index not updated ({exc}); it catches up once the disk takes writes again"
            aside = path.with_name(path.name + ".corrupt")
            index.close()
            _remove(aside)
            try:
                os.replace(path, aside)
            except OSError:
                pass
            applied, warning = _rebuilt(paths, path, None, progress, deadline, behind)
            return (
                applied,
                warning or f"local index {path} was unreadable ({exc}); moved aside to {aside.name} and rebuilt",
            )
        finally:
            index.close()
    finally:
        lock.release()


def _rebuilt(
    paths,
    path: Path,
    outdated: str | None,
    progress: Progress | None,
    deadline: float | None = None,
    behind: Behind | None = None,
) -> tuple[int, str | None]:
    """Build the index anew in a file of its own, then put it in place of `path` whole: a reader meanwhile sees the
    old file, never half a new one. Past `deadline` the new file is kept (its offsets committed) and the next run
    goes on with it: a rebuild of a long history spans runs."""
    if outdated:
        log.info(f"rebuilding the local index: {outdated.split(': ', 1)[-1].split(';')[0]}")
    started = time.monotonic()
    new = path.with_name(f".{path.name}.new")  # one writer at a time (_Lock): the same name across runs
    if deadline is None:
        _remove(new)
    try:
        index = Index(new)
        index.db()
    except (IndexUnavailable, sqlite3.DatabaseError):  # a part-built file of another version, or damaged
        index.close()
        _remove(new)
        index = Index(new)
    try:
        with progress(Ledger(paths.ledger).size()) if progress is not None else nullcontext() as advance:
            applied = catch_up(index, paths, advance, deadline, behind)
        if behind is not None and behind.at is not None:
            return applied, None  # not whole yet: the old file stays in place meanwhile
        index.db().execute("PRAGMA journal_mode=DELETE")  # one file, nothing beside it, to move in place
        index.close()
        _remove(path, suffixes=("-wal", "-shm"))
        os.replace(new, path)
        index = Index(path)
        applied += catch_up(index, paths, deadline=deadline, behind=behind)  # what came while it was built
    except IndexOutdated:  # the ledger was rewritten while it was built: from the start, next time
        index.close()
        _remove(new)
        return 0, None
    except (IndexUnavailable, sqlite3.DatabaseError, OSError) as exc:
        index.close()
        _remove(new)
        return 0, f"local index unusable ({exc}); recall answers without it"
    finally:
        index.close()
    if outdated:
        log.info(f"local index rebuilt: {applied} turns and edits in {time.monotonic() - started:.1f} s")
    return applied, None


class _Lock:
    """The index's writer lock, waited for a bounded time: a byte of the ledger, as each job's, not a file in
    memory/bxmem/, which the owner may delete mid-run."""

    def __init__(self, ledger: Path) -> None:
        self.lock = JobLock(ledger, "index")

    def acquire(self, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while not self.lock.acquire():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def release(self) -> None:
        self.lock.release()


def _remove(path: Path, suffixes: tuple[str, ...] = ("", "-wal", "-shm")) -> None:
    for suffix in suffixes:
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
