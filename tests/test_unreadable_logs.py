"""A session log bxmem cannot read (permission denied, an I/O error): said
once, its turns wait, and it is tried again, at a bounded rate, by the idle
path too: every RETRY_UNREADABLE_S, and at once when its mode or owner
changes. sync and decide say it cannot be read (runbook log-unreadable).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from helpers import CAPTURED, ROOT, bxmem_inprocess, decisions, write_log
from runbook_lines import cites

from bxmem.commands import decide, sync
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.sources import loopd
from bxmem.start.idle import is_idle
from bxmem.start.lean_argv import parse


def unprivileged() -> list[str]:
    """A command prefix under which a file's mode is obeyed: root reads a mode-000
    file, so as root the job runs without its capabilities (setpriv)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a mode-000 file would be readable")
    return ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]


def job(*args: str) -> subprocess.CompletedProcess:
    """The real CLI, as the timer runs it (stderr not a terminal: the idle path is on)."""
    result = subprocess.run(
        [*unprivileged(), sys.executable, "-m", "bxmem", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        cwd=ROOT,
    )
    CAPTURED.extend((result.stdout, result.stderr))
    return result


@pytest.fixture
def clean(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    return home


def test_a_log_denied_is_said_once_waits_and_is_read_once_its_mode_changes(clean):
    path = write_log(clean, "s", turn_lines(1, "a", "b"))
    write_log(clean, "t", turn_lines(1, "c", "d"))
    os.chmod(path, 0)
    first = job("decide")
    assert first.returncode == 3, first.stderr
    assert first.stderr.splitlines() == [
        f"bxmem decide: warning: {path}: cannot read: Permission denied; its turns wait, and it is tried again every "
        "60 s or as soon as its mode or owner changes" + cites("log-unreadable"),
        "bxmem decide: decided 1 turn(s): 1 trusted",
    ]
    assert set(decisions(clean)) == {"turn:t:1"}
    again = job("decide")  # within the minute, nothing changed: the idle path, not a retry, exiting as the run did
    assert (again.returncode, again.stderr) == (3, "")
    os.chmod(path, 0o600)
    fixed = job("decide")
    assert fixed.returncode == 0, fixed.stderr
    assert f"bxmem decide: notice: {path} can be read again" in fixed.stderr
    assert set(decisions(clean)) == {"turn:t:1", "turn:s:1"}


@pytest.fixture
def denied(clean, monkeypatch):
    """s.jsonl read once, then refused to bxmem (as a mode bxmem cannot read would),
    while loopd goes on writing it. Yields the log and the opens bxmem tried."""
    path = write_log(clean, "s", turn_lines(1, "a", "b"))
    decide.run(config_module.load())
    tried = []
    real_open = loopd.open_file

    def refusing(file, *args, **kwargs):
        if os.fspath(file) == str(path):
            tried.append(time.time())
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(loopd, "open_file", refusing)
    write_log(clean, "s", turn_lines(2, "c", "d"))
    return path, tried


def test_a_growing_log_that_cannot_be_read_is_tried_once_a_minute(denied, monkeypatch):
    path, tried = denied
    report = decide.run(config_module.load())
    assert report.logs_unreadable == 1 and report.exit_code == 3 and len(tried) == 1
    now = time.time()
    for step in range(1, 12):  # loopd appends every 5 s; the timer fires every 5 s
        monkeypatch.setattr(time, "time", lambda step=step: now + 5 * step)
        write_log(path.parents[1], "s", turn_lines(2 + step, "q", "a")[:1])
        if not is_idle(parse(["bxmem", "decide"])):
            decide.run(config_module.load())
    assert len(tried) == 1  # not once a run: its size is not watched while it cannot be read
    monkeypatch.setattr(time, "time", lambda: now + 61)
    assert not is_idle(parse(["bxmem", "decide"]))  # the minute is up: tried again
    decide.run(config_module.load())
    assert len(tried) == 2


def test_sync_and_decide_say_it_cannot_be_read(denied):
    path, _tried = denied
    decide.run(config_module.load())
    status = sync.status(config_module.load(), check=False)
    assert status["logs_unreadable"] == [
        {"log": str(path), "why": "cannot read: Permission denied", "since": status["logs_unreadable"][0]["since"]}
    ]
    assert sync.exit_code(status) == 4
    assert (
        f"attention: 1 log(s) cannot be read, their turns wait undecided (first: {path}: cannot read: "
        "Permission denied)" + cites("log-unreadable")
    ) in sync.lines(status)
    assert any(
        line.startswith(f"log {path} as decide recorded: cannot read: Permission denied since ")
        for line in sync.lines(status)
    )
    result = bxmem_inprocess("decide", "--json")  # within the minute: not tried, still counted
    assert result.returncode == 3 and json.loads(result.stdout)["logs_unreadable"] == 1
    shown = bxmem_inprocess("sync", "--json")  # validated against bxmem/schemas/sync.schema.json
    assert shown.returncode == 4 and json.loads(shown.stdout)["logs_unreadable"][0]["log"] == str(path)


def test_a_read_that_fails_part_way_keeps_what_ended_and_retries(clean, monkeypatch):
    path = write_log(clean, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d"))
    real = loopd.complete_lines

    def fails_on_the_sixth(*args, **kwargs):
        for n, line in enumerate(real(*args, **kwargs), 1):
            if n == 6:
                raise OSError(errno.EIO, "Input/output error")
            yield line

    monkeypatch.setattr(loopd, "complete_lines", fails_on_the_sixth)
    report = decide.run(config_module.load())
    assert report.logs_unreadable == 1 and set(decisions(clean)) == {"turn:s:1"}
    cursor = json.loads((clean / "memory" / "bxmem" / "decide.json").read_text())["logs"]["s"]
    assert cursor["error"]["why"] == "cannot read on: Input/output error"
    monkeypatch.setattr(loopd, "complete_lines", real)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 61)
    assert decide.run(config_module.load()).logs_unreadable == 0
    assert set(decisions(clean)) == {"turn:s:1", "turn:s:2"}
    assert "error" not in json.loads((clean / "memory" / "bxmem" / "decide.json").read_text())["logs"]["s"]
    assert path.exists()
