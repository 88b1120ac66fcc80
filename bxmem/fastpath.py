"""The idle fast path: answer "nothing to do" before importing anything heavy.

Each timer job ends its run by writing a small summary of what it has seen:
the files it watches with the size or version it processed, the config
file's version, and when it next has to wake (a backoff, waiting turns).
The next run compares a few `stat` calls against it. Only if something
differs does the real job (typer, httpx, pydantic) get imported.

The comparison errs towards running the job: any doubt means "not idle".
Stdlib only, and the few modules it needs are small.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

JOBS = ("decide", "send", "mirror")


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


fingerprint = stat_fingerprint
_KINDS = {"stat": stat_fingerprint, "size": size_fingerprint}


def write_summary(state_dir: Path, job: str, config, watch: dict[str, tuple[str, object]], wake_at: float | None) -> None:
    from .store import write_json

    write_json(
        state_dir / f"idle-{job}.json",
        {
            "config": [str(config.path), stat_fingerprint(config.path)],
            "home_env": os.environ.get("BOXMAKER_HOME"),
            "watch": [[path, kind, value] for path, (kind, value) in watch.items()],
            "wake_at": wake_at,
        },
    )


def _parse_args(args: list[str]) -> str | None | bool:
    """The --config value, None without one, or False for any other argument."""
    explicit = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--config" and i + 1 < len(args):
            explicit = args[i + 1]
            i += 2
            continue
        if arg.startswith("--config="):
            explicit = arg.split("=", 1)[1]
        elif arg not in ("-q", "--quiet"):
            return False
        i += 1
    return explicit


def is_idle(argv: list[str]) -> bool:
    """True when argv is a timer job with nothing to do since its last run."""
    if len(argv) < 2:
        return False
    # Options before the command (bxmem --config X send) are parsed the same way.
    words = argv[1:]
    job = next((w for w in words if w in JOBS), None)
    if job is None:
        return False
    rest = [w for w in words if w != job]
    explicit = _parse_args(rest)
    if explicit is False:
        return False
    try:
        return _idle(job, explicit)
    except Exception:  # any doubt: let the real job run and report properly
        return False


def _idle(job: str, explicit: str | None) -> bool:
    from .paths import config_path, load_toml, resolve_paths

    cfg = config_path(explicit)
    home_env = os.environ.get("BOXMAKER_HOME")
    if home_env:
        state_dir = Path(home_env) / "memory" / "bxmem"
    else:
        state_dir = resolve_paths(load_toml(cfg)).state
    try:
        with open(state_dir / f"idle-{job}.json", "rb") as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return False
    if summary.get("home_env") != home_env:
        return False
    if summary.get("config") != [str(cfg), stat_fingerprint(cfg)]:
        return False
    for path, kind, value in summary.get("watch", []):
        if _KINDS[kind](path) != value:
            return False
    wake_at = summary.get("wake_at")
    return wake_at is None or time.time() < wake_at
