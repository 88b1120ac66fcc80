"""The schema of bxmem.toml, checked with pydantic; the rest of bxmem never sees a pydantic object."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bxmem.errors import ConfigInvalid
from bxmem.trust.artifact_rules import MAX_ARTIFACT_BYTES, MAX_CARDS, MAX_TOTAL_BYTES
from bxmem.trust.rules import owner_problem

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")
ID_RULE = "must be 1 to 512 characters of A-Z a-z 0-9 _ -"


def check_id(value: str) -> str:
    if not isinstance(value, str) or not ID_RE.fullmatch(value):
        raise ValueError(ID_RULE)
    return value


def _check_port(url: str) -> None:
    """A port the socket layer would refuse is caught here, naming the field,
    not at the first request of a command that then cannot say what is wrong."""
    netloc = urlsplit(url).netloc
    host_port = netloc.rsplit("]", 1)[-1]  # an IPv6 address holds colons of its own
    if ":" not in host_port:
        return
    raw = host_port.rpartition(":")[2]
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 65535):
        raise ValueError(f"port {raw!r} is out of range: a port is a number from 1 to 65535")


# What recall names its own sources and ask its own workspaces: an agent of that
# name would be taken for one of them (its hits merged with the local index's,
# `ask -w fleet` asking it).
RESERVED_AGENT_NAMES = ("local", "own", "untrusted", "fleet", "artifacts")


def check_url(value: str) -> str:
    """honcho.url's rule (and `demo --honcho`'s): the URL, without a trailing slash."""
    if not re.fullmatch(r"https?://[^\s/?#@]+(/[^\s?#]*)?", value):
        raise ValueError("must be an http:// or https:// URL with no user, query or fragment")
    _check_port(value)
    return value.rstrip("/")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ReadSection(_Strict):
    """Another agent's trusted workspace this agent may read (`[[honcho.read]]`);
    config.ReadSource is what the rest of bxmem sees."""

    agent: str
    workspace: str
    trust: Literal["trusted", "untrusted"] = "untrusted"
    trust_class: Literal["public", "private"] = Field("private", alias="class")

    _ids = field_validator("agent", "workspace")(check_id)


class HonchoSection(_Strict):
    url: str
    agent: str
    owner: str
    trusted: str
    untrusted: str
    fleet: str
    read: list[ReadSection] = []

    _ids = field_validator("agent", "owner", "trusted", "untrusted", "fleet")(check_id)

    @field_validator("owner", mode="before")
    @classmethod
    def _owner(cls, value: object) -> object:
        """An owner no speaker can ever be (trust/rules.owner_problem): said with what to write."""
        why = owner_problem(value) if isinstance(value, str) else None
        if why:
            raise ValueError(why)
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)

    @model_validator(mode="after")
    def _distinct(self) -> HonchoSection:
        own = [self.trusted, self.untrusted, self.fleet]
        if len(set(own)) != 3:
            raise ValueError("trusted, untrusted and fleet must be three different workspaces")
        if self.agent == self.owner:
            raise ValueError("agent and owner must be different peers")
        why = owner_problem(self.owner, self.agent)
        if why:
            raise ValueError(f"owner: {why}")
        seen: set[str] = set()
        for source in self.read:
            if source.agent in seen:
                raise ValueError(f"read: agent {source.agent!r} is listed twice")
            seen.add(source.agent)
            if source.workspace in own:
                raise ValueError(f"read: {source.workspace!r} is one of this agent's own workspaces")
            if source.agent == self.agent:
                raise ValueError("read: an agent cannot read itself")
            if source.agent in RESERVED_AGENT_NAMES:
                raise ValueError(
                    f"read: agent {source.agent!r} is a name recall or ask gives a source of its own "
                    f"({', '.join(RESERVED_AGENT_NAMES)})"
                )
        return self


class SecretFile(_Strict):
    file: str


class SendSection(_Strict):
    batch: int = Field(default=1000, ge=1, le=10_000)  # default= by name: what type checkers read


class ArtifactsSection(_Strict):
    """Artifact memory (seed 002 28.5's bounds): each default is the highest allowed, so
    an owner can only lower them."""

    enabled: bool = True
    max_artifact_bytes: int = Field(default=MAX_ARTIFACT_BYTES, ge=1, le=MAX_ARTIFACT_BYTES)
    max_total_bytes: int = Field(default=MAX_TOTAL_BYTES, ge=1, le=MAX_TOTAL_BYTES)
    max_cards: int = Field(default=MAX_CARDS, ge=1, le=MAX_CARDS)
    integrity: Literal["always", "cached"] = "always"

    @model_validator(mode="after")
    def _one_fits(self) -> ArtifactsSection:
        if self.max_artifact_bytes > self.max_total_bytes:
            raise ValueError("max_artifact_bytes is more than max_total_bytes: no artifact that large could be kept")
        return self


class RawConfig(_Strict):
    paths: dict[str, str] = {}
    honcho: HonchoSection | None = None
    secrets: dict[str, SecretFile] = {}
    send: SendSection = SendSection()
    artifacts: ArtifactsSection | None = None

    @model_validator(mode="after")
    def _secret_names(self) -> RawConfig:
        allowed = {"honcho_trusted", "honcho_untrusted", "honcho_fleet"}
        if self.honcho:
            allowed |= {f"honcho_read_{s.agent}" for s in self.honcho.read}
        for name in self.secrets:
            if name not in allowed:
                raise ValueError(f"secrets: unknown key name {name!r} (expected one of {', '.join(sorted(allowed))})")
        unknown_paths = set(self.paths) - {"home", "run"}
        if unknown_paths:
            raise ValueError(f"paths: unknown key {sorted(unknown_paths)[0]!r}")
        return self


def _describe(error: ValidationError, path: Path) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if p != "__root__")
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "is required"
    return f"{path}: {where + ': ' if where else ''}{message}"


def validate(raw: dict, path: Path) -> dict:
    """Plain data: {"honcho": {...} | None, "secrets": {name: file}, "batch": n, "artifacts": {...} | None}."""
    try:
        parsed = RawConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigInvalid(_describe(exc, path)) from None
    # Field names as config.HonchoSettings and config.ReadSource take them (a test holds them equal).
    honcho = parsed.honcho.model_dump() if parsed.honcho else None
    # An [artifacts] section with enabled = false is as none: artifact memory is off.
    artifacts = parsed.artifacts.model_dump() if parsed.artifacts and parsed.artifacts.enabled else None
    if artifacts is not None:
        del artifacts["enabled"]
    return {
        "honcho": honcho,
        "secrets": {name: ref.file for name, ref in parsed.secrets.items()},
        "batch": parsed.send.batch,
        "artifacts": artifacts,
    }
