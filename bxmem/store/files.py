"""Small durable files: atomic state files, read back never blocking, never through a link and checked
whole against their shape, and the exclusive job locks on the ledger.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from bxmem.errors import StorageError
from bxmem.formats.shapes import Shape, problem
from bxmem.start.marshal_seal import unmarshal

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from io import BufferedReader


def file_kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "a special file")


def open_regular(path: str | os.PathLike[str], flags: int, *, follow: bool = False, mode: int = 0o600) -> int:
    """A descriptor of `path`, only ever a regular file, never blocking: lstat first (stat when `follow`), so a FIFO,
    a device, a socket or a directory is refused unopened (a FIFO opened for reading waits for a writer; a device
    may act on open), and the fstat must name the same regular file. NotRegular says what it is instead;
    FileNotFoundError when there is none and `flags` lacks O_CREAT."""
    try:
        before = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        before = None
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise NotRegular(f"is {file_kind(before.st_mode)}, not a regular file")
    base = flags | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, base, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(f"is {file_kind(stat.S_IFLNK)}, not a regular file") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (
        before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino)
    ):
        os.close(fd)
        raise NotRegular(
            f"is {file_kind(st.st_mode)}, not a regular file"
            if not stat.S_ISREG(st.st_mode)
            else "was replaced while it was opened"
        )
    return fd


class NotRegular(OSError):
    """A path that is not the regular file bxmem keeps there; the message says what it is."""


def read_state(path: Path, *, follow: bool = False) -> bytes | None:
    """The bytes of one of bxmem's own files, or None when there is none, through open_regular (a FIFO put there
    would hang every job) and never through a link unless `follow` (the config file, which the owner may keep as a
    link). Anything else raises Unreadable with the reason."""
    try:
        fd = open_regular(path, os.O_RDONLY, follow=follow)
    except FileNotFoundError:
        return None
    except NotRegular as exc:
        raise Unreadable(str(exc)) from None
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}") from None
    try:
        pieces: list[bytes] = []
        while True:
            piece = os.read(fd, 1 << 20)
            if not piece:
                return b"".join(pieces)
            pieces.append(piece)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


class Unreadable(Exception):
    """One of bxmem's own files cannot be used; the message says why, in a few words."""


