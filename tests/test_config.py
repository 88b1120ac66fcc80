"""bxmem.toml: every mistake is one line naming the field, exit 78, nothing else happens."""

from __future__ import annotations

import json

import pytest
from helpers import bxmem_inprocess, bxmem_main, honcho_config, run_bxmem
from runbook_lines import cites

from bxmem.config.loader import Config

GOOD = honcho_config("http://127.0.0.1:8000")


@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD.replace('agent = "boxmaker0"', 'agent = "box.maker"'), "honcho.agent: must be 1 to 512 characters"),
        (GOOD.replace('fleet = "fleet"', 'fleet = "' + "f" * 513 + '"'), "honcho.fleet: must be 1 to 512"),
        (GOOD.replace('trusted = "bm0-trusted"', 'trusted = "bm0 trusted"'), "honcho.trusted: must be"),
        (GOOD.replace('owner = "kyle"\n', ""), "honcho.owner: is required"),
        (GOOD + "colour = 'blue'\n", "honcho.colour: unknown key"),
        (
            GOOD.replace('url = "http://127.0.0.1:8000"', 'url = "ftp://x"'),
            "honcho.url: must be an http:// or https:// URL",
        ),
        (GOOD.replace('untrusted = "bm0-untrusted"', 'untrusted = "bm0-trusted"'), "three different workspaces"),
        (GOOD.replace('owner = "kyle"', 'owner = "boxmaker0"'), "agent and owner must be different"),
        (GOOD + '[[honcho.read]]\nagent = "bm1"\nworkspace = "bm1-trusted"\ntrust = "maybe"\n', "honcho.read.0.trust"),
        (GOOD + '[[honcho.read]]\nagent = "bm1"\nworkspace = "bm1-trusted"\nclass = "secret"\n', "honcho.read.0.class"),
        (GOOD + '[secrets.honcho_other]\nfile = "/x"\n', "unknown key name 'honcho_other'"),
        (GOOD + "[send]\nbatch = 0\n", "send.batch"),
        (GOOD.replace("127.0.0.1:8000", "127.0.0.1:99999"), "honcho.url: port '99999' is out of range"),
        (GOOD.replace("127.0.0.1:8000", "127.0.0.1:0"), "honcho.url: port '0' is out of range"),
        (GOOD.replace("127.0.0.1:8000", "[::1]:70000"), "honcho.url: port '70000' is out of range"),
        (GOOD + "[surprise]\n", "surprise: unknown key"),
        ("[honcho\n", "not valid TOML"),
    ],
)
def test_each_mistake_is_one_line_and_exit_78(config_file, text, expected):
    config_file.write_text(text)
    for command in ENTRY_PATHS:
        assert_one_line_78(bxmem_main(*command), expected, command)


# The typer CLI, the idle fast path (twice: decide and send), and the lean path.
ENTRY_PATHS = (["config", "check"], ["decide"], ["send"], ["recall", "x"])


def assert_one_line_78(result, expected: str, command: list[str]) -> None:
    assert result.returncode == 78, (command, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
    assert lines[0].endswith(cites("honcho-config-invalid"))
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ENTRY_PATHS, ids=" ".join)
@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD.replace('agent = "boxmaker0"', 'agent = "box.maker"'), "honcho.agent: must be 1 to 512 characters"),
        ("[honcho\n", "not valid TOML"),
    ],
    ids=["schema", "toml"],
)
def test_a_mistake_stops_each_entry_path_as_a_process(config_file, text, expected, command):
    """The same through the console script: what each path prints and exits with as a process."""
    config_file.write_text(text)
    assert_one_line_78(run_bxmem(*command), expected, command)


@pytest.mark.parametrize("name", ["local", "own", "untrusted", "fleet", "artifacts"])
def test_a_read_agent_may_not_take_a_name_recall_or_ask_gives_its_own_sources(config_file, name):
    """An agent of [[honcho.read]] may not be named as one of recall's or ask's own sources:
    one named `fleet` would be what `ask -w fleet` asks, one named `local` would share
    recall's outcome slot with the local index."""
    config_file.write_text(GOOD + f'[[honcho.read]]\nagent = "{name}"\nworkspace = "x-trusted"\n')
    result = bxmem_inprocess("config", "check")
    assert result.returncode == 78
    assert (
        f"read: agent '{name}' is a name recall or ask gives a source of its own (local, own, untrusted, fleet, "
        "artifacts)"
    ) in result.stderr


def test_read_sources_default_to_untrusted_and_private(config_file):
    config_file.write_text(GOOD + '[[honcho.read]]\nagent = "bm1"\nworkspace = "bm1-trusted"\n')
    from bxmem.config import loader as config

    honcho = config.load().honcho
    assert honcho is not None
    source = honcho.read[0]
    assert (source.trust, source.trust_class) == ("untrusted", "private")


