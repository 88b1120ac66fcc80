"""memoryd's journal of memory edits: the one module that reads it, finds an edit in it, reads a field back
and appends to it (`undo`, through `append_checked`, is the only writer besides memoryd).
"""

from __future__ import annotations

import hmac
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bxmem.errors import StorageError
from bxmem.sources.cursor import moved, remember
from bxmem.sources.jsonline import complete_lines, is_blank, read_record
from bxmem.store.append import append_locked
from bxmem.store.files import Flock, open_fd, open_file
from bxmem.store.local_key import key_id, line_mac

EDIT_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


@dataclass
class Edit:
    id: str
    op: str
    session: str | None
    span: list[int]  # [offset, length] of the journal line
    line: int
    record: dict  # the parsed line (read for its fields, never copied into the ledger)
    mac: str | None = None  # the keyed hash of the line (local_key.line_mac), when read with a key


def _problem(record: dict) -> str | None:
    edit_id = record.get("id")
    if not isinstance(edit_id, str) or not EDIT_ID_RE.fullmatch(edit_id):
        return "field 'id' is missing or not a valid edit id"
    if not isinstance(record.get("op"), str):
        return "field 'op' is missing"
    return None


def read_line(raw: bytes | None) -> dict | str:
    return read_record(raw, _problem)


def lines(f: IO[bytes], pos: int = 0, *, tail: bool = False) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, end, raw line) from byte `pos` on; raw is None for a line past the line bound. An unterminated last
    line is one memoryd has not finished: left out, unless `tail`. Each line is read from its own offset, so the
    caller may seek `f` between lines."""
    for line in complete_lines(f, pos, tail=tail, reseek=True):
        if not line.ended:
            return  # an over-long line memoryd is still writing: looked at again once it ends
        yield line.start, line.end, line.raw


def parse(raw: bytes | None) -> dict | None:
    """A line's record, or None for a line that is no edit (`read_edits` is the reader that reports bad lines)."""
    record = read_line(raw)
    return None if isinstance(record, str) else record


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def open_if_present(path: Path) -> IO[bytes] | None:
    return open_file(path) if path.exists() else None


def find_edit_in(path: Path, edit_id: str) -> tuple[dict | None, str | None]:
    try:
        with open_file(path) as f:
            return find_edit(f, edit_id)
    except FileNotFoundError:
        return None, None


def record_at(f: IO[bytes], offset: int, length: int) -> dict | None:
    f.seek(offset)
    return parse(f.read(length))


def find_edit(f: IO[bytes], edit_id: str) -> tuple[dict | None, str | None]:
    """The edit's record (its first line with that id), and the id of an undo already naming it. An unterminated last
    line is read too: an undo appended after it closes it off, so it is an edit mirror will read."""
    target, undone_by = None, None
    for _pos, _end, raw in lines(f, 0, tail=True):
        record = parse(raw)
        if record is None:
            continue
        if record.get("id") == edit_id and target is None:
            target = record
        elif record.get("op") == "undo" and record.get("target") == edit_id:
            undone_by = record.get("id")
    return target, undone_by


def append_checked(path: Path, record: dict, check: Callable[[IO[bytes]], None]) -> None:
    """Append one record under one hold of the journal's flock (memoryd's lock), after `check(f)` has read the
    journal under the same hold: two undos of one edit at once cannot both pass their check. bxmem never creates
    memoryd's file (FileNotFoundError)."""
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode()

    def open_for_append() -> int:
        try:
            return open_fd(path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise StorageError(f"cannot open the journal {path}: {exc.strerror}") from None

    with open_file(path) as f, Flock(f.fileno(), exclusive=True):
        check(f)
        append_locked(
            open_for_append,
            data,
            lambda exc: f"cannot append to the journal {path}: {exc.strerror}; nothing was written",
            lock_held=True,
        )


def read_edits(path: Path, cursor: dict, warn: Callable[[str], None], secret: bytes | None = None) -> Iterator[Edit]:
    """Complete new lines from the cursor on, advancing it. With `secret`, each edit carries the keyed hash of its
    line. No journal is no edit; one that cannot be opened is a StorageError naming it, and nothing is mirrored."""
    try:
        f = open_file(path)  # only the open may raise FileNotFoundError; `with f` below
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(
            f"cannot read the journal {path}: {exc.strerror}; nothing is mirrored until it can be"
        ) from None
    with f:
        st = os.fstat(f.fileno())
        why = moved(f.fileno(), st, cursor, secret)
        if why is not None:
            warn(f"{path}: {why}; reading it again from the start (decided edits are kept)")
            cursor.update(offset=0, line=0)
        cursor["ino"] = st.st_ino
        line_no = cursor["line"]
        try:
            for start, end, raw in lines(f, cursor["offset"]):
                line_no += 1
                cursor["offset"], cursor["line"] = end, line_no
                if raw is not None and is_blank(raw):
                    continue
                record = read_line(raw)
                if isinstance(record, str):
                    warn(f"{path}:{line_no}: {record}; line skipped, not mirrored")
                    continue
                assert raw is not None
                session = record.get("session")
                yield Edit(
                    record["id"],
                    record["op"],
                    session if isinstance(session, str) else None,
                    [start, len(raw)],
                    line_no,
                    record,
                    line_mac(secret, raw) if secret else None,
                )
        finally:  # what the cursor keeps of the bytes read, checked before the next read on (cursor.py)
            remember(f.fileno(), cursor, secret)


def text_spec(
    span: list[int], field: str, index: int | None = None, *, mac: str | None = None, key: str | None = None
) -> dict:
    """Where an action's text is: {"span": [offset, length], "field": "entry" |
    "old" | "dropped", "index": n, "mac": the line's keyed hash, "key": its key's
    id}. The ledger keeps this, never the text."""
    spec: dict = {"span": span, "field": field}
    if index is not None:
        spec["index"] = index
    if mac is not None:
        spec["mac"], spec["key"] = mac, key
    return spec


def field_of(record: dict, spec: dict) -> str | None:
    value = record.get(spec["field"])
    if "index" in spec:
        value = value[spec["index"]] if isinstance(value, list) and len(value) > spec["index"] else None
    return value if isinstance(value, str) else None


class LineChanged(ValueError):
    """The span no longer holds the journal line that was decided."""


def read_field(path: Path, spec: dict, secret: bytes | None = None, edit_id: str | None = None) -> str:
    """The text a spec (`text_spec`) names, read back from the journal once the span is checked to hold a readable
    edit line (of `edit_id`, when known) and, with a keyed hash made with `secret`, exactly the bytes decided.
    LineChanged (a ValueError) if not."""
    offset, length = spec["span"]
    with open_file(path) as f:
        f.seek(offset)
        raw = f.read(length)
    where = f"the line at byte {offset} of {path}"
    if len(raw) != length:
        raise LineChanged(f"{where} is cut short (the journal changed since the edit was decided)")
    if (
        spec.get("mac")
        and secret
        and spec.get("key") == key_id(secret)
        and not hmac.compare_digest(line_mac(secret, raw), spec["mac"])
    ):
        raise LineChanged(f"{where} is not the one decided (the journal changed since the edit was decided)")
    record = read_line(raw)
    if isinstance(record, str):
        raise LineChanged(f"{where} is unreadable: {record} (the journal changed since the edit was decided)")
    if edit_id is not None and record["id"] != edit_id:
        raise LineChanged(f"{where} is not edit {edit_id}'s (the journal changed since the edit was decided)")
    value = field_of(record, spec)
    if value is None:
        raise ValueError(f"the journal line has no text in {spec['field']}")
    return value
