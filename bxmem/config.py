"""bxmem.toml: validated at the start of every job (the schema is in
config_schema.py), then plain objects for the rest of bxmem.

No `[honcho]` section means local-only. Keys come only from the files named in
`[secrets.*]`: never from the environment, never from another file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from . import where
from .errors import ConfigInvalid
from .paths import Paths, check_named, config_source, load_toml, resolve_paths

CACHE_FILE = "config.marshal"
CACHE_VERSION = 3  # 3: a URL's port is checked (a cached 2 may hold port 99999)


class ReadSource:
    """Another agent's workspace this agent may read (`[[honcho.read]]`)."""

    __slots__ = ("agent", "workspace", "trust", "class_")

    def __init__(self, agent: str, workspace: str, trust: str, class_: str) -> None:
        self.agent, self.workspace, self.trust, self.class_ = agent, workspace, trust, class_


class HonchoSettings:
    """The validated [honcho] section: config_schema.HonchoSection's fields
    (model_dump'd), held equal to these slots by tests/test_config_docs.py."""

    __slots__ = ("url", "agent", "owner", "trusted", "untrusted", "fleet", "read")
    url: str
    agent: str
    owner: str
    trusted: str
    untrusted: str
    fleet: str

    def __init__(self, read: list, **fields: str) -> None:
        for name in self.__slots__[:-1]:
            setattr(self, name, fields[name])
        self.read = [ReadSource(**r) for r in read]


class SendSettings:
    __slots__ = ("batch",)

    def __init__(self, batch: int) -> None:
        self.batch = batch


class Key:
    """An API key. Its repr and str never show it, so it cannot leak into a log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def bearer(self) -> str:
        return f"Bearer {self._value}"

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Key(****)"

    __str__ = __repr__


class Workspace:
    """One Honcho workspace this agent writes or reads, with its key file."""

    __slots__ = ("role", "name", "secret", "key_file")

    def __init__(self, role: str, name: str, secret: str, key_file: Path | None) -> None:
        self.role = role  # trusted | untrusted | fleet | read:<agent>
        self.name = name
        self.secret = secret  # the [secrets.*] name
        self.key_file = key_file


class Config:
    """The validated configuration. Plain classes here and above: the lean
    paths cannot afford `dataclasses` (7 ms to import)."""

    __slots__ = ("path", "paths", "honcho", "secrets", "send")

    def __init__(self, path: Path, paths: Paths, honcho: HonchoSettings | None, secrets: dict[str, str], send: SendSettings) -> None:
        self.path = path
        self.paths = paths
        self.honcho = honcho
        self.secrets = secrets  # [secrets.<name>] -> its key file, as written
        self.send = send

    @property
    def local_only(self) -> bool:
        return self.honcho is None

    def workspaces(self) -> list[Workspace]:
        if not self.honcho:
            return []
        h = self.honcho
        out = [
            self._workspace("trusted", h.trusted, "honcho_trusted"),
            self._workspace("untrusted", h.untrusted, "honcho_untrusted"),
            self._workspace("fleet", h.fleet, "honcho_fleet"),
        ]
        out += [self._workspace(f"read:{s.agent}", s.workspace, f"honcho_read_{s.agent}") for s in h.read]
        return out

    def workspace(self, role: str) -> Workspace:
        for ws in self.workspaces():
            if ws.role == role:
                return ws
        raise ConfigInvalid(f"no workspace for {role!r}: [honcho] is not configured")

    def workspace_by_name(self, name: str) -> Workspace | None:
        for ws in self.workspaces():
            if ws.name == name:
                return ws
        return None

    def _workspace(self, role: str, name: str, secret: str) -> Workspace:
        ref = self.secrets.get(secret)
        key_file = Path(ref).expanduser() if ref else None
        if key_file is not None and not key_file.is_absolute():
            key_file = self.path.parent / key_file
        return Workspace(role=role, name=name, secret=secret, key_file=key_file)


def load(explicit: str | os.PathLike[str] | None = None, home: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate the configuration, or raise ConfigInvalid with one line.

    `home` overrides BOXMAKER_HOME and [paths] home (the demo uses its own).
    The validated result is cached beside bxmem's state, keyed by the config
    file's version and the environment that shapes the paths, so one-shot
    commands (recall, ask) skip pydantic when nothing changed.
    """
    path, named_by = config_source(explicit)
    check_named(path, named_by)  # before the cache: a named file that went away stops the job
    cache_key = _cache_key(path, home)
    known_home = where.named_home(home)
    if known_home:  # the cache can be found without reading the TOML at all
        guess = Paths(Path(where.home(home)), Path(known_home))
        cached = _read_cache(guess, cache_key)
        if cached is not None:
            return _build(path, Paths(guess.home, Path(cached["run"])), cached)
    raw = load_toml(path, named_by)
    paths = resolve_paths(raw, home)
    cached = _read_cache(paths, cache_key)
    if cached is None:
        from .config_schema import validate

        cached = {**validate(raw, path), "run": str(paths.run)}
        _write_cache(paths, cache_key, cached)
    return _build(path, paths, cached)


