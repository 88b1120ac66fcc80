"""Who owns and who may change what bxmem reads and writes, for `bxmem doctor`: someone else who can write
them decides where text goes. Looked at with lstat (stat for the config file, which may be a link), never opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from bxmem.store.files import file_kind
from bxmem.store.paths import Paths


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):o}"


def _look(path: Path, follow: bool = False) -> os.stat_result | str | None:
    """The path's stat, None when there is nothing there, or why it cannot be looked at."""
    try:
        return os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: cannot be looked at: {exc.strerror}"


def _owned(path: Path, st: os.stat_result, root_too: bool = False) -> list[str]:
    """Problems with who may change it: another user's, or writable by group or others."""
    problems = []
    if st.st_uid != os.getuid() and not (root_too and st.st_uid == 0):
        problems.append(f"{path} belongs to uid {st.st_uid}, not to this user ({os.getuid()})")
    if st.st_mode & 0o022:
        problems.append(f"{path} has mode {_mode(st)}: group or others can change it (chmod go-w)")
    return problems


def config_file(path: Path) -> tuple[str | None, list[str]]:
    """(what was found, its problems); None for no file there, which is the default
    one (local-only): a named file that is missing stops every command before doctor."""
    st = _look(path, follow=True)
    if st is None:
        return None, []
    if isinstance(st, str):
        return "cannot be looked at", [st]
    if not stat.S_ISREG(st.st_mode):
        return file_kind(st.st_mode), [f"{path} is {file_kind(st.st_mode)}, not a regular file"]
    link = " (through a link)" if path.is_symlink() else ""
    return f"a regular file{link}, uid {st.st_uid}, mode {_mode(st)}", _owned(path, st, root_too=True)


def home(paths: Paths) -> tuple[list[str], list[str]]:
    """(what was found, its problems) for the home, memory/, memory/bxmem/, the ledger
    and the logs folder, in that order."""
    facts: list[str] = []
    problems: list[str] = []
    st = _look(paths.home)
    if st is None or isinstance(st, str):
        return [], [
            st
            or f"{paths.home} does not exist: is bxmem run as the user Boxmaker runs as, with its "
            "BOXMAKER_HOME, or is [paths] home wrong?"
        ]
    if not stat.S_ISDIR(st.st_mode):
        return [], [f"{paths.home} is {file_kind(st.st_mode)}, not a folder"]
    facts.append(f"home mode {_mode(st)}")
    problems += _owned(paths.home, st)
    for folder, name, mode in ((paths.memory, "memory/", None), (paths.state, "memory/bxmem/", 0o700)):
        st = _look(folder)
        if st is None:
            facts.append(f"{name} not made yet (the first job run makes it)")
            break
        if isinstance(st, str):
            problems.append(st)
            break
        if not stat.S_ISDIR(st.st_mode):
            problems.append(f"{folder} is {file_kind(st.st_mode)}, not a folder")
            break
        facts.append(f"{name} mode {_mode(st)}")
        problems += _owned(folder, st)
        if mode is not None and stat.S_IMODE(st.st_mode) != mode:
            problems.append(f"{folder} has mode {_mode(st)}, not {mode:o} (the next job run sets it)")
    st = _look(paths.ledger)
    if st is None:
        facts.append("no ledger yet")
    elif isinstance(st, str):
        problems.append(st)
    elif not stat.S_ISREG(st.st_mode):
        problems.append(f"{paths.ledger} is {file_kind(st.st_mode)}, not a regular file: every job refuses it")
    else:
        facts.append(f"ledger mode {_mode(st)}")
        problems += _owned(paths.ledger, st)
    st = _look(paths.logs, follow=True)
    if st is None:
        facts.append("no logs folder yet (loopd makes it)")
    elif isinstance(st, str):
        problems.append(st)
    elif not stat.S_ISDIR(st.st_mode):
        problems.append(f"{paths.logs} is {file_kind(st.st_mode)}, not a folder")
    elif not os.access(paths.logs, os.R_OK | os.X_OK):
        problems.append(f"{paths.logs} cannot be read by this user: decide cannot read loopd's logs")
    else:
        facts.append("logs readable")
    return facts, problems
