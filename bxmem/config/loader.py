"""bxmem.toml, validated at the start of every job, then plain objects. No `[honcho]` means local-only. Keys
come only from the files named in `[secrets.*]`: never from the environment, never from another file.
"""

from __future__ import annotations

import errno
import marshal
import os
import stat
import sys
from pathlib import Path

from bxmem.errors import ConfigInvalid, KeyFileInvalid
from bxmem.formats.shapes import dict_of, integer, list_of, maybe, record, string
from bxmem.start import locations
from bxmem.start.idle import stat_fingerprint
from bxmem.start.marshal_seal import seal
from bxmem.store.files import file_kind, load_marshal, write_bytes
from bxmem.store.paths import Paths, check_named, config_source, load_toml, resolve_paths

CACHE_FILE = "config.marshal"
CACHE_VERSION = 5  # a cache another version wrote is a miss: the TOML is validated again
STALE = "written by another version or for another configuration"


class ReadSource:
    __slots__ = ("agent", "workspace", "trust", "trust_class")

    def __init__(self, agent: str, workspace: str, trust: str, trust_class: str) -> None:
        self.agent, self.workspace, self.trust, self.trust_class = agent, workspace, trust, trust_class


class HonchoSettings:
    """The validated [honcho] section: config/schema.py's HonchoSection's fields, held equal to these slots by
    tests/test_config_docs.py."""

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


class ArtifactSettings:
    """The validated [artifacts] section (enabled): its bounds, each at most the seed's default, and the integrity
    mode."""

    __slots__ = ("max_artifact_bytes", "max_total_bytes", "max_cards", "integrity")

    def __init__(self, max_artifact_bytes: int, max_total_bytes: int, max_cards: int, integrity: str) -> None:
        self.max_artifact_bytes, self.max_total_bytes = max_artifact_bytes, max_total_bytes
        self.max_cards, self.integrity = max_cards, integrity


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
    __slots__ = ("role", "name", "secret", "key_file")

    def __init__(self, role: str, name: str, secret: str, key_file: Path | None) -> None:
        self.role = role  # trusted | untrusted | fleet | read:<agent>
        self.name = name
        self.secret = secret  # the [secrets.*] name
        self.key_file = key_file


class Config:
    """The validated configuration. Plain classes here and above: importing
    `dataclasses` would cost every lean run (docs/performance.md, "Start-up")."""

    __slots__ = ("path", "paths", "honcho", "secrets", "send", "artifacts")

    def __init__(
        self,
        path: Path,
        paths: Paths,
        honcho: HonchoSettings | None,
        secrets: dict[str, str],
        send: SendSettings,
        artifacts: ArtifactSettings | None = None,
    ) -> None:
        self.path = path
        self.paths = paths
        self.honcho = honcho
        self.secrets = secrets  # [secrets.<name>] -> its key file, as written
        self.send = send
        self.artifacts = artifacts  # None: artifact memory is off (no [artifacts], or enabled = false)

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

    def keyless_among_keyed(self) -> list[Workspace]:
        """The workspaces without a key when another has one. Every command uses such a workspace without a key:
        Honcho's auth is on or off for the whole server, so either no key is needed or these are refused (401),
        which `config check` and `sync` say."""
        workspaces = self.workspaces()
        if not any(ws.key_file for ws in workspaces):
            return []
        return [ws for ws in workspaces if ws.key_file is None]

    def changed_at(self) -> float | None:
        try:
            return self.path.stat().st_mtime
        except OSError:
            return None

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
    """Read and validate the configuration, or raise ConfigInvalid with one line. `home` overrides BOXMAKER_HOME and
    [paths] home (the demo's). The result is cached beside bxmem's state, keyed by the file's version and the
    environment that shapes the paths, so one-shot commands (recall, ask) skip pydantic when nothing changed."""
    path, named_by = config_source(explicit)
    check_named(path, named_by)  # before the cache: a named file that went away stops the job
    cache_key = _cache_key(path, home)
    known_home = locations.named_home(home)
    looked_in = None
    if known_home:  # the cache can be found without reading the TOML at all
        guess = Paths(Path(locations.home(home)), Path(known_home))
        cached = _read_cache(guess, cache_key)
        if cached is not None:
            return _build(path, Paths(guess.home, Path(cached["run"])), cached)
        looked_in = guess.state
    raw = load_toml(path, named_by)
    paths = resolve_paths(raw, home)
    cached = _read_cache(paths, cache_key) if paths.state != looked_in else None
    if cached is None:
        from bxmem.config.schema import validate  # deferred: lean (pydantic, only when the cache misses)

        cached = {**validate(raw, path), "run": str(paths.run)}
        _write_cache(paths, cache_key, cached)
    return _build(path, paths, cached)


