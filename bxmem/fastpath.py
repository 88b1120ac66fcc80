"""The idle fast path: answer "nothing to do" before importing anything heavy.

Each timer job ends its run by writing a small summary of what it has seen:
the files it watches with the size or version it processed, the config
file's version, and when it next has to wake (a backoff, waiting turns).
The next run compares a few `stat` calls against it. Only if something
differs does the real job (typer, httpx, pydantic) get imported.

The comparison errs towards running the job: any doubt means "not idle".
Only builtin modules are imported here (os, marshal, time): even `json`,
`pathlib`, `dataclasses` and `enum` cost more than the whole check. The
summary is marshal data for the same reason. The default paths are worked
out here as platformdirs does on Linux; tests hold the two together.
"""

from __future__ import annotations

import marshal
import os
import time

JOBS = ("decide", "send", "mirror")
SUMMARY_VERSION = 1


def stat_fingerprint(path: str | os.PathLike[str]) -> list[int] | None:
    """A file's version: a rewrite, an edit or a chmod all change it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode]


def size_fingerprint(path: str | os.PathLike[str]) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size]


_KINDS = {"stat": stat_fingerprint, "size": size_fingerprint}


def _xdg(variable: str, fallback: str) -> str:
    value = os.environ.get(variable, "").strip()
    return value if value else os.path.expanduser(fallback)


def default_config_path() -> str:
    return os.path.join(_xdg("XDG_CONFIG_HOME", "~/.config"), "boxmaker", "bxmem.toml")


def default_home() -> str:
    return os.path.join(_xdg("XDG_DATA_HOME", "~/.local/share"), "boxmaker")


def summary_path(state_dir: str | os.PathLike[str], job: str) -> str:
    return os.path.join(state_dir, f"idle-{job}.marshal")


def write_summary(state_dir, job: str, config, watch: dict[str, tuple[str, object]], wake_at: float | None) -> None:
    """Written by the slow path at the end of a run (atomically, like all state)."""
    from .store import write_bytes

    data = {
        "version": SUMMARY_VERSION,
        "config": [str(config.path), stat_fingerprint(config.path)],
        "home_env": os.environ.get("BOXMAKER_HOME"),
        "watch": [[path, kind, value] for path, (kind, value) in watch.items()],
        "wake_at": wake_at,
    }
    write_bytes(summary_path(state_dir, job), marshal.dumps(data))


def is_idle(argv: list[str]) -> bool:
    """True when argv is a timer job with nothing to do since its last run."""
    from .lean import command_at, parse

    words = argv[1:]
    at = command_at(words)
    if at is None or words[at] not in JOBS:
        return False
    options = parse(words[:at] + words[at + 1 :], flags=("-q", "--quiet"))
    if options is None:
        return False  # --json, -v, --help...: the job runs and reports
    explicit = options.get("--config")
    try:
        return _idle(words[at], explicit)
    except Exception:  # any doubt: let the real job run and report properly
        return False


def _home_from_config(path: str) -> str:
    import tomllib  # only when BOXMAKER_HOME is not set

    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raw = {}
    home = (raw.get("paths") or {}).get("home")
    return os.path.expanduser(home) if home else default_home()


def _idle(job: str, explicit: str | None) -> bool:
    config = explicit or os.environ.get("BXMEM_CONFIG") or default_config_path()
    home_env = os.environ.get("BOXMAKER_HOME")
    home = home_env or _home_from_config(config)
    try:
        with open(summary_path(os.path.join(home, "memory", "bxmem"), job), "rb") as f:
            summary = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return False
    if summary.get("version") != SUMMARY_VERSION or summary.get("home_env") != home_env:
        return False
    if summary.get("config") != [config, stat_fingerprint(config)]:
        return False
    for path, kind, value in summary.get("watch", []):
        if _KINDS[kind](path) != value:
            return False
    wake_at = summary.get("wake_at")
    return wake_at is None or time.time() < wake_at
