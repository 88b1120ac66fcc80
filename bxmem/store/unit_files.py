"""The unit files `bxmem units install` writes, their templates and its manifest, each written whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bxmem.errors import BxmemError
from bxmem.store.files import write_all

UNIT_SUFFIXES = (".service", ".timer", ".path")


def templates(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("bxmem-*")) if p.suffix in UNIT_SUFFIXES}


def write(path: Path, data: bytes) -> bool:
    """Write `path` whole, mode 644 (systemd reads units as itself); True when it
    replaced a file that was there."""
    replaced = path.exists()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BxmemError(f"cannot write {path}: {exc.strerror}") from None
    return replaced


def read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BxmemError(f"cannot read {path}: {exc.strerror}") from None


def remove(path: Path) -> bool:
    """True when there was a file to remove."""
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise BxmemError(f"cannot remove {path}: {exc.strerror}") from None


def read_manifest(path: Path) -> object:
    """The manifest as JSON, or None when there is none (its shape is the caller's to check)."""
    data = read(path)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        raise BxmemError(f"{path}: not the list of installed units bxmem writes (not JSON)") from None


def write_manifest(path: Path, manifest: dict) -> None:
    write(path, json.dumps(manifest, indent=2).encode() + b"\n")