def _cache_key(path: Path, home: object) -> list:
    env = [os.environ.get(name) for name in (locations.HOME_ENV, "XDG_DATA_HOME", "HOME")]
    return [CACHE_VERSION, str(path), stat_fingerprint(path), str(home) if home else None, env]


def _exactly(*fields: str):
    """An object of exactly these string fields: what the cached classes take as keywords."""
    check = record(dict.fromkeys(fields, string))

    def exactly(value: object) -> str | None:
        why = check(value)
        if why is None and len(value) != len(fields):  # type: ignore[arg-type]
            return "a field bxmem does not write"
        return why

    return exactly


def _cache_shape(key: list):
    """The cache this version writes for `key`; a cache of another key is STALE whatever else it holds."""
    honcho = record(
        {**{name: string for name in HonchoSettings.__slots__[:-1]}, "read": list_of(_exactly(*ReadSource.__slots__))}
    )

    def this_key(value: object) -> str | None:
        return "not a list" if type(value) is not list else None if value == key else STALE

    artifacts = record(
        {"max_artifact_bytes": integer(1), "max_total_bytes": integer(1), "max_cards": integer(1), "integrity": string}
    )
    return record(
        {
            "key": this_key,
            "data": record(
                {
                    "honcho": maybe(honcho),
                    "secrets": dict_of(string),
                    "batch": integer(1),
                    "run": string,
                    "artifacts": maybe(artifacts),
                }
            ),
        }
    )


def _read_cache(paths: Paths, key: list) -> dict | None:
    """The cached validation, or None: missing, stale (said nowhere), or of another shape (said once, and validated
    and cached again)."""
    path = paths.state / CACHE_FILE
    cached, why = load_marshal(path, _cache_shape(key))
    if why is not None and why != f"key: {STALE}":
        from bxmem.log import log, runbook  # deferred: lean (recall sets up no logging; said only of a damaged cache)

        log.warning(
            f"{path}: {why}; the configuration is validated again and cached again" + runbook("state-rewritten")
        )
    return None if cached is None else cached["data"]


def _write_cache(paths: Paths, key: list, data: dict) -> None:
    if not paths.state.is_dir():
        return  # created by the first job that needs it; a cache is no reason to
    try:
        write_bytes(paths.state / CACHE_FILE, seal(marshal.dumps({"key": key, "data": data})))
    except Exception:  # a cache that cannot be written is only a slower next start
        pass


def _build(path: Path, paths: Paths, data: dict) -> Config:
    honcho = HonchoSettings(**data["honcho"]) if data["honcho"] else None
    artifacts = ArtifactSettings(**data["artifacts"]) if data["artifacts"] else None
    return Config(
        path=path,
        paths=paths,
        honcho=honcho,
        secrets=dict(data["secrets"]),
        send=SendSettings(data["batch"]),
        artifacts=artifacts,
    )


def key_fingerprint(key_file: Path | None) -> list[int] | None:
    """What identifies a key file's version: a changed file lifts a key refusal."""
    return None if key_file is None else stat_fingerprint(key_file)


# A Honcho key (a JWT) is a few hundred bytes: room for any key, and a file that cannot be one is refused, never cut.
MAX_KEY_BYTES = 8192
PR_SET_DUMPABLE = 4
_dumpable_off = False

_PRINTABLE = bytes(range(0x21, 0x7F))  # what a key may hold: printable ASCII, no space
_LINK = "is a symbolic link; bxmem reads only a regular file as a key, never through a link"


