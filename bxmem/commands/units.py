"""`bxmem units`: the systemd units from bxmem's templates, installed, enabled, and removed by the manifest."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.errors import BxmemError, Refused, UsageError
from bxmem.start import locations
from bxmem.start.lean_argv import JOBS
from bxmem.start.version import __version__
from bxmem.store import unit_files
from bxmem.store.paths import check_named, config_source, load_toml, resolve_paths

# What the templates say, and what each is replaced with.
TEMPLATE_BXMEM = "%h/.local/bin/bxmem"
TEMPLATE_HOME = "%h/.local/share/boxmaker"
SYSTEM_DIR = Path("/etc/systemd/system")
SYSTEM_MANIFEST = Path("/var/lib/bxmem/units.json")
MANIFEST_VERSION = 1
# What a path may hold to be written into a unit as it is: no blank, quote, backslash,
# `%` (a specifier) or control character.
_PLAIN_PATH = re.compile(r"^/[^\s\"'\\%;]*$")


@dataclass
class Target:
    """Whose units, where: the scope, the user the jobs run as, and the unit folder."""

    scope: str  # "user" or "system"
    user: str
    user_home: Path
    unit_dir: Path
    manifest: Path

    @property
    def systemctl(self) -> list[str]:
        return ["systemctl", "--user"] if self.scope == "user" else ["systemctl"]


@dataclass
class Resolved:
    """What the generated units name: the bxmem to run, the configuration and the home,
    and what the units must be told in `Environment=` to find the same ones."""

    command: list[str]
    config: Path
    home: Path
    run: Path
    environment: dict[str, str] = field(default_factory=dict)


def target(scope: str, writing: bool = True) -> Target:
    """The user the jobs run as: this user for --user; for --system, the user who ran
    sudo (the units say `User=`), never root by default. Printing the system units
    needs no sudo: they are then this user's."""
    if scope == "user":
        entry = pwd.getpwuid(os.getuid())
        home = Path(os.environ.get("HOME") or entry.pw_dir)
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        state_home = Path(os.environ.get("XDG_STATE_HOME") or home / ".local" / "state")
        return Target(
            "user", entry.pw_name, home, config_home / "systemd" / "user", state_home / "bxmem" / "units.json"
        )
    name = os.environ.get("SUDO_USER") if os.geteuid() == 0 else None
    if os.geteuid() != 0 and not writing:
        entry = pwd.getpwuid(os.getuid())
        return Target("system", entry.pw_name, Path(entry.pw_dir), SYSTEM_DIR, SYSTEM_MANIFEST)
    if not name or name == "root":
        raise Refused(
            "units --system writes /etc/systemd/system and runs the jobs as the user who asks: run it with "
            'sudo from the account the jobs run as (sudo "$(command -v bxmem)" units install --system)'
        )
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise Refused(f"units --system: no user {name!r} (from $SUDO_USER)") from None
    return Target("system", entry.pw_name, Path(entry.pw_dir), SYSTEM_DIR, SYSTEM_MANIFEST)


def resolve(where_to: Target, explicit_config: str | os.PathLike[str] | None) -> Resolved:
    """The configuration and home as this command finds them, and the `Environment=` lines the units need to find the
    same ones: a unit starts with a bare environment (nothing of the owner's shell). Read only: under sudo a write
    would leave root's files in the home."""
    # Under sudo, HOME and XDG_* are root's: as the user, keeping what was passed on purpose.
    under_sudo = where_to.scope == "system" and os.geteuid() == 0
    with _as_user(where_to, drop=("XDG_CONFIG_HOME", "XDG_DATA_HOME") if under_sudo else (), set_home=under_sudo):
        config, named_by = config_source(explicit_config)
        paths = resolve_paths(_checked(config, named_by))
    config, home = Path(os.path.abspath(config)), Path(os.path.abspath(paths.home))  # a unit's cwd is not this one's
    environment = {}
    with _as_user(
        where_to, drop=(locations.CONFIG_ENV, locations.HOME_ENV, "XDG_CONFIG_HOME", "XDG_DATA_HOME"), set_home=True
    ):
        if config != Path(locations.default_config_path()):
            environment[locations.CONFIG_ENV] = str(config)
        if (
            Path(os.path.abspath(resolve_paths(load_toml(config)).home)) != home
        ):  # what the unit would find in the same file
            environment[locations.HOME_ENV] = str(home)
    resolved = Resolved(_bxmem_command(), config, home, paths.run, environment)
    for name, path in (
        ("the Boxmaker home", resolved.home),
        ("the configuration", resolved.config),
        ("bxmem", Path(resolved.command[0])),
    ):
        if not _PLAIN_PATH.fullmatch(str(path)):
            raise Refused(
                f"units: {name} {path} cannot be written into a unit as it is (a blank, quote, backslash, "
                "`%` or `;` in it): name it with a plain absolute path"
            )
    return resolved


