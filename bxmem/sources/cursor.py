"""Where a reader stands in a file bxmem does not write, and whether it is still the file read up to there.
The keyed hashes of the first bytes and of those before the offset catch a copy-truncate rotation, which size,
inode and mtime alone miss; keyed, so the state never lets anyone test guesses of what a log holds.
"""

from __future__ import annotations

import os

from bxmem.formats.shapes import OFFSET, integer, maybe, record, string
from bxmem.store.local_key import key_id, window_mac

WINDOW = 256  # bytes hashed at the file's start and before the offset

SEEN = maybe(record({"w": integer(1), "key": maybe(string), "head": string, "tail": string}))
FIELDS = {"offset": OFFSET, "line": OFFSET, "ino": maybe(integer(0))}  # every cursor's
OPTIONAL = {"seen": SEEN, "mtime": maybe(integer(None))}  # what remember() adds (a version before kept none)


def remember(fd: int, cursor: dict, secret: bytes | None) -> None:
    """Keep in the cursor what the next read checks the file against (moved(),
    and `mtime` for the idle checks): after each read."""
    try:
        cursor["seen"] = seen(fd, cursor["offset"], secret)
        cursor["mtime"] = os.fstat(fd).st_mtime_ns
    except OSError:
        cursor["seen"] = cursor["mtime"] = None  # nothing to check against next time: read on as before


def version(cursor: dict) -> list[int | None] | None:
    """The file as read up to the cursor, as start/idle.py's written_fingerprint gives it; None: not read yet."""
    return None if cursor["ino"] is None else [cursor["ino"], cursor["offset"], cursor.get("mtime")]


def seen(fd: int, offset: int, secret: bytes | None) -> dict | None:
    """What the cursor keeps of the bytes before `offset` (None at the start)."""
    if offset <= 0:
        return None
    head = os.pread(fd, min(WINDOW, offset), 0)
    start = max(0, offset - WINDOW)
    tail = os.pread(fd, offset - start, start)
    return {
        "w": WINDOW,
        "key": key_id(secret) if secret else None,
        "head": window_mac(secret, head),
        "tail": window_mac(secret, tail),
    }


def moved(fd: int, st: os.stat_result, cursor: dict, secret: bytes | None) -> str | None:
    """Why the open file is not the one `cursor` read up to its offset (a few
    words), or None when it is, as far as can be told."""
    if cursor["ino"] is None:
        return None
    if st.st_ino != cursor["ino"]:
        return "replaced"
    if st.st_size < cursor["offset"]:
        return "truncated"
    known = cursor.get("seen")
    if known is None or known["w"] != WINDOW or known["key"] != (key_id(secret) if secret else None):
        return None  # read by a version that kept none, or with an entry.key since replaced: nothing to hold it to
    if seen(fd, cursor["offset"], secret) != known:
        return (
            "rewritten before the point read to (its first bytes or those before it changed: a copy-truncate rotation?)"
        )
    return None
