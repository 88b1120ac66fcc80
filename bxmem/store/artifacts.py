"""The artifact store, `memory/artifacts/` (objects/, cards/, projections/, pending/, removed/, tmp/, lock).
An object is published by link, which never replaces: two records of the same bytes meet there and keep one.
Nothing under `objects/` is deleted but by `artifact rm`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path

from bxmem.errors import IntegrityFailed, Refused, StorageError
from bxmem.formats.shapes import dict_of, integer, list_of
from bxmem.store.files import Flock, NotRegular, fsync_dir, make_dirs, open_regular, write_all
from bxmem.store.state_json import load_json, write_json
from bxmem.trust.artifact_rules import artifact_id, is_artifact_id, object_folder

FOLDERS = ("objects", "cards", "projections", "pending", "removed", "tmp")
CHUNK = 1 << 20
VERIFIED_FILE = "artifacts-verified.json"  # in memory/bxmem/, a cache: integrity = "cached" only


class Store:
    def __init__(self, root: Path, state: Path) -> None:
        self.root, self.state = root, state

    def folder(self, name: str) -> Path:
        return self.root / name

    def is_set_up(self) -> bool:
        return self.root.is_dir()

    def ensure(self) -> None:
        try:
            make_dirs(self.root, 0o700)
            for name in FOLDERS:
                make_dirs(self.root / name, 0o700)
        except OSError as exc:
            raise StorageError(f"cannot prepare the artifact store {self.root}: {exc.strerror}") from None

    @contextmanager
    def lock(self):
        """The store's one lock (flock on `lock`): what counts toward a quota, and every
        card and marker, change under it; bytes are streamed outside it."""
        try:
            fd = open_regular(self.root / "lock", os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise StorageError(f"cannot lock the artifact store: {exc.strerror}") from None
        try:
            with Flock(fd, exclusive=True):
                yield
        finally:
            os.close(fd)

    # --- temporary files: recognisable, and recovered (removed) once their writer is gone ---

    def new_temp(self, kind: str, size: int = 0) -> tuple[int, Path]:
        """A new temporary file in tmp/, named for its writer (`kind`.<pid>.<nonce>[.<bytes>]), its bytes counted
        toward the quota while its writer lives."""
        name = f"{kind}.{os.getpid()}.{secrets.token_hex(8)}" + (f".{size}.part" if kind == "ingest" else ".tmp")
        path = self.root / "tmp" / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot write in the artifact store: {exc.strerror}") from None
        return fd, path

    def temps(self) -> list[tuple[str, int, int, bool]]:
        out = []
        for entry in listing(self.root / "tmp"):
            parts = entry.name.split(".")
            pid = int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else 0
            reserved = int(parts[3]) if parts[0] == "ingest" and len(parts) == 5 and parts[3].isdigit() else 0
            out.append((entry.name, pid, reserved, pid > 0 and _alive(pid)))
        return out

    def recover_temps(self) -> list[str]:
        """Remove the temporary files whose writer is gone (a crash, a kill): never an
        object, never a card. Under the lock. Returns their names."""
        gone = [name for name, _pid, _bytes, alive in self.temps() if not alive]
        for name in gone:
            remove_file(self.root / "tmp" / name)
        return gone

    # --- quotas ---------------------------------------------------------------------------------

    def usage(self) -> tuple[int, int]:
        count = size = 0
        for folder in listing(self.root / "objects"):
            for entry in listing(Path(folder.path)):
                try:
                    size += entry.stat(follow_symlinks=False).st_size
                    count += 1
                except FileNotFoundError:
                    pass
        return count, size

    def reserve(self, size: int, max_total: int) -> tuple[int, Path]:
        """Under the lock: room for `size` more bytes, counting every live writer's reservation, or Refused; then the
        temporary file holding it, so the store never holds more than `max_total` bytes, copies in flight
        included."""
        self.recover_temps()
        _objects, used = self.usage()
        reserved = sum(size for _name, _pid, size, alive in self.temps() if alive)
        if used + reserved + size > max_total:
            raise Refused(
                f"the artifact store holds {used:,} bytes ({reserved:,} more being written); {size:,} more would "
                f"pass its {max_total:,} ([artifacts] max_total_bytes): bxmem artifact rm what is not needed "
                "(see: bxmem runbook artifact-quota)"
            )
        return self.new_temp("ingest", size)

    # --- objects ---------------------------------------------------------------------------------

    def object_path(self, artifact: str) -> Path:
        if not is_artifact_id(artifact):
            raise ValueError(f"not an artifact id: {artifact!r}")
        return self.root / "objects" / object_folder(artifact) / artifact

    def publish(self, temp: Path, artifact: str) -> bool:
        """Put a fsynced temporary file in place as the object; True when the object was
        there already (the same bytes recorded before, or by a record running at the
        same moment). An object there that is not those bytes is replaced."""
        target = self.object_path(artifact)
        make_dirs(target.parent, 0o700)
        os.chmod(temp, 0o400)
        try:
            os.link(temp, target)
            deduplicated = False
        except FileExistsError:
            deduplicated = self.check_object(artifact, None) is None
            if not deduplicated:
                os.replace(temp, target)  # a damaged object: the bytes just read are the ones named
        remove_file(temp)
        fsync_dir(target.parent)
        fsync_dir(temp.parent)
        return deduplicated

    def check_object(self, artifact: str, size: int | None) -> str | None:
        """Why the object is not the bytes its id names (missing, not a regular file,
        truncated or grown, replaced), or None: read whole, hashed."""
        try:
            fd = open_regular(self.object_path(artifact), os.O_RDONLY)
        except FileNotFoundError:
            return "missing"
        except NotRegular as exc:
            return f"replaced: it {exc.strerror or exc}"
        try:
            st = os.fstat(fd)
            if size is not None and st.st_size != size:
                return f"{'truncated' if st.st_size < size else 'grown'}: {st.st_size:,} bytes, recorded as {size:,}"
            digest = hashlib.sha256()
            while piece := os.read(fd, CHUNK):
                digest.update(piece)
            if artifact_id(digest.digest()) != artifact:
                return "replaced: its bytes are not the ones recorded (their SHA-256 differs)"
            return None
        finally:
            os.close(fd)

    def verify(self, artifact: str, size: int, mode: str) -> str:
        """The object's path once its size and SHA-256 are checked, else IntegrityFailed.
        `mode` "always" hashes every time; "cached" trusts an earlier check of this very
        file (device, inode, size, mtime and ctime all unchanged: any write or rename
        changes one), rehashing on any difference."""
        path = self.object_path(artifact)
        fingerprint = _fingerprint(path)
        if mode == "cached" and fingerprint is not None and self._verified().get(artifact) == fingerprint:
            return str(path)
        why = self.check_object(artifact, size)
        if why is not None:
            raise IntegrityFailed(
                f"artifact {artifact} failed its integrity check: {why}; it is not resolved "
                "(nothing re-fetches it: Honcho never holds the bytes)"
            )
        if mode == "cached" and fingerprint is not None and fingerprint == _fingerprint(path):
            self._remember(artifact, fingerprint)
        return str(path)

    def has_object(self, artifact: str, size: int) -> bool:
        fingerprint = _fingerprint(self.object_path(artifact))
        return fingerprint is not None and fingerprint[2] == size

    def export(self, artifact: str, size: int, to: str) -> None:
        """Copy the object to `to`, a new file (never replacing one), checking the bytes
        copied are the recorded ones; IntegrityFailed (and no file left) otherwise."""
        try:
            source = open_regular(self.object_path(artifact), os.O_RDONLY)
        except FileNotFoundError:
            raise IntegrityFailed(
                f"artifact {artifact} failed its integrity check: missing; nothing exported"
            ) from None
        except NotRegular as exc:
            raise IntegrityFailed(f"artifact {artifact} failed its integrity check: replaced: it {exc}") from None
        try:
            try:
                out = os.open(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                raise Refused(f"{to} exists: bxmem artifact export writes a new file, never over one") from None
            try:
                digest, done = hashlib.sha256(), 0
                while piece := os.read(source, CHUNK):
                    digest.update(piece)
                    done += len(piece)
                    write_all(out, piece)
                os.fsync(out)
            finally:
                os.close(out)
            if done != size or artifact_id(digest.digest()) != artifact:
                remove_file(Path(to))
                raise IntegrityFailed(
                    f"artifact {artifact} failed its integrity check: its bytes are not the ones "
                    "recorded; nothing exported"
                )
        finally:
            os.close(source)

    def remove_object(self, artifact: str) -> bool:
        path = self.object_path(artifact)
        removed = remove_file(path)
        if removed:
            fsync_dir(path.parent)
        self._forget(artifact)
        return removed

    def objects(self) -> list[str]:
        return sorted(
            entry.name
            for folder in listing(self.root / "objects")
            for entry in listing(Path(folder.path))
            if is_artifact_id(entry.name)
        )

    # --- the "cached" integrity mode's record ----------------------------------------------------

    def _verified(self) -> dict:
        value, _why = load_json(self.state / VERIFIED_FILE, _VERIFIED)
        return value or {}

    def _remember(self, artifact: str, fingerprint: list[int]) -> None:
        known = self._verified()
        known[artifact] = fingerprint
        try:
            make_dirs(self.state, 0o700)
            write_json(self.state / VERIFIED_FILE, known)
        except (OSError, StorageError):
            pass  # a cache: the next resolve hashes again

    def _forget(self, artifact: str) -> None:
        known = self._verified()
        if known.pop(artifact, None) is not None:
            try:
                write_json(self.state / VERIFIED_FILE, known)
            except (OSError, StorageError):
                pass


_VERIFIED = dict_of(list_of(integer(None), length=5))  # artifact id -> its file's fingerprint when last hashed


def media_type_of(name: str) -> str:
    """A file name's media type by its extension (Python's table and the host's mime.types), else application/octet-
    stream."""
    import mimetypes  # deferred: command

    return mimetypes.guess_type(name, strict=True)[0] or "application/octet-stream"


def _fingerprint(path: Path) -> list[int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone's: counted as alive (its reservation stands)
    return True


def listing(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []


def remove_file(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return False
        raise
