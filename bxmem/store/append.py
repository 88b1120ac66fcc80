"""The one append to the ledger and to memoryd's journal: whole lines or nothing, under the flock every
writer of these files takes (memoryd's portalocker takes the same).
"""

from __future__ import annotations

import os

from bxmem.errors import StorageError
from bxmem.store.files import Flock, write_all

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable


def append_whole(fd: int, data: bytes) -> int:
    """Append `data` to the file open at `fd` (O_APPEND, under the caller's
    exclusive flock) whole or not at all, fsync, and return the new size."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data
    try:
        write_all(fd, data)
        os.fsync(fd)
    except OSError:
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            pass  # still torn: the next append closes it off
        raise
    return os.fstat(fd).st_size


def append_locked(
    open_for_append: Callable[[], int], data: bytes, failed: Callable[[OSError], str], *, lock_held: bool = False
) -> int:
    """Open the file (`open_for_append` returns an O_APPEND descriptor or raises
    what its caller wants raised), take its exclusive flock unless the caller
    holds it already (`lock_held`: it read the file under the same hold), append
    `data` whole (append_whole), close, and return the new size. An OSError
    while locking or writing is a StorageError of `failed(exc)`: nothing of the
    append is kept."""
    fd = open_for_append()
    try:
        if lock_held:
            return append_whole(fd, data)
        with Flock(fd, exclusive=True):
            return append_whole(fd, data)
    except OSError as exc:
        raise StorageError(failed(exc)) from None
    finally:
        os.close(fd)
