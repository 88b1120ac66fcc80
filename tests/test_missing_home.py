"""A Boxmaker home that is not there (a wrong HOME, user or BOXMAKER_HOME): every
command that would read or write it stops with one line and exit 78, naming
`bxmem init`, and creates nothing; read-only commands create nothing in a home
that is there either (issue 28, item 3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import bxmem_main, run_bxmem, write_log

from bxmem.demo.sample import turn_lines


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch) -> Path:
    missing = tmp_path / "not-the-home"
    monkeypatch.setenv("BOXMAKER_HOME", str(missing))
    return missing


def one_line_78(result, home: Path) -> None:
    assert result.returncode == 78, (result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and f"the Boxmaker home {home}" in errors[0], result.stderr
    assert "bxmem init" in errors[0] and "runbook home-missing" in errors[0]


JOBS = [
    ("decide",),
    ("mirror",),
    ("send",),
    ("undo", "j-1"),
    ("index", "rebuild"),
    ("outbox", "drop", "turn:s:1", "--reason", "x"),
    ("artifact", "record", "--session", "s", "--", "t.csv"),
    ("artifact", "rm", "art_" + "a" * 52),
]
READ_ONLY = [
    ("sync",),
    ("recall", "backups"),
    ("ask", "what did we decide?"),
    ("audit",),
    ("outbox", "list"),
    ("artifact", "resolve", "art_" + "a" * 52),
    ("artifact", "list"),
    ("artifact", "verify"),
    ("artifact", "export", "art_" + "a" * 52, "--to", "/tmp/never-written"),
]


@pytest.mark.parametrize("command", JOBS + READ_ONLY, ids=" ".join)
def test_a_missing_home_is_one_line_exit_78_and_nothing_is_created(nowhere, honcho, configure, tmp_path, command):
    configure(honcho.url, extra="\n[artifacts]\n")
    before = tree(tmp_path)
    one_line_78(bxmem_main(*command), nowhere)
    assert not nowhere.exists() and tree(tmp_path) == before
    assert not honcho.requests  # nothing asked of Honcho either


@pytest.mark.parametrize("job", ["decide", "mirror", "send"])
def test_the_timer_s_run_off_a_terminal_says_so_too_never_idle(nowhere, configure, job):
    """The idle path never answers for a home that is not there, whatever summary lies about."""
    configure("http://127.0.0.1:9")
    result = run_bxmem("--quiet", job)
    one_line_78(result, nowhere)
    assert not nowhere.exists()


def test_a_local_only_send_says_so_too(nowhere):
    one_line_78(bxmem_main("send"), nowhere)
    assert not nowhere.exists()


def test_a_link_where_the_home_should_be_is_refused(home, tmp_path, monkeypatch):
    link = tmp_path / "link-home"
    link.symlink_to(home)
    monkeypatch.setenv("BOXMAKER_HOME", str(link))
    result = bxmem_main("decide")
    assert result.returncode == 78 and "is a symbolic link" in result.stderr


def test_ask_refuses_a_missing_home_as_recall_does(nowhere, honcho, configure):
    """With the wrong home, ask would label a workspace this agent wrote untrusted as `memory`."""
    configure(honcho.url)
    for command in (("ask", "what?", "--json"), ("recall", "what", "--json")):
        result = bxmem_main(*command)
        assert result.returncode == 78
        assert json.loads(result.stdout)["schema"] == "bxmem.error/1"
    assert not [r for r in honcho.requests if "/chat" in r.path]


def test_config_check_warns_and_creates_nothing(nowhere, configure):
    configure("http://127.0.0.1:9")
    result = bxmem_main("config", "check", "--json")
    assert result.returncode == 0
    assert any("bxmem init" in w for w in json.loads(result.stdout)["warnings"])
    assert not nowhere.exists()


def test_read_only_commands_create_nothing_in_a_home_that_is_there(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    before = tree(home)
    for command in (
        ("sync",),
        ("sync", "--json"),
        ("recall", "hello"),
        ("outbox", "list"),
        ("config", "check"),
        ("tools",),
        ("audit",),
        ("ask", "what?"),
    ):
        bxmem_main(*command)
        assert tree(home) == before, command
    assert not os.path.exists(home / "memory")