def _cache_key(path: Path, home: object) -> list:
    from .fastpath import stat_fingerprint

    env = [os.environ.get(name) for name in (where.HOME_ENV, "XDG_DATA_HOME", "HOME")]
    return [CACHE_VERSION, str(path), stat_fingerprint(path), str(home) if home else None, env]


def _read_cache(paths: Paths, key: list) -> dict | None:
    import marshal

    try:
        with open(paths.state / CACHE_FILE, "rb") as f:
            cached = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(cached, dict) or cached.get("key") != key:
        return None
    data = cached.get("data")
    # Anything not of the shape this version writes is a miss, never an error.
    if not isinstance(data, dict) or not {"honcho", "secrets", "batch", "run"} <= set(data):
        return None
    return data


def _write_cache(paths: Paths, key: list, data: dict) -> None:
    import marshal

    from .store import write_bytes

    if not paths.state.is_dir():
        return  # created by the first job that needs it; a cache is no reason to
    try:
        write_bytes(paths.state / CACHE_FILE, marshal.dumps({"key": key, "data": data}))
    except Exception:  # a cache that cannot be written is only a slower next start
        pass


def _build(path: Path, paths: Paths, data: dict) -> Config:
    honcho = HonchoSettings(**data["honcho"]) if data["honcho"] else None
    return Config(path=path, paths=paths, honcho=honcho, secrets=dict(data["secrets"]), send=SendSettings(data["batch"]))


def key_fingerprint(key_file: Path | None) -> list[int] | None:
    """What identifies a key file's version: a changed file lifts a key refusal."""
    from .fastpath import stat_fingerprint

    return None if key_file is None else stat_fingerprint(key_file)


def read_key(ws: Workspace) -> Key | None:
    """The workspace's key from its file, or None when no key is configured.

    A key file readable by group or others is refused: a key that other users
    can read is no longer a secret. So is a symbolic link (see below).
    """
    if ws.key_file is None:
        return None
    try:
        # O_NOFOLLOW: a symbolic link is refused, not followed. Whoever can write
        # the key's folder could point a link at another of the owner's files
        # (another token, mode 600, one line) and have bxmem send it to Honcho
        # as a bearer key; a regular file they cannot read they cannot copy.
        fd = os.open(ws.key_file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(ws.key_file):
            raise ConfigInvalid(
                f"secrets.{ws.secret}: key file {ws.key_file} is a symbolic link; bxmem reads only a regular "
                f"file as a key, never through a link: name the file itself ({os.path.realpath(ws.key_file)})"
            ) from None
        raise ConfigInvalid(f"secrets.{ws.secret}: cannot read key file {ws.key_file}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigInvalid(f"secrets.{ws.secret}: key file {ws.key_file} is not a regular file")
        if st.st_mode & 0o077:
            raise ConfigInvalid(
                f"secrets.{ws.secret}: key file {ws.key_file} is readable by group or others (chmod 600 it)"
            )
        data = os.read(fd, 65536)
    finally:
        os.close(fd)
    try:
        value = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ConfigInvalid(f"secrets.{ws.secret}: key file {ws.key_file} is not ASCII text") from None
    if not value or any(c.isspace() for c in value):
        raise ConfigInvalid(f"secrets.{ws.secret}: key file {ws.key_file} must hold one key on one line")
    return Key(value)
