"""A new bxmem.toml (`bxmem init`), never over one: the only write of the configuration file."""

from __future__ import annotations

import os
from pathlib import Path

from bxmem.errors import Refused, StorageError
from bxmem.store.files import write_all


def is_there(path: Path) -> bool:
    """Whether anything is at `path`, a link to nothing included."""
    return path.is_symlink() or path.exists()


def write_new(path: Path, text: str) -> None:
    """A new configuration file (`bxmem init`), mode 600, in a folder of the owner's
    (made 700); Refused when one is there, a link included, even one that appears
    while it is written: never over a configuration."""
    if is_there(path):
        raise Refused(
            f"{path} exists: bxmem init never writes over a configuration (bxmem config check shows what it holds)"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise Refused(f"{path} exists: bxmem init never writes over a configuration") from None
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror}") from None
    try:
        write_all(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