def load_marshal(path: Path, shape: Shape) -> tuple[dict | None, str | None]:
    """(the file's object, None), (None, None) when there is none, or (None, why it
    cannot be used), for the marshal files (the outbox checkpoint, the config cache):
    damaged (start/marshal_seal.py's seal), not marshal data, not of `shape`."""
    try:
        data = read_state(path)
        if data is None:
            return None, None
        value = unmarshal(data)
    except (Unreadable, ValueError) as exc:
        return None, str(exc)
    why = problem(value, shape)
    return (value, None) if why is None else (None, why)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """All of `data` to `fd`: os.write may write less than it is given."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_bytes(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int | None = None,
    durable: bool = True,
    exclusive: bool = False,
    doing: str = "write",
) -> bool:
    """`data` in place of `path`, whole or not at all: a temporary file in the same
    folder, renamed over it. Mode 600, or `mode` (set whatever the umask); not
    `durable`: no fsync, for a file a crash may lose (the next run writes it again).
    `exclusive`: linked into place, never over a file that is there (False then)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        else:
            os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StorageError(f"cannot {doing} {path}: {exc.strerror}") from None
    return True


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path, mode: int = 0o700) -> None:
    """mkdir -p, each folder it makes made durable in its parent (fsync_dir), so a
    crash after a job's first fsynced write does not take the folder with it."""
    if path.is_dir():
        return
    make_dirs(path.parent, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        return
    fsync_dir(path.parent)


def open_ledger(path: Path, flags: int) -> int:
    """A descriptor of the ledger, created (0600) if `flags` has O_CREAT: a regular file only, never through a link,
    which would let whoever can write memory/ point the record of every decision elsewhere and have every turn
    decided again. A new ledger is made durable in its folder before anything is written to it: an fsynced append
    to a file whose name was lost is lost too. StorageError, one line naming the file, for anything else."""
    base = flags & ~os.O_CREAT
    try:
        try:
            fd = open_regular(path, base)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
            make_dirs(path.parent)
            try:
                fd = open_regular(path, base | os.O_CREAT | os.O_EXCL)
                fsync_dir(path.parent)
            except FileExistsError:  # another job made it meanwhile
                fd = open_regular(path, base)
    except FileNotFoundError:
        raise
    except NotRegular as exc:
        if "symbolic link" in str(exc):
            raise StorageError(
                f"{path} is a symbolic link; bxmem keeps its ledger in a regular file and never "
                "reads or writes it through a link (replace the link with the file itself)"
            ) from None
        raise StorageError(f"{path} {exc}; bxmem keeps its ledger in a regular file") from None
    except OSError as exc:
        raise StorageError(f"cannot open the ledger {path}: {exc.strerror}") from None
    return fd


class Flock:
    """A blocking flock on an open file for the length of a with-block: shared
    for readers, exclusive for writers. It is the lock portalocker takes on
    Linux, so writers that use portalocker (memoryd's journal) and bxmem
    exclude each other; portalocker itself is not used: importing it loads
    importlib.metadata, inspect and email on every run that touches the
    ledger (docs/performance.md, "Start-up")."""

    def __init__(self, fd: int, *, exclusive: bool) -> None:
        self.fd = fd
        self.exclusive = exclusive

    def __enter__(self) -> Flock:
        import fcntl  # deferred: lean (recall reads state files, never locks one)

        fcntl.flock(self.fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl  # deferred: lean (recall reads state files, never locks one)

        fcntl.flock(self.fd, fcntl.LOCK_UN)


class JobLock:
    """A job's exclusive lock, non-blocking: an OFD lock (`F_OFD_SETLK`) on one byte of the ledger far past its data,
    one byte per job (docs/design.md, "Concurrency and crashes", says why not a file in memory/bxmem/). The kernel
    releases it with the open file, so a SIGKILLed run leaves no stale lock; unlike a POSIX lock it survives the
    process closing another descriptor of the ledger, which every append does."""

    BASE = 1 << 62
    JOBS = ("decide", "mirror", "send", "index")  # "index": one writer of the local index (commands/index_fold.py)

    def __init__(self, ledger: Path, job: str) -> None:
        self.path = ledger
        self.offset = self.BASE + self.JOBS.index(job)
        self._fd: int | None = None

    def _ofd(self, fd: int, kind: int) -> None:
        import fcntl  # deferred: lean (recall reads state files, never locks one)
        import struct  # deferred: lean

        # struct flock on 64-bit Linux: l_type, l_whence (short), l_start, l_len (off_t),
        # l_pid (pid_t, 0 for OFD locks), padded to 32 bytes.
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, self.offset, 1, 0))

    def acquire(self) -> bool:
        import fcntl  # deferred: lean (recall reads state files, never locks one)

        for _ in range(3):
            fd = open_ledger(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
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


# --- files bxmem reads but does not write (logs, the journal, the index's) ---------------------


class NotRegularFile(NotRegular):
    """NotRegular, naming the file: what the readers of logs, the journal and the
    index raise. An OSError, so every reader's handling of an unreadable file
    takes it; `strerror` says what it is, `filename` which."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        OSError.__init__(self, errno.EINVAL, why, str(path))


def open_file(path: str | os.PathLike[str], flags: int = os.O_RDONLY) -> BufferedReader:
    """open(path, "rb") through open_regular, never through a link (one in logs/ would have another file read under
    that session's labels). NotRegularFile otherwise."""
    return os.fdopen(open_fd(path, flags), "rb")


def open_fd(path: str | os.PathLike[str], flags: int = os.O_RDONLY) -> int:
    """As open_file, a descriptor."""
    try:
        return open_regular(path, flags)
    except NotRegular as exc:
        if isinstance(exc, NotRegularFile):
            raise
        raise NotRegularFile(path, str(exc)) from None


def check_regular(path: str | os.PathLike[str]) -> None:
    """For a file another library opens (SQLite: the index, its -wal and -shm)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise NotRegularFile(path, f"is {file_kind(mode)}, not a regular file")
