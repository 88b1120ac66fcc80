"""The idle check: answer "nothing to do" from a few `stat` calls before importing anything heavy. It errs
towards running the job. Only builtin modules (os, marshal, time): even `json`, `pathlib`, `dataclasses` and
`enum` cost more than the whole check, and the summary is marshal data for the same reason.
"""

from __future__ import annotations

import marshal
import os
import stat  # loaded already: os imports it
import time

from bxmem.start import locations
from bxmem.start.lean_argv import JOBS
from bxmem.start.marshal_seal import seal, unmarshal

# A summary another version wrote is not trusted, so the first timer run after an upgrade is a
# real one: raised whenever what a summary holds changes, or what a real run must redo (the local
# index's schema: that run rebuilds it, and the idle path never opens it).
SUMMARY_VERSION = 6


def stat_fingerprint(path: str | os.PathLike[str]) -> list[int] | None:
    """A file's version: a rewrite, an edit, a chmod, a chown or a rename all change it
    (the ctime covers the last two: a key file refused for its owner is fixed by a chown)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid, st.st_ctime_ns]


def size_fingerprint(path: str | os.PathLike[str]) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size]


def written_fingerprint(path: str | os.PathLike[str]) -> list[int] | None:
    """A file bxmem reads from a cursor: a rewrite to the same size changes its mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def access_fingerprint(path: str | os.PathLike[str]) -> list[int] | None:
    """Who may read the file: a chmod or chown changes it, a write does not."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_mode, st.st_uid, st.st_gid]


_KINDS = {
    "stat": stat_fingerprint,
    "size": size_fingerprint,
    "written": written_fingerprint,
    "access": access_fingerprint,
}
TAIL_BYTES = 64


def ledger_tail(path: str | os.PathLike[str], offset: int) -> list | None:
    """The ledger as a job read it up to `offset`: its inode, the offset, and the bytes just
    before it (the ledger holds no text). The watch kinds "tail" (decide, mirror: the
    ledger may grow, as other jobs append) and "ledger" (send: any growth wakes it) compare
    it with one pread, so a ledger copied back or sorted in place is never answered idle."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        start = max(0, offset - TAIL_BYTES)
        return [st.st_ino, offset, os.pread(fd, offset - start, start), st.st_size]
    finally:
        os.close(fd)


def _same_tail(path: str, value: list | None, grows: bool) -> bool:
    now = ledger_tail(path, value[1] if value else 0)
    if value is None or now is None:
        return now is None and value is None
    return now[:3] == value[:3] and (grows or now[3] == value[3])


def summary_path(state_dir: str | os.PathLike[str], job: str) -> str:
    return os.path.join(state_dir, f"idle-{job}.marshal")


def dormant_path(state_dir: str | os.PathLike[str], job: str) -> str:
    return os.path.join(state_dir, f"idle-{job}-dormant.marshal")


def write_summary(
    state_dir,
    job: str,
    config,
    watch: dict[str, tuple[str, object]],
    wake_at: float | None,
    dormant: dict[str, tuple[str, list]] | None = None,
    sweep_every: float = 60.0,
    exit_code: int = 0,
) -> None:
    """Written by the slow path at the end of a run (atomically). `dormant` files are compared only once every
    `sweep_every` seconds; `exit_code` is what an idle run answers too while nothing differs. The summary keeps
    when it was written: a clock that went back since makes it no answer."""
    from bxmem.store.files import write_bytes  # deferred: idle (only a real run writes, with store/ loaded)

    sweep = None
    if dormant:
        # The pair is matched by a token: a summary never sweeps another run's list,
        # so a file cannot fall between the two lists if one of the writes fails.
        token = time.time_ns()
        path = dormant_path(state_dir, job)
        by_dir: dict[str, list] = {}
        for name, (kind, (ino, size, mtime)) in dormant.items():
            assert kind == "written", "dormant files are compared by inode, size and mtime"
            folder, base = os.path.split(name)
            by_dir.setdefault(folder, []).append([base, ino, size, mtime])
        write_bytes(path, seal(marshal.dumps({"token": token, "dirs": by_dir})))
        sweep = [path, sweep_every, token]
    data = {
        "version": SUMMARY_VERSION,
        "config": [str(config.path), stat_fingerprint(config.path)],
        "home_env": os.environ.get(locations.HOME_ENV),
        "watch": [[path, kind, value] for path, (kind, value) in watch.items()],
        "wake_at": wake_at,
        "sweep": sweep,
        "written_at": time.time(),
        "exit": exit_code,
    }
    write_bytes(summary_path(state_dir, job), seal(marshal.dumps(data)))


def is_idle(parsed) -> bool:
    return idle_exit(parsed) is not None


def idle_exit(parsed) -> int | None:
    """The exit status of a timer job with nothing to do since its last run (the one
    that run exited with: nothing it depends on has changed), or None: run the job."""
    if parsed is None or parsed.command not in JOBS:
        return None
    if parsed.options.get("json") or parsed.options.get("verbose") or parsed.options.get("now"):
        return None  # --json, -v: the job runs and reports; --now: it does what it would wait for
    try:
        if os.isatty(2):
            return None  # a person is watching: run the job and report
        return _idle(parsed.command, parsed.options.get("config"))
    except Exception:  # any doubt: let the real job run and report properly
        return None


