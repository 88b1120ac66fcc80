"""An export read into the artifact store (seed 002 28.2): opened by descriptor, never through a link, one
identity from the first look to the last byte, streamed through SHA-256, never read whole.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from bxmem.errors import NotFound, Refused
from bxmem.store.files import file_kind, write_all

CHUNK = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR | os.O_NOFOLLOW
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def checkpoint(step: str) -> None:
    """Where an ingest stands; nothing in a run. The crash and race tests replace it
    in a child process to act at each step (a SIGKILL, a file grown or swapped)."""


class ChangedWhileRead(Refused):
    """The exported file was not the same from the first look to the last byte."""


class Export:
    """An exported file, open and checked: a regular file of one link, no larger than allowed."""

    def __init__(self, folder_fd: int, fd: int, name: str, st: os.stat_result) -> None:
        self.folder_fd, self.fd, self.name, self.st = folder_fd, fd, name, st

    @property
    def size(self) -> int:
        return self.st.st_size

    def close(self) -> None:
        for fd in (self.fd, self.folder_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _folder(parent_fd: int, name: str, shown: str) -> int:
    """A folder inside `parent_fd`, never through a link (a link in its place would
    let a session name files anywhere)."""
    try:
        return os.open(name, _NOFOLLOW_DIR, dir_fd=parent_fd)
    except FileNotFoundError:
        raise NotFound(f"{shown} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
                kind = "a regular file" if stat.S_ISREG(mode) else file_kind(mode)
            except OSError:
                kind = "not a folder"
            raise Refused(
                f"{shown} is {kind}, not a folder; bxmem reads exports only from the folder loopd made, never "
                "through a link"
            ) from None
        raise


def open_export(home: Path, session: str, name: str, max_bytes: int) -> Export:
    """`home/sessions/<session>/exports/<name>`, opened and checked (the caller has
    checked `session` and `name` are each one safe path component):

    | what is there                                            | refused (exit)   |
    | no such session folder, exports folder or file           | NotFound (5)     |
    | a folder on the way, or the file, is a symbolic link     | Refused (6)      |
    | exports/ not owned by this user, or writable by others   | Refused (6)      |
    | not a regular file (FIFO, device, socket, folder)        | Refused (6)      |
    | a regular file with more than one link (a hard link)     | Refused (6)      |
    | larger than `max_bytes`                                  | Refused (6)      |
    | swapped between the first look and the open              | ChangedWhileRead |
    """
    shown = f"sessions/{session}/exports"
    base = os.open(home, _DIR)  # the home is the owner's: it may itself be a link
    fds = [base]
    try:
        fds.append(_folder(fds[-1], "sessions", "sessions/"))
        fds.append(_folder(fds[-1], session, f"sessions/{session}/"))
        folder = _folder(fds[-1], "exports", f"{shown}/")
    finally:
        for fd in fds:
            os.close(fd)
    try:
        own = os.fstat(folder)
        if own.st_uid != os.geteuid() or own.st_mode & 0o022:
            raise Refused(
                f"{shown}/ is owned by uid {own.st_uid} with mode {stat.S_IMODE(own.st_mode):04o}; bxmem reads "
                "exports only from a folder of this user's that no one else can write"
            )
        try:
            seen = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            raise NotFound(f"no file {name!r} in {shown}/") from None
        _check(seen, name, shown, max_bytes)
        try:
            fd = os.open(name, _OPEN, dir_fd=folder)
        except FileNotFoundError:
            raise ChangedWhileRead(f"{name!r} in {shown}/ was removed while it was opened") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ChangedWhileRead(
                    f"{name!r} in {shown}/ was replaced by a symbolic link while it was opened"
                ) from None
            raise
    except BaseException:
        os.close(folder)
        raise
    export = Export(folder, fd, name, seen)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
            raise ChangedWhileRead(f"{name!r} in {shown}/ was replaced while it was opened")
        _check(st, name, shown, max_bytes)
        export.st = st
    except BaseException:
        export.close()
        raise
    return export


def _check(st: os.stat_result, name: str, shown: str, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{name!r} in {shown}/ is {file_kind(st.st_mode)}, not a regular file")
    if st.st_nlink != 1:
        raise Refused(
            f"{name!r} in {shown}/ has {st.st_nlink} links (a hard link to a file elsewhere, perhaps); "
            "bxmem keeps only a file written into exports/ itself"
        )
    if st.st_size > max_bytes:
        raise Refused(
            f"{name!r} in {shown}/ is {st.st_size:,} bytes; one artifact is at most {max_bytes:,} "
            "([artifacts] max_artifact_bytes)"
        )


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns, a.st_ctime_ns, a.st_nlink) == (
        b.st_dev,
        b.st_ino,
        b.st_size,
        b.st_mtime_ns,
        b.st_ctime_ns,
        b.st_nlink,
    )


def stream(export: Export, out_fd: int) -> bytes:
    """Copy the export into `out_fd`, hashing as it goes; its SHA-256 digest. ChangedWhileRead, and nothing copied is
    used, when it grows past or ends short of its size at open, or after the last byte its identity, size, times
    or links differ or its name no longer names it."""
    digest = hashlib.sha256()
    want, done = export.size, 0
    shown = f"{export.name!r}"
    checkpoint("opened")
    while True:
        piece = os.read(export.fd, min(CHUNK, want - done + 1))
        if not piece:
            break
        done += len(piece)
        if done > want:
            raise ChangedWhileRead(
                f"{shown} grew while it was read (past its {want:,} bytes); an exported file is "
                "written once: write a new file"
            )
        digest.update(piece)
        write_all(out_fd, piece)
        checkpoint("read")
    after = os.fstat(export.fd)
    if done != want or not _same(after, export.st):
        raise ChangedWhileRead(
            f"{shown} changed while it was read ({done:,} of {want:,} bytes read, its size, times or "
            "links now differ); an exported file is written once: write a new file"
        )
    try:
        named = os.stat(export.name, dir_fd=export.folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        named = None
    if named is None or not _same(named, export.st):
        raise ChangedWhileRead(f"{shown} was replaced or removed while it was read; write a new file")
    checkpoint("read-all")
    return digest.digest()
