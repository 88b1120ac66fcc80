"""JSON lines from files bxmem does not write, and from brokerd: read in bounded pieces, parsed without ever
raising (a reason instead, RecursionError and all). What makes a line readable is docs/interfaces.md's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from typing import IO

# loopd logs a user message of 1,000,000 characters (4 MB as UTF-8 at worst)
# and tool results of pages; past this a line is unreadable, not read whole.
MAX_LINE_BYTES = 8 << 20
SKIP_PIECE = 1 << 20
# serde_json, which writes loopd's logs and brokerd's replies, reads at most 128
# levels; twice that is still far inside Python's own recursion limit.
MAX_DEPTH = 256
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # every byte but brackets, deleted by translate


@dataclass(slots=True)
class Line:
    start: int  # byte offset of the line
    end: int  # just past what was read of it (its newline, when it has one)
    raw: bytes | None  # None: longer than MAX_LINE_BYTES (its bytes skipped), or `rest`
    ended: bool = True  # False: an over-long line whose newline is not written yet
    rest: bool = False  # only the rest of an over-long line reported before: no new line


def complete_lines(
    f: IO[bytes], pos: int, *, skipping: bool = False, tail: bool = False, reseek: bool = False
) -> Iterator[Line]:
    """Lines from byte `pos` on; a last line without its newline is left out, unless `tail`. `skipping`: `pos` is
    inside an over-long line reported before, whose rest is skipped first. `reseek`: each line is read from its
    own offset, so the caller may seek `f` between lines."""
    limit = MAX_LINE_BYTES  # read per call: tests narrow it
    f.seek(pos)
    if skipping:
        end, ended = _skip_rest(f, pos)
        yield Line(pos, end, None, ended=ended, rest=True)
        if not ended:
            return
        pos = end
    while True:
        if reseek:
            f.seek(pos)
        raw = f.readline(limit + 1)
        if not raw:
            return
        if raw.endswith(b"\n"):
            yield Line(pos, pos + len(raw), raw)
            pos += len(raw)
            continue
        if len(raw) <= limit:
            if tail:
                yield Line(pos, pos + len(raw), raw)
            return
        end, ended = _skip_rest(f, pos + len(raw))
        yield Line(pos, end, None, ended=ended)
        if not ended:
            return
        pos = end


def _skip_rest(f: IO[bytes], pos: int) -> tuple[int, bool]:
    while True:
        piece = f.readline(SKIP_PIECE)
        if not piece:
            return pos, False
        pos += len(piece)
        if piece.endswith(b"\n"):
            return pos, True


class _DuplicateKey(Exception):
    pass


class NotJsonConstant(ValueError):
    """`NaN`, `Infinity` or `-Infinity`: Python's json reads them, JSON has none."""


def refuse_constant(name: str) -> object:
    raise NotJsonConstant(name)


JSON_WHITESPACE = b" \t\r\n"


def is_blank(raw: bytes) -> bool:
    """Nothing but JSON's whitespace: a line a reader passes over (bytes.strip
    would take a vertical tab or a form feed for blank, which JSON does not)."""
    return not raw.strip(JSON_WHITESPACE)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    record = dict(pairs)
    if len(record) != len(pairs):
        raise _DuplicateKey
    return record


# Built once: json.loads builds a decoder per call when given a hook (twice the cost of a line).
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=refuse_constant)


def too_deep(raw: bytes) -> bool:
    """Nested deeper than MAX_DEPTH; only a line holding that many brackets is scanned."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for byte in _STRING.sub(b"", raw).translate(None, _BRACKETS):
        if byte in b"[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        else:
            depth -= 1
    return False


def parse_object(raw: bytes) -> dict | str:
    """The line's object, or why it cannot be read (a few words, never its bytes)."""
    try:
        text = raw.decode("utf-8")  # strict: surrogates and overlong forms are not UTF-8
    except UnicodeDecodeError:
        return "not valid UTF-8"
    try:
        if too_deep(raw):
            return f"nested deeper than {MAX_DEPTH} levels"
        value = _DECODER.decode(text)
    except _DuplicateKey:
        return "a key appears twice in one object"
    except NotJsonConstant:
        return "not valid JSON (NaN or Infinity)"
    except ValueError:
        return "not valid JSON"
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels"
    except Exception:  # whatever else the parser meets: a line bxmem cannot read
        return "could not be parsed"
    if not isinstance(value, dict):
        return "not a JSON object"
    return value


def why_too_long() -> str:
    return f"longer than {MAX_LINE_BYTES:,} bytes"


def read_record(raw: bytes | None, problem: Callable[[dict], str | None]) -> dict | str:
    """One line as a record, or why it cannot be read: too long, not a JSON object, or
    what `problem` finds in its fields."""
    if raw is None:
        return why_too_long()
    record = parse_object(raw)
    if isinstance(record, str):
        return record
    return problem(record) or record