def read_key(ws: Workspace) -> Key | None:
    """The workspace's key from its file, or None when none is configured. The one reader of key files, so every
    command gets the same verdict: KeyFileInvalid, one line naming the file, for any file docs/interfaces.md
    refuses. A key that passes is always a valid header value."""
    if ws.key_file is None:
        return None
    _no_core_dumps()
    return Key(_read_key_file(ws.key_file, ws.secret))


def _no_core_dumps() -> None:
    """PR_SET_DUMPABLE 0 before a key is in memory: no core dump, and no other
    process of the same user may ptrace this one or read its memory. Only a
    run that reads a key pays for importing ctypes (docs/performance.md, "Start-up")."""
    global _dumpable_off
    if _dumpable_off or not sys.platform.startswith("linux"):
        return
    import ctypes  # deferred: lean (only a run that reads a key pays for it)

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no prctl in this libc: the units' LimitCORE=0 still holds
        return
    zero = ctypes.c_ulong(0)
    if prctl(PR_SET_DUMPABLE, zero, zero, zero, zero) == 0:
        _dumpable_off = True


def _read_key_file(path: Path, secret: str) -> str:
    def refused(problem: str, hint: str | None = None) -> KeyFileInvalid:
        return KeyFileInvalid(secret, path, problem, hint)

    try:
        # lstat first: a FIFO (it would block) or a device (opening some has effects) is never opened, nor a link
        # followed.
        seen = os.lstat(path)
    except OSError as exc:
        raise refused(f"cannot be read: {exc.strerror}") from None
    if stat.S_ISLNK(seen.st_mode):
        # Whoever can write the key's folder could point a link at another of the owner's files and have bxmem send it
        # to Honcho as a bearer key.
        raise refused(_LINK, f"name the file itself ({os.path.realpath(path)})")
    if not stat.S_ISREG(seen.st_mode):
        raise refused(f"is {file_kind(seen.st_mode)}, not a regular file")
    try:
        # swapped for a FIFO or a link after the lstat: O_NONBLOCK and O_NOFOLLOW, then fstat says what was opened
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(_LINK) from None
        raise refused(f"cannot be read: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
            raise refused("was replaced while it was read; run again")
        _check_owner_and_mode(st, refused)
        if st.st_size > MAX_KEY_BYTES:
            raise refused(f"is {st.st_size} bytes; a key file holds one key of at most {MAX_KEY_BYTES} bytes")
        data = b""
        while len(data) <= MAX_KEY_BYTES:
            chunk = os.read(fd, MAX_KEY_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_BYTES:  # it grew after the fstat
        raise refused(f"is over {MAX_KEY_BYTES} bytes; a key file holds one key of at most {MAX_KEY_BYTES} bytes")
    return _key_text(data, refused)


def _check_owner_and_mode(st: os.stat_result, refused) -> None:
    if st.st_uid != os.geteuid():
        raise refused(f"is owned by uid {st.st_uid}, not by uid {os.geteuid()} that bxmem runs as (chown it)")
    others = st.st_mode & 0o077
    if others:
        can = [verb for verb, bits in (("read", 0o044), ("write", 0o022), ("run", 0o011)) if others & bits]
        raise refused(
            f"has mode {stat.S_IMODE(st.st_mode):04o}: group or others can {' and '.join(can)} it (chmod 600 it)"
        )


def _key_text(data: bytes, refused) -> str:
    """One line of printable ASCII, a trailing line break allowed; the error names where the first bad byte is and
    its kind, never the key."""
    body = data[:-2] if data.endswith(b"\r\n") else data[:-1] if data.endswith(b"\n") else data
    if not body:
        raise refused("is empty" if not data else "holds no key, only a line break")
    if body.translate(None, _PRINTABLE):
        at = next(i for i, b in enumerate(body) if b not in _PRINTABLE)
        byte = body[at]
        if byte in b"\r\n":
            raise refused(f"holds more than one line (a line break at byte {at}); a key file holds one key on one line")
        what = (
            "a space"
            if byte == 0x20
            else "a tab"
            if byte == 0x09
            else "a byte that is not ASCII"
            if byte > 0x7F
            else f"a control character (0x{byte:02x})"
        )
        raise refused(f"has {what} at byte {at}; a key is one line of printable ASCII")
    return body.decode("ascii")
