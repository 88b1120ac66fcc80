"""An injected full disk: every write bxmem makes through `os.write` to a file
under a given folder counts against a byte budget; the write that crosses it
writes what still fits (a short write, as the kernel does) and the next one
fails with ENOSPC, as a disk full but `budget` bytes would.

bxmem writes its ledger, its state files, its idle summaries and the journal
appends through `os.write` (store.write_bytes, ledger.append_lines,
journal.append_checked), so this reaches every one of them; SQLite (the
index) writes from C and is reached only by a real small filesystem (the
crash suite's `--tmpfs`).

In a test:

    with DiskFull(home, budget=8192) as disk:
        ...
    disk.hit  # whether the budget was reached

`Crash` is the same with the process dying instead (a Killed exception that
nothing catches): the bytes written so far stay, half a line too.

As a wrapper around a job, for the crash suite (`python tests/enospc.py
BUDGET FOLDER -- bxmem ARGS`): the job runs in-process through the CLI's
error boundary with the budget in place and exits with its own status.
"""

from __future__ import annotations

import errno
import os
import sys


class Killed(BaseException):
    """What `Crash` raises: like SIGKILL, nothing in bxmem catches it or cleans up."""


class DiskFull:
    """`where`: a folder (every file under it counts) or one file."""

    def __init__(self, where: str | os.PathLike[str], budget: int) -> None:
        where = os.path.realpath(where)
        self.folder = where + os.sep if os.path.isdir(where) else None
        self.file = None if self.folder else where
        self.budget = budget
        self.written = 0
        self.hit = False
        self._real = os.write

    def _counted(self, fd: int) -> bool:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        return target == self.file if self.file else target.startswith(self.folder or "")

    def fail(self) -> BaseException:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, fd: int, data) -> int:
        if not self._counted(fd):
            return self._real(fd, data)
        room = self.budget - self.written
        if room <= 0:
            self.hit = True
            raise self.fail()
        view = memoryview(data)[:room]
        done = self._real(fd, view)
        self.written += done
        return done

    def __enter__(self) -> DiskFull:
        os.write = self.write
        return self

    def __exit__(self, *exc: object) -> None:
        os.write = self._real


class Crash(DiskFull):
    """The process dies once `budget` bytes are written: what it wrote stays, half a line too."""

    def fail(self) -> BaseException:
        return Killed()


def main(argv: list[str]) -> int:
    budget, folder, separator, *job = argv
    assert separator == "--" and job[0] == "bxmem", argv
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from bxmem.cli.app import run_cli

    with DiskFull(folder, int(budget)):
        return run_cli(job[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
