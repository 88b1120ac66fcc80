"""memoryd's journal of memory edits (interfaces section 4): the one module
that reads it, finds an edit in it, reads a field back and appends to it.

Like the logs, only byte spans are kept: the entry's text is read back from
the journal by `send` when it writes it to Honcho. Readers: `mirror` (new
lines, from a cursor), the index (new lines, and an undo's target by span),
`undo` (an edit by id); the only writer besides memoryd is `undo`, through
`append_checked`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

EDIT_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


@dataclass
class Edit:
    id: str
    op: str
    session: str | None
    span: list[int]  # [offset, length] of the journal line
    line: int
    record: dict  # the parsed line (read for its fields, never copied into the ledger)


def _problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return "not a JSON object"
    edit_id = record.get("id")
    if not isinstance(edit_id, str) or not EDIT_ID_RE.fullmatch(edit_id):
        return "field 'id' is missing or not a valid edit id"
    if not isinstance(record.get("op"), str):
        return "field 'op' is missing"
    return None


def lines(f: IO[bytes], pos: int = 0, *, tail: bool = False) -> Iterator[tuple[int, bytes]]:
    """(offset, raw line) from byte `pos` on. An unterminated last line is a
    line memoryd has not finished: left out, unless `tail`. The caller may seek
    `f` between lines (to read an undo's target): each line is read from its
    own offset."""
    while True:
        f.seek(pos)
        raw = f.readline()
        if not raw or (not tail and not raw.endswith(b"\n")):
            return
        yield pos, raw
        pos += len(raw)


def parse(raw: bytes) -> dict | None:
    """A line's record, or None for a line that is not a JSON object (skipped
    silently here: `read_edits` is the reader that reports bad lines)."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def record_at(f: IO[bytes], offset: int, length: int) -> dict | None:
    """The record on the line at a span the reader noted earlier, or None."""
    f.seek(offset)
    return parse(f.read(length))


def find_edit(f: IO[bytes], edit_id: str) -> tuple[dict | None, str | None]:
    """The edit's record (its first line with that id), and the id of an undo
    already naming it. Reads every line, an unterminated last one too: an undo
    appended after it closes it off, so it is an edit mirror will read."""
    target, undone_by = None, None
    for _pos, raw in lines(f, 0, tail=True):
        record = parse(raw)
        if record is None:
            continue
        if record.get("id") == edit_id and target is None:
            target = record
        elif record.get("op") == "undo" and record.get("target") == edit_id:
            undone_by = record.get("id")
    return target, undone_by


def append_checked(path: Path, record: dict, check: Callable[[IO[bytes]], None]) -> None:
    """Append one record under one hold of the journal's flock (the lock memoryd
    takes), after `check(f)` has read the journal under the same hold and not
    raised: two undos of one edit at once cannot both pass their check. A torn
    line left by a crash is closed off first. The journal must exist
    (FileNotFoundError): bxmem never creates memoryd's file."""
    from ..store import Flock

    with open(path, "r+b") as f, Flock(f.fileno(), exclusive=True):
        check(f)
        f.seek(0, os.SEEK_END)
        size = f.tell()
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                data = b"\n" + data  # close off a torn line left by a crash
            f.seek(0, os.SEEK_END)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def read_edits(path: Path, cursor: dict, warn: Callable[[str], None]) -> Iterator[Edit]:
    """Complete new lines from the cursor on; advances the cursor as it goes."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - only the open may raise FileNotFoundError; `with f` below
    except FileNotFoundError:
        return
    with f:
        st = os.fstat(f.fileno())
        if cursor.get("ino") is not None and (st.st_ino != cursor["ino"] or st.st_size < cursor["offset"]):
            warn(f"{path}: truncated or replaced; reading it again from the start (decided edits are kept)")
            cursor.update(offset=0, line=0)
        cursor["ino"] = st.st_ino
        line_no = cursor["line"]
        for start, raw in lines(f, cursor["offset"]):
            line_no += 1
            cursor["offset"], cursor["line"] = start + len(raw), line_no
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                warn(f"{path}:{line_no}: not valid UTF-8; line skipped")
                continue
            except ValueError:
                warn(f"{path}:{line_no}: not valid JSON; line skipped")
                continue
            problem = _problem(record)
            if problem:
                warn(f"{path}:{line_no}: {problem}; line skipped")
                continue
            session = record.get("session")
            yield Edit(record["id"], record["op"], session if isinstance(session, str) else None, [start, len(raw)], line_no, record)


def text_spec(span: list[int], field: str, index: int | None = None) -> dict:
    """Where an action's text is: {"span": [offset, length], "field": "entry" |
    "old" | "dropped", "index": n}. The ledger keeps this, never the text."""
    spec: dict = {"span": span, "field": field}
    if index is not None:
        spec["index"] = index
    return spec


def field_of(record: dict, spec: dict) -> str | None:
    """The text a spec's field (and index, for a list such as "dropped") names
    in an edit's record, or None when there is no text there."""
    value = record.get(spec["field"])
    if "index" in spec:
        value = value[spec["index"]] if isinstance(value, list) and len(value) > spec["index"] else None
    return value if isinstance(value, str) else None


def read_field(path: Path, spec: dict) -> str:
    """The text a spec (see `text_spec`) names, read back from the journal."""
    with open(path, "rb") as f:
        f.seek(spec["span"][0])
        raw = f.read(spec["span"][1])
    if len(raw) != spec["span"][1]:
        raise ValueError("the journal is shorter than when the edit was decided")
    value = field_of(json.loads(raw.decode("utf-8")), spec)
    if value is None:
        raise ValueError(f"the journal line has no text in {spec['field']}")
    return value