@contextlib.contextmanager
def _as_user(where_to: Target, drop: tuple[str, ...], set_home: bool):
    """This process's environment as the units' user has it, for the time of the block:
    without the variables `drop` names, HOME the user's (`set_home`)."""
    saved = dict(os.environ)
    try:
        for name in drop:
            os.environ.pop(name, None)
        if set_home:
            os.environ["HOME"] = str(where_to.user_home)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _checked(config: Path, named_by: str | None) -> dict:
    """The raw configuration, validated as every job validates it (without writing its cache)."""
    from bxmem.config.schema import validate  # deferred: command

    check_named(config, named_by)
    raw = load_toml(config, named_by)
    validate(raw, config)
    return raw


def _bxmem_command() -> list[str]:
    """The bxmem this command is: its console script as started (not resolved: the link
    pipx keeps in ~/.local/bin stays right across upgrades), else this interpreter's `-m bxmem`."""
    script = sys.argv[0] if sys.argv else ""
    if os.path.basename(script) == "bxmem":
        found = script if os.sep in script else shutil.which(script)
        if found and os.access(found, os.X_OK):
            return [os.path.abspath(found)]
    return [sys.executable, "-m", "bxmem"]


def templates() -> dict[str, str]:
    folder = Path(locations.shipped("systemd"))
    found = unit_files.templates(folder)
    if not found:
        raise BxmemError(f"no unit templates in {folder}: this bxmem was installed without them")
    return found


def generate(where_to: Target, resolved: Resolved) -> dict[str, str]:
    command = " ".join(shlex.quote(word) for word in resolved.command)
    units = {}
    for name, text in templates().items():
        lines = []
        for line in text.splitlines():
            if not line.startswith("#"):
                line = line.replace(TEMPLATE_BXMEM, command).replace(TEMPLATE_HOME, str(resolved.home))
                if "%h" in line:
                    raise BxmemError(f"the unit template {name} names %h where bxmem does not know what to put: {line}")
            lines.append(line)
            if line == "[Service]":
                if where_to.scope == "system":
                    lines.append(f"User={where_to.user}")
                lines += [f"Environment={key}={value}" for key, value in resolved.environment.items()]
        header = (
            f"# Generated by `bxmem units install --{where_to.scope}` (bxmem {__version__}) from the template "
            f"{name}, for the Boxmaker home {resolved.home} and the configuration {resolved.config}.\n"
            "# `bxmem units install` writes it again; `bxmem units uninstall` removes it.\n"
        )
        units[name] = header + "\n".join(lines) + "\n"
    return units


def to_enable(units: dict[str, str], optional: bool = False) -> list[str]:
    """The timers and .path units to enable (each starts its service): the timer jobs', and with `optional` the
    others' (bxmem metrics, of no use on a host without node_exporter)."""
    return [
        name
        for name in units
        if name.endswith((".timer", ".path")) and (optional or name.split(".")[0].removeprefix("bxmem-") in JOBS)
    ]


@dataclass
class Installed:
    written: list[Path]
    replaced: list[Path]
    removed: list[Path]
    enabled: list[str]
    manifest: Path
    environment: dict[str, str]
    left: list[str] = field(default_factory=list)  # written, not enabled (optional)

    def lines(self) -> list[str]:
        out = [
            f"wrote {path}" + (" (replacing the one there)" if path in self.replaced else "") for path in self.written
        ]
        out += [f"removed {path} (an earlier install's, no template now)" for path in self.removed]
        out += [f"the units find the configuration and home through {k}={v}" for k, v in self.environment.items()]
        if self.enabled:
            out.append(f"enabled and started: {' '.join(self.enabled)}")
        if self.left:
            out.append(
                f"written, not enabled (optional; units install --optional enables them too): {' '.join(self.left)}"
            )
        out.append(f"bxmem units uninstall removes exactly these (the list: {self.manifest})")
        return out


