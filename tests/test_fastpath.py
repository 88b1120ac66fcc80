"""The idle fast path says "nothing to do" only when that is true."""

from __future__ import annotations

import json
import marshal
import os
import time
from pathlib import Path

import pytest
from helpers import bxmem_main, ledger_events, write_log
from runbook_lines import cites

from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.start.idle import is_idle as _is_idle
from bxmem.start.lean_argv import Parsed, parse
from bxmem.start.marshal_seal import seal, unseal


def is_idle(argv: list[str]) -> bool:
    """The entry point's order: argv parsed once, the parse handed to the fast path."""
    return _is_idle(parse(argv))


def test_decide_idle_until_a_log_grows_or_appears(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    assert not is_idle(["bxmem", "decide"])  # never ran
    assert bxmem_main("decide").returncode == 0
    assert is_idle(["bxmem", "decide"])
    write_log(home, "s", turn_lines(2, "c", "d"))
    assert not is_idle(["bxmem", "decide"])
    bxmem_main("decide")
    assert is_idle(["bxmem", "decide"])
    write_log(home, "t", turn_lines(1, "new", "session"))
    assert not is_idle(["bxmem", "decide"])


def test_decide_not_idle_while_turns_wait_for_brokerd(home, configure):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "a", "b"))
    bxmem_main("decide")  # no brokerd: the turn waits
    assert not is_idle(["bxmem", "decide"])


def test_send_idle_until_the_ledger_or_config_or_a_key_changes(home, brokerd, honcho, configure, tmp_path):
    key = tmp_path / "k"
    key.write_text("key-1\n")
    os.chmod(key, 0o600)
    configure(honcho.url, extra=f'[secrets.honcho_fleet]\nfile = "{key}"\n')
    write_log(home, "s", turn_lines(1, "a", "b"))
    bxmem_main("decide")
    assert not is_idle(["bxmem", "send"])
    bxmem_main("send")
    assert is_idle(["bxmem", "send"])
    assert is_idle(["bxmem", "--config", os.environ["BXMEM_CONFIG"], "send"])  # the same file, named
    assert not is_idle(["bxmem", "--config", str(tmp_path / "other.toml"), "send"])  # another file
    os.chmod(key, 0o644)
    assert not is_idle(["bxmem", "send"])
    os.chmod(key, 0o600)
    write_log(home, "s", turn_lines(2, "c", "d"))
    bxmem_main("decide")
    assert not is_idle(["bxmem", "send"])
    bxmem_main("send")
    assert is_idle(["bxmem", "send"])
    config = tmp_path / "bxmem.toml"
    config.write_text(config.read_text() + "\n[send]\nbatch = 5\n")
    assert not is_idle(["bxmem", "send"])


def test_other_arguments_always_take_the_slow_path(home):
    assert not is_idle(["bxmem", "send", "--json"])
    assert not is_idle(["bxmem", "sync"])
    assert not is_idle(["bxmem"])


