"""bxmem.toml: validated once at start of every job.

No `[honcho]` section means local-only. Keys come only from the files named in
`[secrets.*]`: never from the environment, never from another file.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigInvalid
from .paths import Paths, config_path, load_toml, resolve_paths

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")
ID_RULE = "must be 1 to 512 characters of A-Z a-z 0-9 _ -"


def check_id(value: str) -> str:
    if not isinstance(value, str) or not ID_RE.fullmatch(value):
        raise ValueError(ID_RULE)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ReadSource(_Strict):
    """Another agent's trusted workspace this agent may read (`[[honcho.read]]`)."""

    agent: str
    workspace: str
    trust: Literal["trusted", "untrusted"] = "untrusted"
    class_: Literal["public", "private"] = Field("private", alias="class")

    _ids = field_validator("agent", "workspace")(check_id)


class HonchoSection(_Strict):
    url: str
    agent: str
    owner: str
    trusted: str
    untrusted: str
    fleet: str
    read: list[ReadSource] = []

    _ids = field_validator("agent", "owner", "trusted", "untrusted", "fleet")(check_id)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s/?#@]+(/[^\s?#]*)?", value):
            raise ValueError("must be an http:// or https:// URL with no user, query or fragment")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _distinct(self) -> "HonchoSection":
        own = [self.trusted, self.untrusted, self.fleet]
        if len(set(own)) != 3:
            raise ValueError("trusted, untrusted and fleet must be three different workspaces")
        if self.agent == self.owner:
            raise ValueError("agent and owner must be different peers")
        seen: set[str] = set()
        for source in self.read:
            if source.agent in seen:
                raise ValueError(f"read: agent {source.agent!r} is listed twice")
            seen.add(source.agent)
            if source.workspace in own:
                raise ValueError(f"read: {source.workspace!r} is one of this agent's own workspaces")
            if source.agent == self.agent:
                raise ValueError("read: an agent cannot read itself")
        return self


class SecretFile(_Strict):
    file: str


class SendSection(_Strict):
    batch: int = Field(100, ge=1, le=10_000)


class RawConfig(_Strict):
    paths: dict[str, str] = {}
    honcho: HonchoSection | None = None
    secrets: dict[str, SecretFile] = {}
    send: SendSection = SendSection()

    @model_validator(mode="after")
    def _secret_names(self) -> "RawConfig":
        allowed = {"honcho_trusted", "honcho_untrusted", "honcho_fleet"}
        if self.honcho:
            allowed |= {f"honcho_read_{s.agent}" for s in self.honcho.read}
        for name in self.secrets:
            if name not in allowed:
                raise ValueError(
                    f"secrets: unknown key name {name!r} (expected one of {', '.join(sorted(allowed))})"
                )
        unknown_paths = set(self.paths) - {"home", "run"}
        if unknown_paths:
            raise ValueError(f"paths: unknown key {sorted(unknown_paths)[0]!r}")
        return self


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


@dataclass(frozen=True)
class Workspace:
    """One Honcho workspace this agent writes or reads, with its key file."""

    role: str  # trusted | untrusted | fleet | read:<agent>
    name: str
    secret: str  # the [secrets.*] name
    key_file: Path | None


@dataclass(frozen=True)
class Config:
    path: Path
    paths: Paths
    honcho: HonchoSection | None
    secrets: dict[str, SecretFile]
    send: SendSection

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
        key_file = Path(ref.file).expanduser() if ref else None
        if key_file is not None and not key_file.is_absolute():
            key_file = self.path.parent / key_file
        return Workspace(role=role, name=name, secret=secret, key_file=key_file)


def _describe(error: ValidationError, path: Path) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if p != "__root__")
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "is required"
    return f"{path}: {where + ': ' if where else ''}{message}"


def load(explicit: str | os.PathLike[str] | None = None, home: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate the configuration, or raise ConfigInvalid with one line.

    `home` overrides BOXMAKER_HOME and [paths] home (the demo uses its own).
    """
    path = config_path(explicit)
    raw = load_toml(path)
    paths = resolve_paths(raw, home)
    try:
        parsed = RawConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigInvalid(_describe(exc, path)) from None
    return Config(path=path, paths=paths, honcho=parsed.honcho, secrets=parsed.secrets, send=parsed.send)


def key_fingerprint(key_file: Path | None) -> list[int] | None:
    """What identifies a key file's version: a changed file lifts a key refusal."""
    from .fastpath import stat_fingerprint

    return None if key_file is None else stat_fingerprint(key_file)


def read_key(ws: Workspace) -> Key | None:
    """The workspace's key from its file, or None when no key is configured.

    A key file readable by group or others is refused: a key that other users
    can read is no longer a secret.
    """
    if ws.key_file is None:
        return None
    try:
        fd = os.open(ws.key_file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
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
