"""loopd's session logs, read incrementally: only spans, flags and keyed hashes are kept, never text.
A line bxmem cannot read counts as a tool result labelled untrusted and secret from that line on.
"""

from __future__ import annotations

import hmac
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from bxmem.formats import turn_ranges
from bxmem.sources.cursor import moved, remember
from bxmem.sources.jsonline import JSON_WHITESPACE, complete_lines, read_record
from bxmem.sources.turns import FinishedTurn, Order, Warn, cursor_labels, release, taint, tool_result
from bxmem.store.files import open_file
from bxmem.store.local_key import key_id, line_mac
from bxmem.trust.labels import tool_result_label
from bxmem.trust.rules import LogLabels, look_alike
from bxmem.trust.sanitize import find_secret
from bxmem.trust.turn_order import MAX_WAITING_TURNS

__all__ = ["FinishedTurn", "cursor_labels"]  # decide's, from here: the log's reader hands them out

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from io import BufferedReader

SESSION_RE = re.compile(r"^[A-Za-z0-9_-]{1,500}$")  # leaves room for the -2, -3 suffixes
KNOWN_TYPES = ("user", "tool_call", "tool_result", "assistant", "turn_end")
MAX_TURN = 2**53 - 1  # what every JSON reader holds exactly
DEADLINE_EVERY = 512  # lines between looks at the clock


def session_logs(logs_dir: Path) -> list[tuple[str, os.DirEntry]]:
    """(session, entry) for each `<session>.jsonl` in loopd's folder, of any kind (the reader refuses what is not a
    regular file); FileNotFoundError when there is no folder."""
    with os.scandir(logs_dir) as listing:
        return [(entry.name[: -len(".jsonl")], entry) for entry in listing if entry.name.endswith(".jsonl")]


def listed_stat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None


def session_id_problem(stem: str) -> str | None:
    if SESSION_RE.fullmatch(stem):
        return None
    return "its name is not a valid session id (1 to 500 characters of A-Z a-z 0-9 _ -)"


def record_problem(record: Mapping) -> str | None:
    """Why a parsed line is not a record bxmem can use, or None. A known type must
    carry every field bxmem reads from it, of the type the interfaces give it; an
    unknown type (a string) is ignored whatever it holds, and so are unknown fields.

    | type        | fields read, and what they must be                                |
    | any         | `type`: a string                                                  |
    | known       | `turn`: an integer from 1 to 2^53 - 1 (not a boolean)             |
    | user        | `text`: a string; `speaker`, `ts`: a string or null, or absent    |
    | assistant   | `final`: true or false; `text`: a string                          |
    | tool_result | `label`: readable (labels.tool_result_label)                      |
    | turn_end    | `status`: a string                                                |
    """
    kind = record.get("type")
    if not isinstance(kind, str):
        return "field 'type' is missing or not a string"
    if kind not in KNOWN_TYPES:
        return None
    turn = record.get("turn")
    if type(turn) is not int or not 1 <= turn <= MAX_TURN:
        return "field 'turn' is not a positive integer"
    if kind == "user":
        if not isinstance(record.get("text"), str):
            return "field 'text' is not a string"
        for name in ("speaker", "ts"):
            if record.get(name) is not None and not isinstance(record[name], str):
                return f"field '{name}' is not a string or null"
    elif kind == "assistant":
        if not isinstance(record.get("final"), bool):
            return "field 'final' is not true or false"
        if not isinstance(record.get("text"), str):
            return "field 'text' is not a string"
    elif kind == "tool_result":
        if tool_result_label(record.get("label")) is None:
            return "field 'label' is not a readable label"
    elif kind == "turn_end" and not isinstance(record.get("status"), str):
        return "field 'status' is not a string"
    return None


def read_line(raw: bytes | None) -> dict | str:
    return read_record(raw, record_problem)


def new_cursor() -> dict:
    return {
        "offset": 0,
        "line": 0,
        "ino": None,
        "untrusted": False,
        "class": "public",
        "unreadable": None,
        "skipping": False,
        "open": {},
        "decided": [],
        "ended": [],
        "out_of_order": 0,
    }


class ReadStopped(Exception):
    """Reading a log stopped part-way on an I/O error; `finished` holds the turns
    that ended before it (the cursor stands after the last line read)."""

    def __init__(self, finished: list[FinishedTurn], why: str) -> None:
        super().__init__(why)
        self.finished, self.why = finished, why


