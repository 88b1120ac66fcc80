"""The ledger, memory/honcho.jsonl: read and appended here, every line built by store/ledger_events.py.
No line ever holds message text or a key.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.errors import StorageError
from bxmem.formats.timestamps import format_time
from bxmem.store.append import append_locked
from bxmem.store.files import Flock, open_ledger
from bxmem.store.ledger_shapes import event_problem

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import BinaryIO

LEDGER_VERSION = 1
CHUNK_BYTES = 1 << 20
MALFORMED_KEPT = 10  # malformed lines a read names (ReadResult); the rest are counted
MARK_WINDOW = 256  # bytes of the ledger hashed at its start and before a reader's offset (`Ledger.mark`)


class LedgerChanged(StorageError):
    """A line read back by its offset is not the one the reader folded there: the
    ledger was rewritten in place since (a restore, an edit, a sort). The reader
    folds the ledger again; this reaches the owner only if that fails too."""


def now_iso() -> str:
    return format_time(time.time())


def event(ev: str, **fields: object) -> dict:
    """A line of kind `ev`: `v`, `ev` and `ts` first. Callers use ledger_events."""
    return {"v": LEDGER_VERSION, "ev": ev, "ts": now_iso(), **fields}


def turn_item(session: str, turn: int) -> str:
    return f"turn:{session}:{turn}"


def edit_item(edit_id: str) -> str:
    return f"edit:{edit_id}"


@dataclass
class ReadResult:
    events: list[dict] = field(default_factory=list)
    end: int = 0  # the offset just past the last complete line read
    at: int = 0  # while iterating: the offset of the line just yielded
    line: bytes = b""  # ...and its bytes, as they are in the file
    skipped: int = 0  # malformed lines skipped
    # The first MALFORMED_KEPT of them, to name: a ledger of a million damaged lines must
    # cost neither a million offsets and reasons in memory nor a million log lines.
    malformed: list[int] = field(default_factory=list)  # byte offsets
    reasons: dict[int, str] = field(default_factory=dict)  # offset -> why, for a line that is JSON but no event
    torn_tail: bool = False  # an unterminated last line (a crash mid-write)
    torn_event: bool = False  # ...that is a whole event lacking only its newline (iter_from's `tail`)

    def skipped_lines(self, path: Path) -> list[str]:
        """What a fold says of the malformed lines it skipped: the first few by offset, the rest counted."""
        out = [
            f"{path}: malformed line at byte {offset} skipped "
            + (
                f"({self.reasons[offset]}; not folded)"
                if offset in self.reasons
                else "(a torn write is closed off this way)"
            )
            for offset in self.malformed
        ]
        if self.skipped > len(self.malformed):
            out.append(
                f"{path}: {self.skipped - len(self.malformed):,} more malformed line(s) skipped after these "
                "(bxmem sync counts them all)"
            )
        return out


def append_lines(path: Path, records: Sequence[Mapping[str, object]], what: str) -> int:
    """Append JSON lines to the ledger, whole or not at all, and return the new size."""
    payload = "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records)
    data = payload.encode("utf-8", "surrogatepass")
    return append_locked(
        lambda: open_ledger(path, os.O_RDWR | os.O_APPEND | os.O_CREAT),
        data,
        lambda exc: f"cannot append to {what} {path}: {exc.strerror}; nothing of this append was kept",
    )


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: BinaryIO | None = None  # kept open by event_at: a run reads back many decisions

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_fd(self) -> int:
        return open_ledger(self.path, os.O_RDONLY)

    def _open(self) -> BinaryIO:
        return os.fdopen(self._open_fd(), "rb")

    def size(self) -> int:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return 0
        if not stat.S_ISREG(st.st_mode):
            os.close(self._open_fd())  # says what is wrong (open_ledger), the same line wherever it is asked
        return st.st_size

    def append(self, events: Sequence[Mapping[str, object]]) -> int:
        if not events:
            return self.size()
        return append_lines(self.path, events, "ledger")

    def close_torn_tail(self) -> None:
        """Give a torn last line its newline now (store/append.py's repair, with
        nothing after it): once a job has counted a whole event there as written,
        every reader must see it, without waiting for the next append."""
        append_lines(self.path, [], "ledger")

    def line_at(self, offset: int) -> tuple[bytes, dict | str]:
        """The line that starts at `offset`, as it is in the file, and its event (or why it is none). The owner's
        hands can change what bxmem wrote (a restore in place, an editor, a sort): a reader checks that the line
        is the one it means (store/outbox.py's `decision`)."""
        if self._reader is None:
            self._reader = self._open()
        self._reader.seek(offset)
        raw = self._reader.readline()
        return raw, _event(raw)

    def mark(self, offset: int) -> dict | None:
        """Hashes of the ledger's first bytes and of those just before `offset`, kept with a reader's offset so its
        next run can tell the ledger was rewritten before that point (`changed`). Not keyed: the ledger holds no
        text, and a rewrite that keeps these bytes is caught where lines are read back."""
        if offset <= 0:
            return None
        try:
            fd = self._open_fd()
        except FileNotFoundError:
            return None
        try:
            return _mark(fd, offset)
        finally:
            os.close(fd)

    def changed(self, offset: int, mark: dict | None) -> str | None:
        if offset <= 0:
            return None
        try:
            fd = self._open_fd()
        except FileNotFoundError:
            return "gone"
        try:
            if os.fstat(fd).st_size < offset:
                return f"shorter than the {offset:,} bytes read before"
            if mark is not None and _mark(fd, offset) != mark:
                return f"rewritten in place before byte {offset:,} (restored from a copy, edited or sorted?)"
            return None
        finally:
            os.close(fd)

    def read_from(self, offset: int) -> ReadResult:
        result = ReadResult(end=offset)
        result.events = list(self.iter_from(offset, result))
        return result

    def iter_from(self, offset: int, result: ReadResult, *, tail: bool = False) -> Iterator[dict]:
        """Complete lines from `offset` on, one at a time; `result` gets the end offset and the malformed lines. A
        shared lock, taken per chunk, keeps a writer's half-written line from being mistaken for a torn one.
        `tail`: also a torn last line that is a whole event lacking only its newline; the next append closes it
        off, so the jobs' recovery counts it as written (`result.end` stays before it)."""
        result.end = offset
        try:
            f = self._open()
        except FileNotFoundError:
            return
        with f:
            pos = offset
            while True:
                with Flock(f.fileno(), exclusive=False):
                    f.seek(pos)
                    chunk = f.read(CHUNK_BYTES)
                    if chunk and chunk.rfind(b"\n") < 0 and len(chunk) == CHUNK_BYTES:
                        chunk = chunk + f.readline()  # a line longer than a chunk
                if not chunk:
                    return
                last_newline = chunk.rfind(b"\n")
                complete = chunk[: last_newline + 1]
                for line in complete.splitlines(keepends=True):
                    value = _event(line)
                    if isinstance(value, str):
                        if line.strip():
                            result.skipped += 1
                            if len(result.malformed) < MALFORMED_KEPT:
                                result.malformed.append(pos)
                                if value != NOT_JSON:
                                    result.reasons[pos] = value
                        pos += len(line)
                        result.end = pos
                        continue
                    result.at, result.line = pos, line
                    pos += len(line)
                    result.end = pos
                    yield value
                if (last_newline + 1 < len(chunk) and len(chunk) < CHUNK_BYTES) or last_newline < 0:
                    result.torn_tail = True
                    torn = _event(chunk[last_newline + 1 :]) if tail else None
                    if isinstance(torn, dict):
                        result.at, result.line, result.torn_event = pos, chunk[last_newline + 1 :], True
                        yield torn
                    return


NOT_JSON = "not a JSON object"


def _mark(fd: int, offset: int) -> dict:
    import hashlib  # deferred: lean (recall reads the ledger and never marks it)

    head = os.pread(fd, min(MARK_WINDOW, offset), 0)
    start = max(0, offset - MARK_WINDOW)
    tail = os.pread(fd, offset - start, start)
    return {
        "head": hashlib.blake2b(head, digest_size=16, person=b"bxmem ledger").hexdigest(),
        "tail": hashlib.blake2b(tail, digest_size=16, person=b"bxmem ledger").hexdigest(),
    }


def _event(line: bytes) -> dict | str:
    """A ledger line's event, or why it is not one: not JSON (a torn write, nested
    too deep), or not of its kind's shape (store/ledger_shapes.py)."""
    try:
        value = json.loads(line)
    except ValueError:
        return NOT_JSON
    except RecursionError:
        return "nested too deep"
    if not isinstance(value, dict):
        return NOT_JSON
    why = event_problem(value)
    return value if why is None else why