def test_config_check_prints_paths_and_workspaces(config_file, home):
    config_file.write_text(GOOD + '[[honcho.read]]\nagent = "bm1"\nworkspace = "bm1-trusted"\n')
    result = bxmem_inprocess("config", "check", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["home"] == str(home)
    assert data["ledger"] == str(home / "memory" / "honcho.jsonl")
    assert [w["role"] for w in data["workspaces"]] == ["trusted", "untrusted", "fleet", "read:bm1"]


def test_config_check_plain_output_is_exactly_this(config_file, home):
    """The plain output is read by people and runbook entries quote it: held line by line."""
    config_file.write_text(GOOD + '[[honcho.read]]\nagent = "bm1"\nworkspace = "bm1-trusted"\n')
    result = bxmem_inprocess("config", "check")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        f"config: {config_file}\n"
        f"home: {home}\n"
        f"run: {home}/run\n"
        f"ledger: {home}/memory/honcho.jsonl\n"
        f"broker_socket: {home}/run/memory-broker/state.sock\n"
        "mode: honcho\n"
        "honcho: http://127.0.0.1:8000 as agent boxmaker0, owner kyle\n"
        "  trusted: bm0-trusted (no key)\n"
        "  untrusted: bm0-untrusted (no key)\n"
        "  fleet: fleet (no key)\n"
        "  read:bm1: bm1-trusted (no key)\n"
    )
    config_file.write_text("")
    assert bxmem_inprocess("config", "check").stdout.splitlines()[-2:] == [
        "mode: local-only",
        "local-only: no [honcho] section, nothing will be sent",
    ]


def test_paths_section_sets_home_and_run(config_file, tmp_path, monkeypatch):
    monkeypatch.delenv("BOXMAKER_HOME")
    config_file.write_text(f'[paths]\nhome = "{tmp_path}/h"\nrun = "{tmp_path}/r"\n')
    data = json.loads(bxmem_inprocess("config", "check", "--json").stdout)
    assert data["home"] == f"{tmp_path}/h" and data["broker_socket"] == f"{tmp_path}/r/memory-broker/state.sock"
    assert data["mode"] == "local-only"


def test_config_flag_overrides_the_environment(tmp_path):
    other = tmp_path / "other.toml"
    other.write_text(GOOD)
    data = json.loads(bxmem_inprocess("--config", str(other), "config", "check", "--json").stdout)
    assert data["config"] == str(other) and data["mode"] == "honcho"


def test_a_stale_or_garbage_config_cache_is_a_miss_never_an_error(config_file, home):
    import marshal

    from bxmem.config import loader as config

    config_file.write_text(GOOD)
    state = home / "memory" / "bxmem"
    state.mkdir(parents=True)
    key = config._cache_key(config_file, None)
    from bxmem.start.marshal_seal import seal

    for junk in (
        b"garbage",
        seal(marshal.dumps({"key": key, "data": {"honcho": None}})),
        seal(marshal.dumps([1, 2])),
        marshal.dumps({"key": key, "data": {"honcho": None}}),
    ):
        (state / config.CACHE_FILE).write_bytes(junk)
        assert _agent(config.load()) == "boxmaker0"


def _agent(loaded: Config) -> str | None:
    return loaded.honcho.agent if loaded.honcho is not None else None


def test_the_config_cache_follows_edits(config_file, home):
    from bxmem.config import loader as config

    (home / "memory" / "bxmem").mkdir(parents=True)
    config_file.write_text(GOOD)
    assert _agent(config.load()) == "boxmaker0"
    config_file.write_text(GOOD.replace('agent = "boxmaker0"', 'agent = "boxmaker7"'))
    assert _agent(config.load()) == "boxmaker7"
    config_file.write_text(GOOD.replace('agent = "boxmaker0"', 'agent = "bad.name"'))
    with pytest.raises(Exception, match=r"honcho\.agent"):
        config.load()


def test_an_ipv6_url_with_a_port_is_accepted(config_file):
    config_file.write_text(GOOD.replace("127.0.0.1:8000", "[::1]:8000"))
    assert bxmem_main("config", "check").returncode == 0


def test_a_symlinked_key_file_is_refused_with_one_clear_line(config_file, tmp_path):
    import os

    real = tmp_path / "real.key"
    real.write_text("k-1\n")
    os.chmod(real, 0o600)
    link = tmp_path / "link.key"
    link.symlink_to(real)
    config_file.write_text(GOOD + f'[secrets.honcho_trusted]\nfile = "{link}"\n')
    for command, code in ((["config", "check"], 78), (["send"], 3)):  # send: that workspace stops
        result = bxmem_main(*command)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == code and len(lines) == 1, (command, result.stderr)
        assert f"secrets.honcho_trusted: key file {link} is a symbolic link" in lines[0]
        assert f"name the file itself ({real})" in lines[0]
        assert "Too many levels" not in lines[0]
