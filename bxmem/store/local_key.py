"""`memory/bxmem/entry.key`, the key of the HMACs that let bxmem recognise a text without writing it, so
neither the ledger nor a state file lets anyone test guesses of a text. Created once, whole (linked into place,
so two jobs creating it at once get the same key); deletable like all of `memory/bxmem/`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from bxmem.errors import StorageError
from bxmem.log import log
from bxmem.store.files import Unreadable, read_state, write_bytes

KEY_FILE = "entry.key"
KEY_BYTES = 32


MAX_KEY_BYTES = 64  # BLAKE2b's longest key; bxmem writes KEY_BYTES


def load(state_dir: Path, *, create: bool = True) -> bytes | None:
    """The key, created first when `create` and there is none: none at all, a
    torn one (shorter than a key), or anything bxmem did not write as one (a
    FIFO, a link, more than MAX_KEY_BYTES), which is replaced, said once."""
    path = state_dir / KEY_FILE
    exists = True
    try:
        secret = _read(path)
        not_a_key = (
            f"{len(secret):,} bytes, longer than a key"
            if len(secret) > MAX_KEY_BYTES
            else "empty"
            if not secret
            else None
        )  # bxmem links a key in whole: never an empty file
    except FileNotFoundError:
        secret, not_a_key, exists = b"", None, False
    except Unreadable as exc:
        if str(exc).startswith("cannot read"):  # the machine refused (permissions, I/O): not ours to replace
            raise StorageError(f"{path}: {exc}") from None
        secret, not_a_key = b"", str(exc)
    if KEY_BYTES <= len(secret) <= MAX_KEY_BYTES:
        return secret
    if not create:
        return None
    if not_a_key:
        log.warning(
            f"{path}: {not_a_key}, not a key bxmem wrote; replaced with a new key (line hashes made "
            "with the old one are checked without them)"
        )
    return _create(path, replace=exists)  # an empty file too: linking over it would fail and leave no key


def _read(path: Path) -> bytes:
    data = read_state(path)
    if data is None:
        raise FileNotFoundError(path)
    return data


def _create(path: Path, *, replace: bool) -> bytes:
    secret = os.urandom(KEY_BYTES)
    # Replaced only when it is not a key bxmem wrote whole (a crash while an older version
    # wrote it, or something else); otherwise linked, and if another job made it first, theirs
    # is the key. The name is fsynced too: a key lost in a crash leaves every hash made with
    # it uncheckable.
    if write_bytes(path, secret, exclusive=not replace, doing="create"):
        return secret
    return _read(path)


def key_id(secret: bytes) -> str:
    """Names the key in the ledger and the state without revealing it."""
    return hmac.new(secret, b"bxmem mirror state", hashlib.sha256).hexdigest()[:16]


def line_mac(secret: bytes, raw: bytes) -> str:
    """The keyed hash of one line's bytes, exactly as they are in the file:
    BLAKE2b in its keyed mode (a MAC, RFC 7693), 128 bits. Taken for every user
    line and reply decide reads: a quarter of what HMAC-SHA256 through OpenSSL
    costs a line (docs/performance.md, "Start-up")."""
    return hashlib.blake2b(raw, digest_size=16, key=secret, person=b"bxmem line").hexdigest()


TAG_BITS = 32


def ledger_tag(secret: bytes | None, raw: bytes) -> int:
    """The keyed hash the outbox keeps of a pending item's decision line, TAG_BITS bits, checked when the line is
    read back by its offset: a ledger rewritten in place cannot hand send another item's decision, nor an edited
    one. Short, as 100,000 pending items keep one each (docs/performance.md, "Memory"); keyed, so an edit made to
    pass it would need entry.key."""
    digest = hashlib.blake2b(raw, digest_size=TAG_BITS // 8, key=secret or b"", person=b"bxmem decision")
    return int.from_bytes(digest.digest(), "big")


def window_mac(secret: bytes | None, raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16, key=secret or b"", person=b"bxmem cursor").hexdigest()
