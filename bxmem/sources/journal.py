"""memoryd's journal of memory edits, read incrementally (interfaces section 4).

Like the logs, only byte spans are kept: the entry's text is read back from
the journal by `send` when it writes it to Honcho.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

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


def read_edits(path: Path, cursor: dict, warn: Callable[[str], None]) -> Iterator[Edit]:
    """Complete new lines from the cursor on; advances the cursor as it goes."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        st = os.fstat(f.fileno())
        if cursor.get("ino") is not None and (st.st_ino != cursor["ino"] or st.st_size < cursor["offset"]):
            warn(f"{path}: truncated or replaced; reading it again from the start (decided edits are kept)")
            cursor.update(offset=0, line=0)
        cursor["ino"] = st.st_ino
        f.seek(cursor["offset"])
        pos, line_no = cursor["offset"], cursor["line"]
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            line_no += 1
            start, pos = pos, pos + len(raw)
            cursor["offset"], cursor["line"] = pos, line_no
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


def read_field(path: Path, spec: dict) -> str:
    """The text a spec names: {"span": [offset, length], "field": "entry" | "old" | "dropped", "index": n}."""
    with open(path, "rb") as f:
        f.seek(spec["span"][0])
        raw = f.read(spec["span"][1])
    if len(raw) != spec["span"][1]:
        raise ValueError("the journal is shorter than when the edit was decided")
    value = json.loads(raw.decode("utf-8")).get(spec["field"])
    if "index" in spec:
        value = value[spec["index"]] if isinstance(value, list) and len(value) > spec["index"] else None
    if not isinstance(value, str):
        raise ValueError(f"the journal line has no text in {spec['field']}")
    return value