def read_finished_turns(
    path: Path,
    cursor: dict,
    warn: Warn,
    secret: bytes | None = None,
    deadline: float | None = None,
    note: Warn | None = None,
) -> list[FinishedTurn]:
    """Advance `cursor` over the complete new lines of one log; return the turns that may be decided now, in that
    order. A line not yet ended by a newline is left for the next run. An unreadable or untrustworthy line (a tool
    result after its turn's decision) is warned about once and taints the session from there on (`warn`); lines
    naming an ended turn, and turns given up on, are said once (`note`, else `warn`). Past `deadline`
    (time.monotonic) reading stops at a line boundary. OSError when the log cannot be opened; ReadStopped when a
    read fails part-way."""
    finished: list[FinishedTurn] = []
    mac = (key_id(secret), secret) if secret else None
    with open_file(path) as f:
        st = os.fstat(f.fileno())
        try:
            why = moved(f.fileno(), st, cursor, secret)
        except OSError as exc:
            raise ReadStopped(finished, exc.strerror or type(exc).__name__) from None
        if why is not None:
            warn(f"{path}: {why}; reading it again from the start (decided turns are kept)")
            cursor.update(offset=0, line=0, open={}, skipping=False, ended=[])
        cursor["ino"] = st.st_ino
        order = Order(cursor)
        try:
            _read_on(f, path, cursor, warn, note or warn, mac, deadline, finished, order)
        except OSError as exc:  # the cursor stands after the last line read: the turns that ended so far are kept
            raise ReadStopped(finished, exc.strerror or type(exc).__name__) from None
        finally:
            order.say(path, note or warn)
            remember(f.fileno(), cursor, secret)
    return finished


def _read_on(
    f: BufferedReader,
    path: Path,
    cursor: dict,
    warn: Warn,
    note: Warn,
    mac: tuple[str, bytes] | None,
    deadline: float | None,
    finished: list[FinishedTurn],
    order: Order,
) -> None:
    line_no, count, session = cursor["line"], 0, path.stem
    for line in complete_lines(f, cursor["offset"], skipping=cursor.get("skipping", False)):
        cursor["offset"], cursor["skipping"] = line.end, not line.ended
        if line.rest:
            continue
        line_no += 1
        cursor["line"] = line_no
        if line.raw is not None and not line.raw.strip(JSON_WHITESPACE):  # jsonline.is_blank, without a call per line
            continue
        record = read_line(line.raw)
        if isinstance(record, str):
            taint(cursor, line_no, record)
            release(cursor, session, finished, [])  # ended turns waiting go nowhere now, whatever comes
            warn(
                f"{path}:{line_no}: {record}; line skipped, and the session counts as untrusted and secret "
                "from this line on (turns ending after it go nowhere)"
            )
        elif record["type"] == "tool_result":
            late = tool_result(record, cursor, finished, line_no)
            if late is not None:
                release(cursor, session, finished, [])
                warn(
                    f"{path}:{line_no}: a tool result of turn {record['turn']}, logged after turn {late} was decided "
                    "without it; the session counts as untrusted and secret from this line on (turns ending after "
                    "it go nowhere)"
                )
        elif record["type"] in ("user", "assistant", "turn_end") and not order.skip(record, line_no):
            assert line.raw is not None
            gave_up: list[int] = []
            _apply(record, [line.start, len(line.raw)], line.raw, cursor, session, mac, finished, gave_up)
            for n in gave_up:
                note(
                    f"{path}:{line_no}: turn {n} is still open while more than {MAX_WAITING_TURNS} later turns have "
                    "ended; decided as not completed, so that they can be decided"
                )
        count += 1
        if deadline is not None and count % DEADLINE_EVERY == 0 and time.monotonic() > deadline:
            break


def _apply(
    record: dict,
    span: list[int],
    raw: bytes,
    cursor: dict,
    session: str,
    mac: tuple[str, bytes] | None,
    finished: list[FinishedTurn],
    gave_up: list[int],
) -> None:
    """Take one user, assistant or turn_end line of a turn that has not ended
    (turns.Order.skip) into its turn; the turns it lets be decided
    (turn_order.turns_to_decide) go to `finished`, those given up on to `gave_up` too."""
    kind, ended = record["type"], cursor.setdefault("ended", [])
    key = str(record["turn"])
    turn = cursor["open"].get(key)
    if turn is None:
        turn = cursor["open"][key] = {
            "user": [],
            "speakers": [],
            "ts": None,
            "reply": None,
            "secret": None,
            "reply_secret": None,
            "key": mac[0] if mac else None,
            "macs": [],
            "reply_mac": None,
        }
    if mac is not None and turn.get("key") != mac[0]:
        turn["key"] = None  # lines of one turn read with two keys (entry.key replaced meanwhile): no hashes
    if kind == "user":
        turn["user"].append(span)
        turn["speakers"].append(record.get("speaker"))
        if turn["ts"] is None and isinstance(record.get("ts"), str):
            turn["ts"] = record["ts"]
        turn["secret"] = turn["secret"] or find_secret(record["text"])
        if mac is not None:
            turn["macs"].append(line_mac(mac[1], raw))
    elif kind == "assistant":
        if record["final"] is True:
            turn["reply"] = span
            turn["reply_secret"] = find_secret(record["text"])
            turn["reply_mac"] = line_mac(mac[1], raw) if mac is not None else None
    else:  # turn_end: the turn is decided once no lower-numbered turn is open
        turn["end"] = record["status"]
        turn_ranges.add(ended, record["turn"])
        release(cursor, session, finished, gave_up)


