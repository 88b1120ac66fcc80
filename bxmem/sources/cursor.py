"""Where a reader stands in a file bxmem does not write (a session log, the
journal), and whether that file is still the one it read up to there.

A cursor is a byte offset, a line number and the file's inode. A log that is
replaced (a new inode) or truncated (shorter than the offset) is read again
from its start. That is not enough for a copy-truncate rotation: the file is
copied elsewhere and cut to nothing in place, loopd goes on appending to it,
and by the next run it may have grown past the old offset, which now falls
in the middle of new lines; reading on from there would skip the earlier ones,
and with them a tool result's taint. So the cursor also keeps a keyed hash of
the first bytes of the file and of the bytes just before the offset (at most
WINDOW of each), checked before each read on: if either changed, the file was
rewritten, and it is read again from its start. Decided turns and edits are
kept (the readers' exact sets), so nothing is decided twice.

Keyed (`local_key.window_mac`), so the state file never lets anyone test
guesses of what a log holds.
"""

from __future__ import annotations

import os

from ..local_key import key_id, window_mac
from ..shapes import OFFSET, integer, maybe, record, string

WINDOW = 256  # bytes hashed at the file's start and before the offset

SEEN = maybe(record({"w": integer(1), "key": maybe(string), "head": string, "tail": string}))
FIELDS = {"offset": OFFSET, "line": OFFSET, "ino": maybe(integer(0))}  # every cursor's; `seen` is optional


def seen(fd: int, offset: int, secret: bytes | None) -> dict | None:
    """What the cursor keeps of the bytes before `offset` (None at the start)."""
    if offset <= 0:
        return None
    head = os.pread(fd, min(WINDOW, offset), 0)
    start = max(0, offset - WINDOW)
    tail = os.pread(fd, offset - start, start)
    return {"w": WINDOW, "key": key_id(secret) if secret else None, "head": window_mac(secret, head),
            "tail": window_mac(secret, tail)}


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
        return "rewritten before the point read to (its first bytes or those before it changed: a copy-truncate rotation?)"
    return None