def test_idle_run_prints_nothing_and_exits_zero(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    bxmem_main("decide")
    result = bxmem_main("decide")
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_fast_path_defaults_match_platformdirs(monkeypatch, tmp_path):
    import platformdirs

    from bxmem.start import locations

    for xdg in (None, "", str(tmp_path / "xdg")):
        for variable in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            if xdg is None:
                monkeypatch.delenv(variable, raising=False)
            else:
                monkeypatch.setenv(variable, xdg)
        assert locations.default_config_path() == os.path.join(platformdirs.user_config_dir("boxmaker"), "bxmem.toml")
        assert locations.default_home() == platformdirs.user_data_dir("boxmaker")


def test_fast_path_finds_home_through_the_config_file(home, brokerd, configure, monkeypatch, config_file):
    monkeypatch.delenv("BOXMAKER_HOME")
    config_file.write_text(f'[paths]\nhome = "{home}"\n')
    write_log(home, "s", turn_lines(1, "a", "b"))
    bxmem_main("decide")
    assert is_idle(["bxmem", "decide"])


def test_send_idle_before_any_ledger_exists(home, honcho, configure):
    configure(honcho.url)
    bxmem_main("send")
    assert is_idle(["bxmem", "send"])


@pytest.mark.parametrize("job", ["send", "decide", "mirror"])
def test_every_job_is_idle_local_only(home, brokerd, configure, config_file, job):
    """No [honcho] section: one real run, then the fast path answers; adding
    [honcho] (a new config version) wakes the job. (What the first run loads:
    tests/test_import_budget.py.)"""
    configure(None)
    write_log(home, "s", turn_lines(1, "a", "b"))
    assert bxmem_main("--quiet", job).returncode == 0
    assert is_idle(["bxmem", job])
    assert bxmem_main(job).returncode == 0 and is_idle(["bxmem", job])
    configure("http://127.0.0.1:9")
    assert not is_idle(["bxmem", job])


def test_local_only_send_where_no_state_can_be_written_still_says_nothing_is_sent(home, configure):
    configure(None)
    (home / "memory").write_text("")  # a file where bxmem's folder would go: no summary can be written
    result = bxmem_main("send")
    assert result.returncode == 0 and "nothing is sent" in result.stderr
    assert not is_idle(["bxmem", "send"])  # so every run asks again: slower, never wrong


def test_mirror_idle_until_the_journal_grows(home, configure):
    from bxmem.demo.sample import write_journal

    configure("http://127.0.0.1:9")
    bxmem_main("mirror")
    assert is_idle(["bxmem", "mirror"])  # no journal yet
    write_journal(home)
    assert not is_idle(["bxmem", "mirror"])
    bxmem_main("mirror")
    assert is_idle(["bxmem", "mirror"])


def parsed(argv: list[str]) -> Parsed:
    """The parse of a command line the lean path takes."""
    found = parse(argv)
    assert found is not None, argv
    return found


def test_the_command_is_the_first_word_not_an_option(home, brokerd, configure, tmp_path):
    assert parsed(["bxmem", "--config", "send", "decide"]).command == "decide"  # "send" is the config file's name here
    assert parsed(["bxmem", "-q", "recall", "send"]).command == "recall"
    assert parse(["bxmem", "--json"]) is None
    configure("http://127.0.0.1:9")
    result = bxmem_main("recall", "send", "--json")  # a query that is a job's name
    assert result.returncode == 7 and '"hits": []' in result.stdout


def test_one_parser_for_the_lean_and_idle_paths():
    assert parsed(["bxmem", "decide", "--config", "a.toml", "--json"]).options == {"config": "a.toml", "json": True}
    assert parsed(["bxmem", "--config=a.toml", "send", "-q"]).options == {"config": "a.toml", "quiet": True}
    assert parse(["bxmem", "send", "--help"]) is None and parse(["bxmem", "send", "stray"]) is None
    assert parsed(["bxmem", "recall", "backups", "-k", "3"]).options == {"query": "backups", "k": "3"}
    assert parsed(["bxmem", "recall", "--", "-k"]).options == {"query": "-k"}
    assert parsed(["bxmem", "recall", "a", "b"]).options == {"query": "a b"}  # several words: one query


def test_a_non_numeric_k_goes_to_the_full_cli(home, configure):
    configure("http://127.0.0.1:9")
    result = bxmem_main("recall", "x", "-k", "many")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_the_error_boundary_is_one_line_for_the_owner_and_loud_for_bugs(capsys):
    import errno

    import pytest

    from bxmem.errors import ConfigInvalid, ExitCode, report

    assert report(ConfigInvalid("bxmem.toml: honcho.url: bad")) == ExitCode.CONFIG
    assert report(OSError(errno.EROFS, "Read-only file system", "/h/memory")) == ExitCode.ERROR
    assert capsys.readouterr().err.splitlines() == [
        "bxmem: error: bxmem.toml: honcho.url: bad" + cites("honcho-config-invalid"),
        "bxmem: error: Read-only file system: /h/memory",
    ]
    with pytest.raises(KeyError):
        report(KeyError("a bug"))


def _age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def dormant_home(home, brokerd, configure):
    """A home whose one log, decided, has been untouched for two hours."""
    from bxmem.commands import decide as decide_module

    configure("http://127.0.0.1:9")
    write_log(home, "old", turn_lines(1, "hi", "hello"))
    _age(home / "logs" / "old.jsonl", 2 * decide_module.DORMANT_AFTER_S)
    decide_module.run(config_module.load())
    return home


def _wake(home) -> None:
    with open(home / "logs" / "old.jsonl", "a") as f:
        f.write("\n".join(json.dumps(line) for line in turn_lines(2, "back", "welcome")) + "\n")


def test_a_dormant_log_is_looked_at_once_a_sweep_interval(home, brokerd, configure):
    """Logs untouched for an hour are compared once a minute, not on every run;
    a write to one is seen at the next sweep, and nothing is missed."""
    from bxmem.commands import decide as decide_module
    from bxmem.start.idle import dormant_path

    configure("http://127.0.0.1:9")
    write_log(home, "old", turn_lines(1, "hi", "hello"))
    write_log(home, "new", turn_lines(1, "hi", "hello"))
    _age(home / "logs" / "old.jsonl", 2 * decide_module.DORMANT_AFTER_S)
    decide_module.run(config_module.load())
    state_dir = home / "memory" / "bxmem"
    dormant = dormant_path(state_dir, "decide")
    listed = marshal.loads(unseal(Path(dormant).read_bytes()))["dirs"]
    assert {folder: [name for name, _ino, _size, _mtime in entries] for folder, entries in listed.items()} == {
        str(home / "logs"): ["old.jsonl"]
    }
    assert is_idle(["bxmem", "decide"])

    _wake(home)  # the dormant session wakes
    assert is_idle(["bxmem", "decide"])  # not swept yet: the write waits
    _age(dormant, decide_module.SWEEP_EVERY_S + 1)
    assert not is_idle(["bxmem", "decide"])  # the sweep sees it
    decide_module.run(config_module.load())
    assert len([e for e in ledger_events(home) if e["ev"] == "decided"]) == 3


def test_an_unchanged_sweep_is_idle_and_resets_the_interval(home, dormant_home):
    from bxmem.commands import decide as decide_module
    from bxmem.start.idle import dormant_path

    dormant = dormant_path(home / "memory" / "bxmem", "decide")
    _age(dormant, decide_module.SWEEP_EVERY_S + 1)
    assert is_idle(["bxmem", "decide"])
    assert time.time() - os.stat(dormant).st_mtime < decide_module.SWEEP_EVERY_S


def test_a_run_started_by_the_path_unit_sweeps_at_once(home, dormant_home, monkeypatch):
    _wake(home)
    monkeypatch.setenv("TRIGGER_UNIT", "bxmem-decide.timer")
    assert is_idle(["bxmem", "decide"])
    monkeypatch.setenv("TRIGGER_UNIT", "bxmem-decide.path")
    assert not is_idle(["bxmem", "decide"])


def test_a_sweep_list_from_another_run_is_never_trusted(home, dormant_home):
    """If the summary and the dormant list come from different runs (one of the two
    writes failed), a log could be in neither list: the token makes that not idle."""
    from bxmem.commands import decide as decide_module
    from bxmem.start.idle import dormant_path

    dormant = dormant_path(home / "memory" / "bxmem", "decide")
    listed = marshal.loads(unseal(Path(dormant).read_bytes()))
    with open(dormant, "wb") as f:
        f.write(seal(marshal.dumps({**listed, "token": listed["token"] + 1})))
    _age(dormant, decide_module.SWEEP_EVERY_S + 1)
    assert not is_idle(["bxmem", "decide"])


def test_a_person_at_a_terminal_gets_the_real_job(home, dormant_home):
    """The shortcut is for timers: run by hand (stderr a terminal), decide looks at
    every log at once, dormant ones included."""
    import pty
    import subprocess
    import sys

    from helpers import ROOT

    _wake(home)
    assert is_idle(["bxmem", "decide"])  # a timer run would wait for the sweep
    controller, terminal = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "bxmem", "decide"],
            stderr=terminal,
            stdout=subprocess.DEVNULL,
            env=os.environ,
            cwd=ROOT,
            timeout=60,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert result.returncode == 0
    assert len([e for e in ledger_events(home) if e["ev"] == "decided"]) == 2