def install(where_to: Target, resolved: Resolved, optional: bool = False) -> Installed:
    """Write the units (each whole), record them, reload the manager and enable the timers and .path units."""
    if not resolved.home.is_dir():
        raise Refused(
            f"the Boxmaker home {resolved.home} does not exist: bxmem init makes it (the units' "
            "ReadWritePaths= needs it)"
        )
    units = generate(where_to, resolved)
    previous = read_manifest(where_to)
    written, replaced = [], []
    for name, text in units.items():
        path = where_to.unit_dir / name
        if unit_files.write(path, text.encode()):
            replaced.append(path)
        written.append(path)
    stale = [Path(entry["path"]) for entry in previous.get("files", []) if Path(entry["path"]).name not in units]
    removed = [path for path in stale if unit_files.remove(path)]
    enabled = to_enable(units, optional)
    left = [name for name in to_enable(units, True) if name not in enabled]
    unit_files.write_manifest(
        where_to.manifest,
        {
            "version": MANIFEST_VERSION,
            "scope": where_to.scope,
            "user": where_to.user,
            "files": [{"path": str(p), "sha256": _digest(units[p.name].encode())} for p in written],
            "enabled": enabled,
        },
    )
    _systemctl(where_to, "daemon-reload")
    if enabled:
        _systemctl(where_to, "enable", "--now", *enabled)
    return Installed(written, replaced, removed, enabled, where_to.manifest, resolved.environment, left)


@dataclass
class Uninstalled:
    removed: list[Path]
    disabled: list[str]
    changed: list[Path]
    missing: list[Path]

    def lines(self) -> list[str]:
        if not self.removed and not self.disabled and not self.missing:
            return ["no units installed by bxmem units install: nothing to remove"]
        out = [f"disabled and stopped: {' '.join(self.disabled)}"] if self.disabled else []
        out += [
            f"removed {path}" + (" (changed since it was installed)" if path in self.changed else "")
            for path in self.removed
        ]
        out += [f"already gone: {path}" for path in self.missing]
        return out


def uninstall(where_to: Target) -> Uninstalled:
    """Disable what install enabled and remove exactly the files it wrote (by its manifest)."""
    manifest = read_manifest(where_to)
    if not manifest:
        return Uninstalled([], [], [], [])
    enabled = list(manifest.get("enabled", []))
    if enabled:
        _systemctl(where_to, "disable", "--now", *enabled)
    removed, changed, missing = [], [], []
    for entry in manifest.get("files", []):
        path = Path(entry["path"])
        data = unit_files.read(path)
        if data is None:
            missing.append(path)
            continue
        if _digest(data) != entry.get("sha256"):
            changed.append(path)
        if unit_files.remove(path):
            removed.append(path)
    _systemctl(where_to, "daemon-reload")
    if enabled:
        subprocess.run(
            [*where_to.systemctl, "reset-failed", *(n.rsplit(".", 1)[0] + ".service" for n in enabled)],
            capture_output=True,
            check=False,
        )
    unit_files.remove(where_to.manifest)
    return Uninstalled(removed, enabled, changed, missing)


def read_manifest(where_to: Target) -> dict:
    """What an earlier install wrote and enabled ({} when nothing), checked to name only
    what install writes: a bxmem unit file in the unit folder, never anything else."""
    manifest = unit_files.read_manifest(where_to.manifest)
    if manifest is None:
        return {}
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(manifest, dict)
        or manifest.get("version") != MANIFEST_VERSION
        or not isinstance(files, list)
        or not all(isinstance(e, dict) and isinstance(e.get("path"), str) for e in files)
        or not all(isinstance(name, str) for name in manifest.get("enabled", []))
    ):
        raise BxmemError(f"{where_to.manifest}: not a list of installed units this bxmem wrote")
    for entry in files:
        path = Path(entry["path"])
        if path.parent != where_to.unit_dir or not path.name.startswith("bxmem-"):
            raise BxmemError(f"{where_to.manifest}: names {path}, which bxmem units install never writes")
    return manifest


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _systemctl(where_to: Target, *args: str) -> None:
    try:
        done = subprocess.run([*where_to.systemctl, *args], capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise BxmemError(
            "systemctl is not installed: the units are written; start them with your init system"
        ) from None
    except subprocess.TimeoutExpired:
        raise BxmemError(f"{' '.join([*where_to.systemctl, *args])} did not finish in 120 s") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split()) or f"exit status {done.returncode}"
        hint = (
            " (no user manager: log in, or `sudo loginctl enable-linger $USER`, or use --system)"
            if where_to.scope == "user" and "bus" in said.lower()
            else ""
        )
        raise BxmemError(f"{' '.join([*where_to.systemctl, *args])}: {said}{hint}")


def scope_of(user: bool, system: bool) -> str:
    if user and system:
        raise UsageError("units: --user or --system, not both")
    return "system" if system else "user"
