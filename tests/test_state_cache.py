"""Everything in memory/bxmem/ is a cache (docs/interfaces.md): delete any of it
between a memory write and its removal, and the removal still deletes the
conclusion the write made in Honcho, and nothing else."""

from __future__ import annotations

import shutil

import pytest
from helpers import decisions, write_log

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal

# Every file bxmem keeps in memory/bxmem/ once decide, mirror and send have run.
STATE_FILES = [
    "config.marshal",
    "decide.json",
    "entry.key",
    "idle-decide.marshal",
    "idle-mirror.marshal",
    "idle-send.marshal",
    "index.sqlite3",
    "mirror.json",
    "outbox.marshal",
    "workspace-roles.json",
]


def load():
    return config_module.load()


def sync():
    mirror.run(load())
    for _ in range(5):
        report = send.run(load())
        if not report.sent and not report.failed:
            return


def edit(n: str, op: str, entry: str) -> dict:
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": "s1", "op": op, "file": "user.md", "entry": entry}


@pytest.fixture
def added(home, brokerd, honcho, configure):
    """Two entries added, mirrored and sent; a turn decided and sent too."""
    configure(honcho.url)
    write_log(home, "s1", turn_lines(1, "hello", "hi"))
    decide.run(load())
    write_journal(home, [edit("a1", "identity_add", "alpha"), edit("a2", "identity_add", "beta")])
    sync()
    assert sorted(c["content"] for c in honcho.conclusions_in("bm0-trusted")) == ["alpha", "beta"]
    return home / "memory" / "bxmem"


def test_the_list_names_every_state_file(added):
    present = sorted(p.name for p in added.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert present == sorted(STATE_FILES)


@pytest.mark.parametrize("lost", [*STATE_FILES, "all of it"])
def test_a_remove_deletes_the_right_conclusion_whatever_state_was_lost(added, home, honcho, lost):
    if lost == "all of it":
        shutil.rmtree(added)
    else:
        for path in added.glob(lost + "*"):  # index.sqlite3 with its -wal and -shm
            path.unlink()
    write_journal(home, [edit("r1", "identity_remove", "alpha")])
    sync()
    assert decisions(home)["edit:r1"]["reason"] == "identity-remove"
    assert decisions(home)["edit:r1"]["actions"][0]["of"] == "edit:a1#0"
    assert [c["content"] for c in honcho.conclusions_in("bm0-trusted")] == ["beta"]
