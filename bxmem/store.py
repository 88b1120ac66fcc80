"""Small durable files: atomic JSON state, and the exclusive job locks (on the ledger).

State files are written to a temporary file, fsynced, then renamed over the
old one, so a crash leaves either the old state or the new, never half.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from .errors import StorageError


def read_json(path: Path) -> dict | None:
    """The file's object, or None if it is missing or unreadable as JSON."""
    try:
        with open(path, "rb") as f:
            value = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_json(path: Path, value: dict) -> None:
    write_bytes(path, json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StorageError(f"cannot write {path}: {exc.strerror}") from None


class Flock:
    """A blocking flock on an open file for the length of a with-block: shared
    for readers, exclusive for writers. It is the lock portalocker takes on
    Linux, so writers that use portalocker (memoryd's journal) and bxmem
    exclude each other; portalocker itself is not used because importing it
    (it loads importlib.metadata, inspect and email) cost 30-45 ms of every
    run that touches the ledger."""

    def __init__(self, fd: int, *, exclusive: bool) -> None:
        self.fd = fd
        self.exclusive = exclusive

    def __enter__(self) -> Flock:
        import fcntl

        fcntl.flock(self.fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self.fd, fcntl.LOCK_UN)


class JobLock:
    """A job's exclusive lock, non-blocking: a second run of the same job exits at once.

    It is an open file description lock (`F_OFD_SETLK`) on one byte of the
    ledger (memory/honcho.jsonl) far past any data it will ever hold, one byte
    per job. Not a file in memory/bxmem/: that folder is a cache the owner may
    delete at any time, and a lock file deleted under a running send let a
    second send take a new lock and post the same batch again. The ledger is
    never deleted (it is the record), so the lock holds for as long as the run.

    On Linux an OFD lock and the flock that ledger appends and readers take are
    independent, so holding it never blocks the job's own appends. (That is
    true of local filesystems; on NFS, flock is emulated with byte-range locks
    and the two would meet: the home must be local, as a Boxmaker home is.)
    The kernel releases it when the last descriptor of the open file closes,
    so a SIGKILLed run never leaves a stale lock behind; unlike a plain POSIX
    lock it is not lost when the process closes some other descriptor of the
    ledger, which every append does.
    """

    BASE = 1 << 62
    JOBS = ("decide", "mirror", "send", "index")  # "index": one writer of the local index (index_fold.py)

    def __init__(self, ledger: Path, job: str) -> None:
        self.path = ledger
        self.offset = self.BASE + self.JOBS.index(job)
        self._fd: int | None = None

    def _ofd(self, fd: int, kind: int) -> None:
        import fcntl
        import struct

        # struct flock on 64-bit Linux: l_type, l_whence (short), l_start, l_len (off_t),
        # l_pid (pid_t, 0 for OFD locks), padded to 32 bytes.
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, self.offset, 1, 0))

    def acquire(self) -> bool:
        import fcntl

        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            except OSError as exc:
                raise StorageError(f"cannot open {self.path} to lock it: {exc.strerror}") from None
            try:
                self._ofd(fd, fcntl.F_WRLCK)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise StorageError(f"cannot lock {self.path}: {exc.strerror}") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return True
            os.close(fd)  # the ledger was replaced between the open and the lock: lock the one there now
        raise StorageError(f"cannot lock {self.path}: it keeps being replaced")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JobLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
