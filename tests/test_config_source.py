"""Which bxmem.toml is used, and what happens when it cannot be: a config file
someone named must be there, readable and UTF-8, or every command stops with
one line and exit 78 and decides nothing (issue 12, items 1 and 2)."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers import bxmem_main, honcho_config, ledger_events, write_log

from bxmem.demo.sample import turn_lines, write_journal

# Every command that reads the configuration, with the arguments it needs.
# decide, mirror, send and recall take the lean path; the rest go through typer.
COMMANDS = [
    ["decide"],
    ["mirror"],
    ["send"],
    ["recall", "backups"],
    ["sync"],
    ["audit"],
    ["ask", "what"],
    ["undo", "e1"],
    ["config", "check"],
    ["index", "rebuild"],
    ["decide", "--json"],
    ["send", "--json"],
    ["sync", "--json"],
]


def digest(home) -> dict:
    """Every file under the home by content: a command that decided nothing leaves it as it was."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.is_socket()
    }


@pytest.fixture
def finished_turns(home, brokerd):
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "more", "yes"))
    write_journal(
        home,
        [{"id": "e1", "ts": "2026-09-27T10:00:00Z", "session": "s", "op": "note", "trust": "trusted", "entry": "x"}],
    )
    return home


def assert_stopped(result, *expected: str) -> None:
    assert result.returncode == 78, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr
    if "--json" in result.args:  # one JSON document on stdout: the same error (tests/test_json_always.py)
        assert json.loads(result.stdout)["error"]["message"] == lines[0].removeprefix("bxmem: error: ")
    else:
        assert result.stdout == ""
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_named_config_that_does_not_exist_stops_every_command(finished_turns, tmp_path, command):
    home = finished_turns
    before = digest(home)
    missing = tmp_path / "typo.toml"
    assert_stopped(
        bxmem_main(*command, env={"BXMEM_CONFIG": str(missing)}), str(missing), "$BXMEM_CONFIG", "does not exist"
    )
    assert_stopped(bxmem_main("--config", str(missing), *command), str(missing), "--config", "does not exist")
    assert digest(home) == before and ledger_events(home) == []


def test_the_typo_of_the_issue_decides_nothing_then_the_right_path_sends_everything(
    finished_turns, honcho, config_file
):
    home = finished_turns
    config_file.write_text(honcho_config(honcho.url))
    typo = str(config_file) + ".typo"
    for _ in range(2):  # the second run is the timer's next tick: no fast-path "idle" either
        assert_stopped(bxmem_main("decide", env={"BXMEM_CONFIG": typo}), typo)
    assert ledger_events(home) == []
    assert bxmem_main("decide").returncode == 0
    assert bxmem_main("send").returncode == 0
    assert len(honcho.messages_in("bm0-trusted")) == 4  # both turns, user and reply


def test_the_fast_path_never_calls_a_missing_named_config_idle(finished_turns, tmp_path):
    """A summary left from a run on a file that is gone (or from a version that
    ran local-only on a missing file) must not answer "idle": the job says why it stops."""
    from bxmem.start import idle as fastpath

    class Gone:
        path = tmp_path / "gone.toml"

    state = finished_turns / "memory" / "bxmem"
    state.mkdir(parents=True)
    fastpath.write_summary(state, "decide", Gone, {}, None)
    result = bxmem_main("decide", env={"BXMEM_CONFIG": str(Gone.path)})
    assert_stopped(result, str(Gone.path))


def test_a_named_config_that_cannot_be_read_stops(finished_turns, tmp_path):
    folder = tmp_path / "a-folder.toml"
    folder.mkdir()
    for command in (["decide"], ["sync"], ["recall", "x"]):
        assert_stopped(bxmem_main(*command, env={"BXMEM_CONFIG": str(folder)}), str(folder))
    assert ledger_events(finished_turns) == []


def test_only_the_default_config_may_be_absent(finished_turns, tmp_path, monkeypatch):
    monkeypatch.delenv("BXMEM_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-such-config-dir"))
    result = bxmem_main("decide", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["local_only"] is True
    check = bxmem_main("config", "check")
    assert check.returncode == 0 and "(absent: defaults, local-only)" in check.stdout


LATIN1 = 'owner = "Ren\xe9"\n'.encode("latin-1")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_config_that_is_not_utf8_is_one_line_with_the_byte_offset(finished_turns, config_file, command):
    home = finished_turns
    config_file.write_bytes(b"# bxmem\n" + LATIN1)
    before = digest(home)
    offset = len(b"# bxmem\n" + b'owner = "Ren')
    assert_stopped(bxmem_main(*command), str(config_file), f"byte offset {offset}", "line 2", "not UTF-8")
    assert digest(home) == before


def test_a_config_that_is_not_utf8_stops_the_timer_job_after_an_idle_run(finished_turns, config_file):
    """The fast path reads the file too (to find the home when BOXMAKER_HOME is unset)."""
    assert bxmem_main("decide").returncode == 0
    config_file.write_bytes(LATIN1)
    assert_stopped(bxmem_main("decide"), "not UTF-8")
    assert_stopped(bxmem_main("decide", env={"BOXMAKER_HOME": ""}), "not UTF-8")