def session_labels(logs_dir: Path, session: str) -> tuple[LogLabels, str | None]:
    """What a session's log says of it now, read from its start as decide reads it, for a decision made mid-session
    (an artifact card). A log that does not exist or cannot be read says nothing bxmem can trust: untrusted and
    secret, with why."""
    cursor = new_cursor()
    try:
        read_finished_turns(logs_dir / f"{session}.jsonl", cursor, lambda _line: None)
    except FileNotFoundError:
        return UNREADABLE_LOG, f"no log {session}.jsonl"
    except ReadStopped as stop:
        return UNREADABLE_LOG, f"its log cannot be read on: {stop.why}"
    except OSError as exc:
        return UNREADABLE_LOG, f"its log cannot be read: {exc.strerror or type(exc).__name__}"
    labels = cursor_labels(cursor)
    return labels, (
        f"line {labels.unreadable['line']} of its log cannot be read: {labels.unreadable['why']}"
        if labels.unreadable
        else None
    )


UNREADABLE_LOG = LogLabels(True, "secret", {"line": 0, "why": "the log cannot be read"})


class SpanChanged(ValueError):
    """The span no longer holds the line that was decided (the log changed since)."""


class SpanReader:
    """Reads a decided turn's texts back by span, keeping the last log open (opening it for each span cost more than
    parsing the line). Every span is checked before its text is used (docs/interfaces.md, "Read back"); a decision
    made with another key, or with no hashes, is checked without one (`unkeyed` counts them)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._path: Path | None = None
        self._file: BufferedReader | None = None
        self._secret = secret
        self._key = key_id(secret) if secret else None
        self.unkeyed = 0

    def turn_texts(self, logs: Path, decided: Mapping) -> tuple[list[str], str | None]:
        """The texts of the user lines and of the reply (None without one) of a
        decided turn; SpanChanged or OSError when they cannot be read back."""
        path = logs / decided["log"]
        macs = decided.get("macs") or {}
        keyed = macs.get("key") is not None and macs.get("key") == self._key
        if not keyed:
            self.unkeyed += 1
        user_macs = macs.get("user") or []
        peer = decided.get("peer")
        texts = [
            self._line(
                path, span, "user", decided["turn"], user_macs[i] if keyed and i < len(user_macs) else None, peer
            )
            for i, span in enumerate(decided.get("user") or [])
        ]
        reply = None
        if decided.get("reply"):
            reply = self._line(
                path, decided["reply"], "assistant", decided["turn"], macs.get("reply") if keyed else None, None
            )
        return texts, reply

    def _line(self, path: Path, span: list[int], kind: str, turn: int, mac: str | None, peer: str | None) -> str:
        file = self._file
        if file is None or path != self._path:
            self.close()
            file = open_file(path)  # kept open across calls, closed by close()
            self._file, self._path = file, path
        file.seek(span[0])
        raw = file.read(span[1])

        def changed(why: str) -> SpanChanged:
            return SpanChanged(
                f"the line at byte {span[0]} of {path} {why} (the log changed since the turn was decided)"
            )

        if len(raw) != span[1]:
            raise changed("is cut short")
        if mac is not None and self._secret is not None and not hmac.compare_digest(line_mac(self._secret, raw), mac):
            raise changed("is not the one decided")
        record = read_line(raw)
        if isinstance(record, str):
            raise changed(f"is unreadable: {record}")
        if record["type"] != kind or record["turn"] != turn or (kind == "assistant" and record["final"] is not True):
            raise changed(f"is not the {'final reply' if kind == 'assistant' else 'user line'} of turn {turn}")
        speaker = record.get("speaker")
        # look_alike: a decision recorded before peer ids kept case and `.` apart named `ana.lima` `ana_lima`, the
        # same speaker
        if peer is not None and (not isinstance(speaker, str) or look_alike(speaker) != look_alike(peer)):
            raise changed("is not from the speaker decided")
        return record["text"]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = self._path = None

    def __enter__(self) -> SpanReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
