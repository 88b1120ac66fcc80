"""Where things live, as Paths; the precedence and defaults are start/locations.py's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from bxmem.errors import ConfigInvalid, HomeMissing, Refused, StorageError
from bxmem.start import locations
from bxmem.start.locations import CONFIG_ENV, HOME_ENV  # noqa: F401  (re-exported: the names tests and docs use)
from bxmem.store.files import Unreadable, make_dirs, read_state


def config_source(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, str | None]:
    path, named_by = locations.config_source(explicit)
    return Path(path), named_by


def check_named(path: Path, named_by: str | None) -> None:
    """A config file someone named must be there and readable: running
    local-only instead would decide every turn nowhere-to-send, for good
    (Honcho is not rebuilt from the logs). Only the default path may be absent."""
    if named_by is None:
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigInvalid(
            f"{path} (named by {named_by}) does not exist; nothing was decided or sent "
            "(only the default config file may be absent)"
        ) from None
    except OSError as exc:
        raise ConfigInvalid(f"{path} (named by {named_by}): cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigInvalid(f"{path} (named by {named_by}) is a directory, not a config file")
    if not os.access(path, os.R_OK):
        raise ConfigInvalid(f"{path} (named by {named_by}): cannot read: Permission denied")


def load_toml(path: Path, named_by: str | None = None) -> dict:
    """The raw configuration; a missing default file is an empty one (local-only)."""
    import tomllib  # deferred: lean (the lean paths read the validated configuration from its cache)

    try:
        data = read_state(path, follow=True)  # never blocks: a FIFO named as the config is refused, not opened for good
    except Unreadable as exc:
        raise ConfigInvalid(f"{path}: {exc}") from None
    if data is None:
        check_named(path, named_by)  # gone since it was checked: the same line
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigInvalid(
            f"{path}: not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} (line {line}); "
            "save the file as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigInvalid(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables by recursion
        raise ConfigInvalid(f"{path}: not valid TOML: arrays or tables nested too deep to read") from None


class Paths:
    __slots__ = ("home", "run")

    def __init__(self, home: Path, run: Path) -> None:
        self.home, self.run = home, run

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def memory(self) -> Path:
        return self.home / "memory"

    @property
    def journal(self) -> Path:
        return self.memory / "journal.jsonl"

    @property
    def ledger(self) -> Path:
        return self.memory / "honcho.jsonl"

    @property
    def artifacts(self) -> Path:
        return self.memory / "artifacts"

    @property
    def sessions(self) -> Path:
        """loopd's per-session folders; `<session>/exports/` holds what a session may keep as artifacts."""
        return self.home / "sessions"

    @property
    def state(self) -> Path:
        return Path(locations.state_dir(self.home))

    @property
    def broker_socket(self) -> Path:
        return self.run / "memory-broker" / "state.sock"

    def require_home(self) -> None:
        """HomeMissing unless the Boxmaker home is a directory itself, not a link (where a link points is not where
        the owner said). A wrong HOME, user or BOXMAKER_HOME must fail loudly: a job would otherwise make a new,
        empty home, and recall and ask answer from it as if nothing had been remembered."""
        why = home_problem(self.home)
        if why is not None:
            raise HomeMissing(
                f"the Boxmaker home {self.home} {why}: run `bxmem init` to make it, or set BOXMAKER_HOME "
                "or [paths] home to the home the timer jobs use (run bxmem as their user, with their "
                "environment); nothing was read or written"
            )

    def ensure_state_dir(self) -> Path:
        try:
            make_dirs(self.memory, 0o777)  # as mkdir -p makes it (the umask applies): memoryd's folder too
            make_dirs(self.state, 0o700)
            if self.state.stat().st_mode & 0o777 != 0o700:
                os.chmod(self.state, 0o700)
        except OSError as exc:
            raise StorageError(f"cannot prepare {self.state}: {exc.strerror}") from None
        return self.state


def make_home(home: Path) -> tuple[list[Path], list[Path]]:
    """The home as the jobs need it (`bxmem init`): the home, logs/, memory/ and bxmem's state, each made 700 where
    missing (parents as mkdir -p makes them), bxmem's state 700 whatever it was. Returns (made, already there);
    Refused when a file is where a folder goes."""
    made, existed = [], []
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot make {home.parent}: {exc.strerror}") from None
    for folder in (home, home / "logs", home / "memory", Path(locations.state_dir(home))):
        try:
            os.mkdir(folder, 0o700)
            made.append(folder)
        except FileExistsError:
            if not folder.is_dir():
                raise Refused(f"{folder} exists and is not a folder: the Boxmaker home needs it to be one") from None
            existed.append(folder)
        except OSError as exc:
            raise StorageError(f"cannot make {folder}: {exc.strerror}") from None
    problem = home_problem(home)
    if problem:  # a link: every job would refuse it
        raise Refused(f"the Boxmaker home {home} {problem}")
    state = Path(locations.state_dir(home))
    if state.stat().st_mode & 0o777 != 0o700:
        os.chmod(state, 0o700)  # the owner's alone, as every job keeps it
    return made, existed


def home_problem(home: Path) -> str | None:
    try:
        st = os.lstat(home)
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be looked at ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link; bxmem uses the home directory itself (name the directory it points to)"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    return None


def resolve_paths(raw: dict, home_override: str | os.PathLike[str] | None = None) -> Paths:
    section = raw.get("paths") or {}
    if not isinstance(section, dict):
        raise ConfigInvalid("[paths] must be a table")
    home_value = None if locations.named_home(home_override) else section.get("home")
    if home_value is not None and not isinstance(home_value, str):
        raise ConfigInvalid(
            "[paths] home must be a string"
        )  # checked only when it is the one used, as the schema checks it anyway
    home = Path(locations.home(home_override, home_value))
    run_value = section.get("run")
    if run_value is not None and not isinstance(run_value, str):
        raise ConfigInvalid("[paths] run must be a string")
    run = Path(run_value).expanduser() if run_value else home / "run"
    return Paths(home=home, run=run)
