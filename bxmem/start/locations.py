"""Which config file, home and state directory, and where the shipped data folders are: platformdirs' XDG
rules worked out here, because importing platformdirs costs more than the idle check (a test holds the two).
"""

from __future__ import annotations

import os

CONFIG_ENV = "BXMEM_CONFIG"
HOME_ENV = "BOXMAKER_HOME"
STATE_PARTS = ("memory", "bxmem")  # bxmem's private state, under the home


def _xdg(variable: str, fallback: str) -> str:
    value = os.environ.get(variable, "").strip()
    return value if value else os.path.expanduser(fallback)


def default_config_path() -> str:
    return os.path.join(_xdg("XDG_CONFIG_HOME", "~/.config"), "boxmaker", "bxmem.toml")


def default_home() -> str:
    return os.path.join(_xdg("XDG_DATA_HOME", "~/.local/share"), "boxmaker")


def config_source(explicit=None) -> tuple[str, str | None]:
    """`--config PATH`, else `$BXMEM_CONFIG`, else the platform's config dir; and
    who named it: "--config", "$BXMEM_CONFIG", or None for the default path
    (the only one that may be absent)."""
    if explicit:
        return os.fspath(explicit), "--config"
    env = os.environ.get(CONFIG_ENV)
    if env:
        return env, f"${CONFIG_ENV}"
    return default_config_path(), None


def named_home(override=None) -> str | None:
    """The home when it is named before the config file is read: an override
    (the demo's), else `$BOXMAKER_HOME`."""
    return os.fspath(override) if override else (os.environ.get(HOME_ENV) or None)


def home(override=None, configured=None) -> str:
    """The precedence, written once: override, `$BOXMAKER_HOME`, the config's
    `[paths] home`, the platform's data dir. `~` is expanded in each."""
    chosen = named_home(override) or configured
    return os.path.expanduser(chosen) if chosen else default_home()


def state_dir(home_dir: str | os.PathLike[str]) -> str:
    return os.path.join(home_dir, *STATE_PARTS)


def shipped(folder: str) -> str:
    """A data folder bxmem ships (`runbook`, `systemd`): the package's copy when there is one (a wheel carries it:
    scripts/build_shipped.py), else the checkout's own."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    inside = os.path.join(package, folder)
    return inside if os.path.isdir(inside) else os.path.join(os.path.dirname(package), folder)