def test_the_fast_path_expands_a_home_named_with_a_tilde(home, brokerd, monkeypatch, tmp_path):
    """The home's precedence is locations.home for every path: the fast path looked
    for "~/h/memory/bxmem" literally, found no summary, and ran the job every time."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BOXMAKER_HOME", "~/h")
    (tmp_path / "h").mkdir()
    bxmem_main("decide")
    assert (tmp_path / "h" / "memory" / "bxmem" / "idle-decide.marshal").exists()
    assert is_idle(["bxmem", "decide"])


# What the idle check reads of a config file the owner wrote (the units name neither the
# home nor the config in the environment): `[paths] home` at a glance, tomllib only when
# the file is written in a way the glance does not read.
GLANCED = [
    ("", None),
    ('[honcho]\nurl = "http://h:8000"\nagent = "boxmaker0"\n', None),
    ('[paths]\nhome = "/srv/box"\n', "/srv/box"),
    ("[paths]\nhome = '/srv/box'   # literal\n", "/srv/box"),
    (
        '# the home\n  [ paths ]  # mine\n  home="/a#b" # a comment\nrun = "/run/x"\n[honcho]\nhome = "/not/this"\n',
        "/a#b",
    ),
    ('[paths]\nrun = "/run/x"\n[[honcho.read]]\nagent = "b1"\n', None),
    ('[honcho]\nurl = "u"\n[paths]\nhome = ""\n', ""),
    ('[paths]\r\nhome = "/crlf"\r\n', "/crlf"),
    ("# no [paths] here, only the word: paths\n[send]\nbatch = 5\n", None),
    ('[honcho]\npaths = "a honcho key named paths"\n', None),
]
UNSURE = [
    'paths = { home = "/inline" }\n',
    'paths.home = "/dotted"\n',
    '"paths".home = "/quoted"\n',
    '["paths"]\nhome = "/quoted-table"\n',
    '[paths]\n"home" = "/quoted-key"\n',
    '[paths]\nhome = "/esc\\u0061ped"\n',
    '"p\\u0061ths" = { home = "/escaped-key" }\n',
    '[paths]\nhome = """/multi\nline"""\n',
    "[honcho]\nnote = '''\n[paths]\nhome = \"/inside\"\n'''\n",
    '[paths]\nhome = "/a" "/b"\n',
    "[paths.sub]\nx = 1\n",
    '[honcho]\nx = [\n "[paths]",\n]\n',
]


@pytest.mark.parametrize(("text", "home"), GLANCED)
def test_the_idle_check_reads_the_home_of_a_config_at_a_glance_as_tomllib_does(text, home):
    import tomllib

    from bxmem.start.idle import _glance_home

    assert (tomllib.loads(text).get("paths") or {}).get("home") == home
    assert _glance_home(text.encode()) == (True, home)


@pytest.mark.parametrize("text", UNSURE)
def test_a_config_written_otherwise_is_left_to_tomllib(text):
    from bxmem.start.idle import _glance_home

    assert _glance_home(text.encode()) == (False, None)


def test_every_config_the_docs_show_is_read_at_a_glance_as_tomllib_reads_it():
    """The README's sample and every block of docs/config.md: what owners copy."""
    import re
    import tomllib

    from bxmem.start.idle import _glance_home

    root = Path(__file__).resolve().parents[1]
    blocks = [
        b
        for doc in ("README.md", "docs/config.md")
        for b in re.findall(r"```toml\n(.*?)```", (root / doc).read_text(), flags=re.S)
    ]
    assert len(blocks) >= 2
    for block in blocks:
        try:
            home = (tomllib.loads(block).get("paths") or {}).get("home")
        except tomllib.TOMLDecodeError:
            continue  # a fragment
        assert _glance_home(block.encode()) == (True, home), block[:80]


def test_a_config_whose_home_the_glance_gets_wrong_costs_a_real_run_never_skips_one(
    home, brokerd, monkeypatch, config_file, tmp_path
):
    """The summary found in the home the glance names counts only if a run that read this
    very config version (and resolved that home) wrote it: a home no such run used has none."""
    from bxmem.start import idle

    monkeypatch.delenv("BOXMAKER_HOME")
    config_file.write_text(f'[paths]\nhome = "{home}"\n')
    write_log(home, "s", turn_lines(1, "a", "b"))
    bxmem_main("decide")
    assert is_idle(["bxmem", "decide"])
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("BOXMAKER_HOME", str(other))
    bxmem_main("decide")  # a run in another home, named by the environment, with the same config version
    monkeypatch.delenv("BOXMAKER_HOME")
    assert (other / "memory" / "bxmem" / "idle-decide.marshal").exists()
    monkeypatch.setattr(idle, "_glance_home", lambda data: (True, str(other)))
    assert not is_idle(["bxmem", "decide"])
    monkeypatch.setattr(idle, "_glance_home", lambda data: (True, str(home)))
    assert is_idle(["bxmem", "decide"])
