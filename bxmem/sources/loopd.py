"""loopd's session logs, read incrementally (interfaces section 2).

A cursor per log remembers the byte offset read so far and, for turns still
open, only byte spans and flags: no text is kept in bxmem's state. `send`
reads the turn's text back from the log by its span when it sends it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..labels import higher_class, tool_result_label
from ..sanitize import find_secret

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from io import BufferedReader

SESSION_RE = re.compile(r"^[A-Za-z0-9_-]{1,500}$")  # leaves room for the -2, -3 suffixes


def session_id_problem(stem: str) -> str | None:
    if SESSION_RE.fullmatch(stem):
        return None
    return "its name is not a valid session id (1 to 500 characters of A-Z a-z 0-9 _ -)"


@dataclass
class FinishedTurn:
    session: str
    turn: int
    status: str | None
    user: list[list[int]]  # [offset, length] of each user line
    reply: list[int] | None  # [offset, length] of the last final assistant line
    speaker: str | None
    ts: str | None
    has_text: bool  # at least one user line, each with a text
    secret: str | None  # the name of the secret rule that matched, if any
    untrusted_by_log: bool
    log_class: str


def new_cursor() -> dict:
    return {"offset": 0, "line": 0, "ino": None, "untrusted": False, "class": "public", "open": {}, "seen": 0}


Warn = Callable[[str], None]


def read_finished_turns(path: Path, cursor: dict, warn: Warn) -> list[FinishedTurn]:
    """Advance `cursor` over the complete new lines of one log; return the turns that ended.

    A line not yet ended by a newline is still being written: it is left for
    the next run. A malformed line is skipped with one warning naming it.
    """
    session = path.stem
    finished: list[FinishedTurn] = []
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if cursor["ino"] is not None and (st.st_ino != cursor["ino"] or st.st_size < cursor["offset"]):
            warn(f"{path}: truncated or replaced; reading it again from the start (decided turns are kept)")
            cursor.update(offset=0, line=0, open={})
        cursor["ino"] = st.st_ino
        f.seek(cursor["offset"])
        pos = cursor["offset"]
        line_no = cursor["line"]
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            line_no += 1
            start, pos = pos, pos + len(raw)
            if not raw.strip():
                continue
            record = _parse(raw)
            if isinstance(record, str):
                warn(f"{path}:{line_no}: {record}; line skipped")
                continue
            done = _apply(record, [start, len(raw)], cursor, session)
            if done is not None:
                finished.append(done)
        cursor["offset"] = pos
        cursor["line"] = line_no
    return finished


def _parse(raw: bytes) -> dict | str:
    try:
        text = raw.decode("utf-8")  # decoded here: json.loads(bytes) would guess UTF-16 from a BOM
    except UnicodeDecodeError:
        return "not valid UTF-8"
    try:
        record = json.loads(text)
    except ValueError:
        return "not valid JSON"
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("type") in ("user", "tool_result", "assistant", "turn_end", "tool_call"):
        turn = record.get("turn")
        if not isinstance(turn, int) or isinstance(turn, bool) or turn < 1:
            return "field 'turn' is not a positive integer"
    return record


def _apply(record: dict, span: list[int], cursor: dict, session: str) -> FinishedTurn | None:
    kind = record.get("type")
    if kind == "tool_result":
        untrusted, klass = tool_result_label(record.get("label"))
        if untrusted:
            cursor["untrusted"] = True
        cursor["class"] = higher_class(cursor["class"], klass)
        return None
    if kind not in ("user", "assistant", "turn_end"):
        return None  # tool calls, reasoning and unknown types are not written
    key = str(record["turn"])
    turn = cursor["open"].setdefault(key, {"user": [], "speakers": [], "ts": None, "reply": None, "secret": None, "reply_secret": None})
    if kind == "user":
        speaker = record.get("speaker")
        turn["user"].append(span)
        turn["speakers"].append(speaker if isinstance(speaker, str) else None)
        if turn["ts"] is None and isinstance(record.get("ts"), str):
            turn["ts"] = record["ts"]
        text = record.get("text")
        if isinstance(text, str):
            turn["secret"] = turn["secret"] or find_secret(text)
        else:
            turn["no_text"] = True
        return None
    if kind == "assistant":
        text = record.get("text")
        if record.get("final") is True and isinstance(text, str):
            turn["reply"] = span
            turn["reply_secret"] = find_secret(text)
        return None
    # turn_end
    del cursor["open"][key]
    speakers = turn["speakers"]
    # Two user lines from different people are a burst of several speakers:
    # incomplete speaker information, like a null speaker.
    speaker = speakers[0] if speakers and all(s == speakers[0] for s in speakers) else None
    status = record.get("status")
    return FinishedTurn(
        session=session,
        turn=record["turn"],
        status=status if isinstance(status, str) else None,
        user=turn["user"],
        reply=turn["reply"],
        speaker=speaker,
        ts=turn["ts"],
        has_text=bool(turn["user"]) and not turn.get("no_text"),
        secret=turn["secret"] or turn["reply_secret"],
        untrusted_by_log=bool(cursor["untrusted"]),
        log_class=cursor["class"],
    )


class SpanReader:
    """Reads the text of log lines by span, keeping the last log open: the turns
    a job reads back come in runs from one log, and opening the file for each
    span cost more than parsing the line."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._file: BufferedReader | None = None

    def text(self, path: Path, span: list[int]) -> str:
        """The `text` field of the log line at `span`; ValueError if it is not there any more."""
        file = self._file
        if file is None or path != self._path:
            self.close()
            file = open(path, "rb")  # noqa: SIM115 - kept open across calls, closed by close()
            self._file, self._path = file, path
        file.seek(span[0])
        raw = file.read(span[1])
        if len(raw) != span[1]:
            raise ValueError("the log is shorter than when the turn was decided")
        record = json.loads(raw)
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise ValueError("the log line has no text")
        return text

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = self._path = None

    def __enter__(self) -> SpanReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
