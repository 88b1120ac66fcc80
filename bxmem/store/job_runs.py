"""Each timer job's last run with work, for `bxmem metrics`. Not fsynced: a record lost in a crash is the
next run's to write. Never creates its folder: a deleted memory/bxmem/ records nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from bxmem.errors import StorageError
from bxmem.formats.shapes import integer, number, record
from bxmem.store.state_json import load_json, write_json

SHAPE = record({"ended_at": number, "duration_s": number, "exit_code": integer(0, 255)})


def path(state_dir: Path, job: str) -> Path:
    return state_dir / f"last-run-{job}.json"


def save(state_dir: Path, job: str, exit_code: int, started: float, ended: float) -> None:
    """Never raises: a record bxmem cannot write changes nothing about the run it describes."""
    if not os.path.isdir(state_dir):
        return
    data = {"ended_at": round(ended, 3), "duration_s": round(max(0.0, ended - started), 3), "exit_code": exit_code}
    try:
        write_json(path(state_dir, job), data, durable=False)
    except StorageError:
        pass


def load(state_dir: Path, job: str) -> tuple[dict | None, str | None]:
    """(the record, None), (None, None) when the job has recorded no run, or (None, why it cannot be used)."""
    return load_json(path(state_dir, job), SHAPE)