def _read(path: str, *, follow: bool = False) -> bytes:
    """A regular file's bytes, never blocking: a FIFO (or anything else that is
    not a regular file) where a summary or the config belongs is OSError, and
    so "not idle": the real job says what is wrong."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | (0 if follow else os.O_NOFOLLOW))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        pieces = []
        while piece := os.read(fd, 1 << 20):
            pieces.append(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def _configured_home(path: str) -> str | None:
    try:
        data = _read(path, follow=True)  # the owner may keep the config as a link
    except FileNotFoundError:
        return None
    sure, home = _glance_home(data)
    if sure:
        return home
    import tomllib  # deferred: idle (a config the glance cannot read: tomllib costs more than the whole check)

    return (tomllib.loads(data.decode()).get("paths") or {}).get("home")


_UNSURE = (False, None)


def _glance_home(data: bytes) -> tuple[bool, str | None]:
    """(True, `[paths] home`) as the owner writes it, read at a glance; (False, None) for a config written otherwise
    (a quoted key, an inline table, an escape, a multi-line string), which tomllib then reads. A wrong answer can
    only cost a real run (docs/design.md, "The idle path")."""
    if b"paths" not in data and b"\\" not in data:
        return True, None  # no escape, no word "paths": nothing can name a [paths] table
    if b"\\" in data or b'"""' in data or b"'''" in data:
        return _UNSURE
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return _UNSURE
    section, home = "", None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            header = line.partition("#")[0].rstrip()
            name = header.strip("[]").strip()
            if not header.endswith("]") or not _bare(name):
                return _UNSURE
            section = "[[" + name if header.startswith("[[") else name
            if section.startswith("paths."):
                return _UNSURE
            continue
        key, equals, value = line.partition("=")
        key = key.strip()
        if not equals:
            return _UNSURE  # a value over several lines
        if (
            (section in ("", "paths") and not _bare(key))
            or (section == "" and "paths" in key)
            or (section == "paths" and key.startswith("home."))
        ):
            return _UNSURE  # a quoted or dotted key that may spell [paths] home
        if section == "paths" and key == "home":
            value = value.strip()
            quote = value[:1]
            end = value.find(quote, 1) if quote in ("'", '"') else -1
            if end < 0 or value[end + 1 :].strip()[:1] not in ("", "#"):
                return _UNSURE
            home = value[1:end]
    return True, home


def _bare(key: str) -> bool:
    """A TOML bare key, dotted or not: letters, digits, `_`, `-` and `.`."""
    return key.isascii() and key.replace("_", "a").replace("-", "a").replace(".", "a").isalnum()


def _idle(job: str, explicit: str | None) -> int | None:
    config, named_by = locations.config_source(explicit)
    config_version = stat_fingerprint(config)
    if named_by and config_version is None:
        return None  # a named config file is missing: the job stops and says so (exit 78)
    home_env = os.environ.get(locations.HOME_ENV)
    home = locations.home(configured=None if locations.named_home() else _configured_home(config))
    if not stat.S_ISDIR(os.lstat(home).st_mode):
        return None  # no home (or a link where it should be): the job says so (store/paths.py's require_home)
    try:
        summary = unmarshal(_read(summary_path(locations.state_dir(home), job)))
    except (OSError, ValueError):
        return None
    if summary.get("version") != SUMMARY_VERSION or summary.get("home_env") != home_env:
        return None
    if summary.get("config") != [config, config_version]:
        return None
    if not _unchanged(summary.get("watch", [])):
        return None
    now = time.time()
    if now < summary.get("written_at", now + 1):
        return None  # written in what is now the future: the clock went back, and every time in it is suspect
    wake_at = summary.get("wake_at")
    if wake_at is not None and now >= wake_at:
        return None
    return summary.get("exit", 0) if _swept(summary.get("sweep"), now) else None


def _unchanged(watch: list) -> bool:
    for path, kind, value in watch:
        if kind in ("tail", "ledger"):
            if not _same_tail(path, value, grows=kind == "tail"):
                return False
        elif _KINDS[kind](path) != value:
            return False
    return True


def _same_sizes(folder: str, entries: list) -> bool:
    """Each [name, inode, size, mtime] in folder unchanged. Thousands of files: stat
    relative to the folder's descriptor (a one-component lookup) in a tight loop."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        stat = os.stat
        for name, ino, size, mtime in entries:
            st = stat(name, dir_fd=fd)  # a file gone raises: not idle
            if st.st_size != size or st.st_ino != ino or st.st_mtime_ns != mtime:
                return False
    finally:
        os.close(fd)
    return True


def _swept(sweep: list | None, now: float) -> bool:
    """True when the dormant files need no look yet, or were looked at and are unchanged."""
    if sweep is None:
        return True
    path, every, token = sweep
    # systemd 250+ names the unit that started us: a .path unit fires on a write to any log, so a dormant one may have
    # woken. Best effort (systemd coalesces triggers): without it the sweep comes within the interval anyway.
    woken = os.environ.get("TRIGGER_UNIT", "").endswith(".path")
    # a list touched in what is now the future (the clock went back) is swept now
    if not woken and 0 <= now - os.stat(path).st_mtime < every:
        return True
    dormant = unmarshal(_read(path))
    if dormant.get("token") != token:
        return False
    for folder, entries in dormant["dirs"].items():
        if not _same_sizes(folder, entries):
            return False
    try:
        os.utime(path)  # swept: the next sweep is due a full interval from now
    except OSError:
        pass  # a read-only home sweeps on every run: slower, never wrong
    return True
