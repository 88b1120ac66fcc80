"""bxmem's local secret, `memory/bxmem/entry.key`: the key of the HMACs and
keyed hashes that let bxmem recognise a text without writing it anywhere.

mirror keys its map of live conclusions by an HMAC of each entry; decide and
mirror record a keyed hash (`line_mac`) of each log or journal line a decision
will read back, and send and the index check it before they use the line.
Keyed, so that the ledger and the state files never let anyone test guesses
of a text.

Created once, whole: written under a temporary name, fsynced, then linked
into place, so two jobs creating it at once end up with the same key. Like
everything in `memory/bxmem/` it may be deleted: mirror then rebuilds its
state, and a line's hash made with the old key can no longer be checked (the
checks that need no key still are: what the span holds must be the record
the decision names; docs/interfaces.md, "Read back").
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from .errors import StorageError

KEY_FILE = "entry.key"
KEY_BYTES = 32


def load(state_dir: Path, *, create: bool = True) -> bytes | None:
    """The key, created first when `create` and there is none (or only a torn one)."""
    path = state_dir / KEY_FILE
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        secret = b""
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from None
    if len(secret) >= KEY_BYTES:
        return secret
    if not create:
        return None
    return _create(path, replace=bool(secret))


def _create(path: Path, *, replace: bool) -> bytes:
    secret = os.urandom(KEY_BYTES)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(secret)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:  # a key file shorter than a key: a crash while an older version wrote it
            os.replace(tmp, path)
            return secret
        try:
            os.link(tmp, path)
        except FileExistsError:
            return path.read_bytes()  # another job made it first: theirs is the key
        finally:
            os.unlink(tmp)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise StorageError(f"cannot create {path}: {exc.strerror}") from None
    return secret


def key_id(secret: bytes) -> str:
    """Names the key in the ledger and the state without revealing it."""
    return hmac.new(secret, b"bxmem mirror state", hashlib.sha256).hexdigest()[:16]


def line_mac(secret: bytes, raw: bytes) -> str:
    """The keyed hash of one line's bytes, exactly as they are in the file:
    BLAKE2b in its keyed mode (a MAC, RFC 7693), 128 bits. Taken for every user
    line and reply decide reads, where HMAC-SHA256 through OpenSSL cost 4 µs a
    line, a fifth of reading it; this costs about 1."""
    return hashlib.blake2b(raw, digest_size=16, key=secret, person=b"bxmem line").hexdigest()
