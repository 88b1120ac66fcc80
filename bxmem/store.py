"""Small durable files: atomic JSON state, and the exclusive job locks.

State files are written to a temporary file, fsynced, then renamed over the
old one, so a crash leaves either the old state or the new, never half.
"""

from __future__ import annotations

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
    """A non-blocking exclusive lock: a second run of the same job exits at once.

    flock is released by the kernel when the process dies, so a SIGKILLed run
    never leaves a stale lock behind.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot open lock {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JobLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
