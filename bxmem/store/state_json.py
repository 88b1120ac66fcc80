"""The JSON state files in memory/bxmem/, sealed: the first member a BLAKE2b digest of the name and the rest,
still JSON (jq reads it). Not keyed: it answers damage and hand edits, not someone who can write the owner's files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bxmem.formats.shapes import Shape, problem
from bxmem.store.files import Unreadable, read_state, write_bytes

SEAL_KEY = "seal"
_SEAL_OPEN = b'{"seal":"'
_SEAL_CLOSE = len(_SEAL_OPEN) + 32  # where the digest's closing quote is
CHANGED = "changed outside bxmem (its checksum does not match)"
UNSEALED = "written without a checksum (by a bxmem before this one, or by hand)"


def _digest(name: str, parts: tuple[bytes | memoryview, ...]) -> bytes:
    import hashlib  # deferred: lean (only where a JSON state file is read or written; the jobs load it anyway)

    digest = hashlib.blake2b(os.fsencode(name) + b"\0", digest_size=16, person=b"bxmem state")
    for part in parts:
        digest.update(part)
    return digest.hexdigest().encode()


def seal_json(name: str, value: dict) -> bytes:
    """`value` as the state file `name` holds it: compact JSON, its seal first. A lone
    surrogate (a `\\ud800` escape read from the ledger, say) is written as the ledger's
    appends write one, and load_json reads it back the same (json decodes bytes with
    surrogatepass), instead of failing the job that saves its state."""
    if SEAL_KEY in value:
        raise ValueError(f"a state file's object has no {SEAL_KEY!r} member of its own")
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    stamp = _SEAL_OPEN + _digest(name, (body,)) + b'"'
    return stamp + body[1:] if body == b"{}" else stamp + b"," + body[1:]


def _seal_holds(name: str, data: bytes) -> bool | None:
    """Whether the state file `name`'s bytes are as bxmem sealed them: None when
    they carry no seal (an older bxmem wrote them, or a hand did), False when
    they carry one the bytes no longer match, or one damaged itself."""
    if not data.startswith(_SEAL_OPEN):
        # A seal whose own bytes were changed (its name, a quote) is still a seal.
        looks = data[:2] == b'{"' and data[6:9] == b'":"' and data[_SEAL_CLOSE : _SEAL_CLOSE + 1] == b'"'
        return False if looks else None
    after = data[_SEAL_CLOSE : _SEAL_CLOSE + 2]
    if after == b'",':
        parts: tuple[bytes | memoryview, ...] = (b"{", memoryview(data)[_SEAL_CLOSE + 2 :])  # no copy of the file
    elif after == b'"}' and len(data) == _SEAL_CLOSE + 2:
        parts = (b"{}",)
    else:
        return False
    return _digest(name, parts) == data[len(_SEAL_OPEN) : _SEAL_CLOSE]


def load_json(path: Path, shape: Shape) -> tuple[dict | None, str | None]:
    """(the file's object, None), (None, None) when there is no file, or (None,
    why it cannot be used): CHANGED (its seal does not match), UNSEALED (no seal,
    though an older bxmem would have read it: never trusted, rebuilt as planned),
    not JSON, nested too deep, not of `shape` (formats/shapes.py). Never raises
    for what the file holds."""
    try:
        data = read_state(path)
        if data is None:
            return None, None
        sealed = _seal_holds(path.name, data)
        if sealed is False:
            return None, CHANGED
        value = json.loads(data)
    except Unreadable as exc:
        return None, str(exc)
    except RecursionError:
        return None, "nested too deep"
    except ValueError:  # UnicodeDecodeError among them
        return None, "not valid JSON"
    if sealed:
        value.pop(SEAL_KEY)  # an object: its bytes open with the seal
    why = problem(value, shape)
    if why is None and not sealed:
        why = UNSEALED
    return (value, None) if why is None else (None, why)


def say_unusable(path: Path, why: str, instead: str) -> None:
    """The one line for a state file a job will not use, and what it does `instead`:
    at info for one an older bxmem wrote without a seal (an upgrade's first run,
    planned), else a warning naming the runbook entry."""
    from bxmem.log import log, runbook  # deferred: lean (recall reads state files and sets up no logging)

    if why == UNSEALED:
        log.info(f"{path}: {why}; {instead}")
    else:
        log.warning(f"{path}: {why}; {instead}" + runbook("state-rewritten"))


def write_json(path: Path, value: dict, *, durable: bool = True) -> None:
    write_bytes(path, seal_json(path.name, value), durable=durable)
