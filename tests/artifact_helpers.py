"""What the artifact tests share: a session with a log and an exports folder, and a record."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import bxmem_inprocess, write_log

from bxmem.demo.sample import turn_lines

ARTIFACTS = "\n[artifacts]\n"
UNTRUSTED = {"untrusted": True, "class": "public"}


def session(home: Path, name: str = "s1", *, untrusted: bool = False, lines: list[dict] | None = None) -> Path:
    """A running session: its log (a turn done, the next one open), and its exports/ folder, mode 0700."""
    done = turn_lines(1, "compute the cohort table", "done", results=[UNTRUSTED] if untrusted else None)
    write_log(
        home,
        name,
        lines if lines is not None else done + [{"type": "user", "turn": 2, "text": "keep it", "speaker": "kyle"}],
    )
    folder = home / "sessions" / name / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def export(
    home: Path, name: str = "table.csv", data: bytes = b"cohort,response\na,0.4\nb,0.6\n", session_name: str = "s1"
) -> Path:
    path = home / "sessions" / session_name / "exports" / name
    path.write_bytes(data)
    return path


def record(
    name: str = "table.csv",
    *more: str,
    session_name: str = "s1",
    summary: str = "Response by cohort.",
    title: str = "Cohort table",
):
    """`bxmem artifact record --json` as the host runs it: options after the name."""
    args = ["artifact", "record", "--session", session_name, "--json", "--", name]
    if title is not None:
        args += ["--title", title]
    if summary is not None:
        args += ["--summary", summary]
    result = bxmem_inprocess(*args, *more)
    return result, json.loads(result.stdout)


def resolve(ident: str, *more: str):
    result = bxmem_inprocess("artifact", "resolve", "--json", "--", ident, *more)
    return result, json.loads(result.stdout)


def store(home: Path) -> Path:
    return home / "memory" / "artifacts"


def card_file(home: Path, experiment: str) -> Path:
    return store(home) / "cards" / f"{experiment}.json"


def object_file(home: Path, artifact: str) -> Path:
    return store(home) / "objects" / artifact[4:6] / artifact


def left_behind(home: Path) -> dict[str, list[str]]:
    """What the store holds besides its folders: to show a refused record left nothing."""
    root = store(home)
    out = {}
    for folder in ("objects", "cards", "projections", "pending", "tmp"):
        found = (
            sorted(str(p.relative_to(root)) for p in (root / folder).rglob("*") if p.is_file()) if root.exists() else []
        )
        if found:
            out[folder] = found
    return out
