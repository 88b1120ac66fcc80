"""The ledger, memory/honcho.jsonl: bxmem's append-only record of decisions.

One JSON object a line, one event each. The kinds and their fields are
defined once, in ledger_events.py (`decided`, `attempt`, `sent`, `failed`,
`unsent`, `cancelled`, `requeued`, `created`, `key_refused`, `key_resumed`),
and every line is built there; this module only reads and appends lines. No
line ever holds message text or a key.

Writers hold an exclusive flock on the file for one append of whole lines and
fsync before letting go. Readers read complete lines only; a crash mid-write
leaves an unterminated tail, which the next writer closes off with a newline
so that it reads as one malformed line, skipped and counted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .errors import StorageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import BinaryIO

LEDGER_VERSION = 1
CHUNK_BYTES = 1 << 20


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
    malformed: list[int] = field(default_factory=list)  # byte offsets of skipped lines
    torn_tail: bool = False  # an unterminated last line (a crash mid-write)


def append_lines(path: Path, records: Sequence[Mapping[str, object]], what: str) -> int:
    """Append JSON lines to an append-only file under an exclusive flock on the
    file itself, close off a torn last line first, fsync, return the new size.
    The journal's writers (memoryd, `bxmem undo`) and the ledger's share this."""
    from .store import Flock

    payload = "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records)
    data = payload.encode("utf-8", "surrogatepass")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot open {what} {path}: {exc.strerror}") from None
    with os.fdopen(fd, "r+b", buffering=0) as f, Flock(fd, exclusive=True):
        try:
            size = os.fstat(fd).st_size
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data  # close off a torn line left by a crash
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            return os.fstat(fd).st_size
        except OSError as exc:
            raise StorageError(f"cannot append to {what} {path}: {exc.strerror}") from None


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

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, events: Sequence[Mapping[str, object]]) -> int:
        """Append whole lines under the lock, fsync, and return the new size."""
        if not events:
            return self.size()
        return append_lines(self.path, events, "ledger")

    def event_at(self, offset: int) -> dict:
        """The event on the line that starts at `offset` (the ledger never changes
        what it has written, so an offset names a line for good)."""
        if self._reader is None:
            self._reader = open(self.path, "rb")  # noqa: SIM115 - kept open across calls, closed by close()
        self._reader.seek(offset)
        value = json.loads(self._reader.readline())
        if not isinstance(value, dict):
            raise ValueError(f"no ledger event at byte {offset}")
        return value

    def read_from(self, offset: int) -> ReadResult:
        """Every complete line from `offset` on, as a list (for short tails)."""
        result = ReadResult(end=offset)
        result.events = list(self.iter_from(offset, result))
        return result

    def iter_from(self, offset: int, result: ReadResult) -> Iterator[dict]:
        """Complete lines from `offset` on, one at a time, so a long ledger is never
        held in memory; `result` gets the end offset and the malformed lines.
        A shared lock keeps a writer's half-written line from being mistaken for
        a torn one; it is taken per chunk, so writers are never held up long."""
        from .store import Flock

        result.end = offset
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - only the open may raise FileNotFoundError; `with f` below
        except FileNotFoundError:
            return
        with f:
            pos = offset
            while True:
                with Flock(f.fileno(), exclusive=False):
                    f.seek(pos)
                    chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    return
                last_newline = chunk.rfind(b"\n")
                if last_newline < 0:
                    if len(chunk) < CHUNK_BYTES:
                        result.torn_tail = True
                        return
                    chunk = chunk + f.readline()  # a line longer than a chunk
                    last_newline = len(chunk) - 1 if chunk.endswith(b"\n") else -1
                    if last_newline < 0:
                        result.torn_tail = True
                        return
                complete = chunk[: last_newline + 1]
                for line in complete.splitlines(keepends=True):
                    try:
                        value = json.loads(line)
                        if not isinstance(value, dict) or "ev" not in value:
                            raise ValueError
                    except ValueError:
                        if line.strip():
                            result.malformed.append(pos)
                        pos += len(line)
                        result.end = pos
                        continue
                    result.at = pos
                    pos += len(line)
                    result.end = pos
                    yield value
                if last_newline + 1 < len(chunk) and len(chunk) < CHUNK_BYTES:
                    result.torn_tail = True
                    return
