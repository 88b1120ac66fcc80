"""`bxmem init`: a commented configuration for one agent, never over one, and a home
every job accepts; what it writes passes `bxmem config check`."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, bxmem_inprocess, register_secret, write_log

from bxmem.demo.sample import turn_lines


@pytest.fixture
def owner_env(tmp_path, monkeypatch) -> Path:
    """A user as a new owner is: HOME only, nothing of bxmem's named in the environment."""
    user = tmp_path / "user"
    user.mkdir()
    for name in ("BOXMAKER_HOME", "BXMEM_CONFIG", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(user))
    return user


def keys_in(folder: Path, mode: int = 0o600) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for role in ("trusted", "untrusted", "fleet"):
        path = folder / f"honcho-{role}.key"
        path.write_text(register_secret(f"key-for-{role}-0123456789") + "\n")
        path.chmod(mode)
    return folder


def config_of(user: Path) -> Path:
    return user / ".config" / "boxmaker" / "bxmem.toml"


def home_of(user: Path) -> Path:
    return user / ".local" / "share" / "boxmaker"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


VARIANTS = {
    "honcho": ["--url", "http://127.0.0.1:9", "--agent", "boxmaker0", "--owner", "kyle"],
    "workspaces named": [
        "--url",
        "https://honcho.example/",
        "--agent",
        "scout",
        "--owner",
        "kyle",
        "--trusted",
        "t-ws",
        "--untrusted",
        "u-ws",
        "--fleet",
        "all-of-us",
    ],
    "local-only": ["--local-only"],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_what_init_writes_passes_config_check_and_every_job_runs_on_its_home(owner_env, variant, brokerd):
    result = bxmem_inprocess("init", *VARIANTS[variant])
    assert result.returncode == 0, result.stderr
    config, home = config_of(owner_env), home_of(owner_env)
    assert mode(config) == 0o600 and mode(config.parent) == 0o700
    for folder in (home, home / "logs", home / "memory", home / "memory" / "bxmem"):
        assert folder.is_dir() and mode(folder) == 0o700, folder
    checked = bxmem_inprocess("config", "check", "--json")
    assert checked.returncode == 0, checked.stderr
    resolved = json.loads(checked.stdout)
    assert resolved["config"] == str(config) and resolved["home"] == str(home) and resolved["warnings"] == []
    assert resolved["mode"] == ("local-only" if variant == "local-only" else "honcho")
    if variant == "workspaces named":
        assert [w["workspace"] for w in resolved["workspaces"]] == ["t-ws", "u-ws", "all-of-us"]
        assert resolved["honcho_url"] == "https://honcho.example"
    if variant == "honcho":
        assert [w["workspace"] for w in resolved["workspaces"]] == ["boxmaker0-trusted", "boxmaker0-untrusted", "fleet"]
    # The brokerd stand-in listens in the fixture's home: the jobs' own brokerd is down, which they say (exit 3).
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    for job in ("decide", "mirror", "send"):
        assert bxmem_inprocess(job).returncode in (0, 3), job
    assert result.stdout.splitlines()[-4:] == [
        "next:",
        "  bxmem doctor         check the setup end to end",
        "  bxmem units install  run the jobs under systemd, as you (--system: the system manager)",
        "  bxmem sync           see where everything stands",
    ]


def test_keys_from_a_folder_are_checked_as_every_command_checks_them(owner_env, tmp_path):
    folder = keys_in(tmp_path / "keys")
    result = bxmem_inprocess(
        "init", "--url", "http://127.0.0.1:9", "--agent", "a0", "--owner", "kyle", "--keys", str(folder)
    )
    assert result.returncode == 0, result.stderr
    checked = json.loads(bxmem_inprocess("config", "check", "--json").stdout)
    assert [w["key"] for w in checked["workspaces"]] == [
        str(folder / f"honcho-{r}.key") for r in ("trusted", "untrusted", "fleet")
    ]
    assert checked["warnings"] == []
    assert "key-for" not in config_of(owner_env).read_text()  # the file names the keys' files, never a key


@pytest.mark.parametrize(
    ("problem", "code", "said"),
    [
        ("open to others", 78, "secrets.honcho_trusted: key file"),
        ("missing", 6, "init: no key file"),
    ],
)
def test_a_key_file_bxmem_would_refuse_stops_init_before_anything_is_written(owner_env, tmp_path, problem, code, said):
    folder = keys_in(tmp_path / "keys", mode=0o644 if problem == "open to others" else 0o600)
    if problem == "missing":
        (folder / "honcho-untrusted.key").unlink()
    result = bxmem_inprocess(
        "init", "--url", "http://127.0.0.1:9", "--agent", "a0", "--owner", "kyle", "--keys", str(folder)
    )
    assert result.returncode == code and said in result.stderr and len(result.stderr.splitlines()) == 1
    assert not config_of(owner_env).exists() and not home_of(owner_env).exists()


def test_init_never_writes_over_a_configuration(owner_env):
    config = config_of(owner_env)
    config.parent.mkdir(parents=True)
    config.write_text("# mine\n")
    result = bxmem_inprocess("init", "--local-only")
    assert result.returncode == 6
    assert result.stderr == (
        f"bxmem: error: {config} exists: bxmem init never writes over a configuration (bxmem "
        "config check shows what it holds)\n"
    )
    assert config.read_text() == "# mine\n" and not home_of(owner_env).exists()
    config.unlink()
    config.symlink_to(owner_env / "elsewhere.toml")  # a link to nothing: writing there would write through it
    assert bxmem_inprocess("init", "--local-only").returncode == 6
    assert not (owner_env / "elsewhere.toml").exists()


def test_off_a_terminal_init_asks_nothing_and_says_what_is_missing(owner_env):
    bare = bxmem_inprocess("init")
    assert (bare.returncode, bare.stderr) == (
        2,
        "bxmem: error: init: name the Honcho server with --url URL, or "
        "--local-only (off a terminal, init asks nothing)\n",
    )
    half = bxmem_inprocess("init", "--url", "http://127.0.0.1:9")
    assert (half.returncode, half.stderr) == (
        2,
        "bxmem: error: init: --agent and --owner must be given (off a terminal, init asks nothing)\n",
    )
    assert not config_of(owner_env).exists() and not home_of(owner_env).exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--owner", "kyle smith"], "init: --owner 'kyle smith' is not a name a chat speaker can have"),
        (["--agent", "box maker"], "init: --agent 'box maker' must be 1 to 512 characters"),
        (["--agent", "fleet"], "init: --agent 'fleet' is a name recall or ask gives a source of its own"),
        (["--fleet", "a0-trusted"], "init: bxmem.toml: honcho: trusted, untrusted and fleet must be three different"),
        (["--url", "ftp://x"], "init: --url 'ftp://x' must be an http:// or https:// URL"),
    ],
)
def test_a_value_a_job_would_refuse_is_refused_by_init(owner_env, args, said):
    given = {"--url": "http://127.0.0.1:9", "--agent": "a0", "--owner": "kyle"}
    given.update(dict(zip(args[::2], args[1::2], strict=True)))
    result = bxmem_inprocess("init", *[w for pair in given.items() for w in pair])
    assert result.returncode == 2 and said in result.stderr.replace(str(config_of(owner_env)), "bxmem.toml"), (
        result.stderr
    )
    assert not config_of(owner_env).exists()


def test_an_owner_named_as_chats_name_them_becomes_the_peer_a_speaker_of_that_name_is(owner_env):
    from bxmem.trust.rules import speaker_peer

    result = bxmem_inprocess("init", "--url", "http://127.0.0.1:9", "--agent", "a0", "--owner", "Kyle.B")
    assert result.returncode == 0
    assert "the owner 'Kyle.B' is the peer 'kyle_Dot_b' in Honcho, as a chat speaker of that name is" in result.stdout
    owner = json.loads(bxmem_inprocess("config", "check", "--json").stdout)["owner"]
    assert owner == "kyle_Dot_b" and speaker_peer("Kyle.B", "a0", owner) == (owner, None)


def test_a_home_named_in_the_shell_is_written_into_the_configuration(owner_env, tmp_path, monkeypatch):
    """The units do not see the owner's shell: the file names the home the shell did."""
    elsewhere = tmp_path / "srv" / "box"
    monkeypatch.setenv("BOXMAKER_HOME", str(elsewhere))
    assert bxmem_inprocess("init", "--local-only").returncode == 0
    assert f'home = "{elsewhere}"' in config_of(owner_env).read_text() and elsewhere.is_dir()
    monkeypatch.delenv("BOXMAKER_HOME")
    assert json.loads(bxmem_inprocess("config", "check", "--json").stdout)["home"] == str(elsewhere)


def test_a_configuration_named_elsewhere_is_written_there_and_the_next_steps_say_how_to_find_it(owner_env, tmp_path):
    named = tmp_path / "etc" / "bxmem.toml"
    result = bxmem_inprocess("--config", str(named), "init", "--local-only", "--home", str(tmp_path / "h"))
    assert result.returncode == 0 and named.exists() and not config_of(owner_env).exists()
    assert f"  export BXMEM_CONFIG={named}" in result.stdout
    assert bxmem_inprocess("--config", str(named), "config", "check").returncode == 0


def test_an_existing_home_is_left_as_it_is_and_a_file_where_a_folder_goes_is_refused(owner_env):
    home = home_of(owner_env)
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "s.jsonl").write_text("")
    (home / "memory").write_text("not a folder")
    result = bxmem_inprocess("init", "--local-only")
    assert result.returncode == 6 and result.stderr == (
        f"bxmem: error: {home / 'memory'} exists and is not a folder: the Boxmaker home needs it to be one\n"
    )
    assert not config_of(owner_env).exists() and (home / "logs" / "s.jsonl").exists()


def test_at_a_terminal_init_asks_for_what_is_not_given(owner_env, tmp_path):
    """A real terminal (a pty): the prompts, their defaults, and what they write."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "HOME": str(owner_env), "USER": "kyle", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "bxmem", "init"], stdin=terminal, stdout=terminal, stderr=terminal, env=env, cwd=tmp_path
    )
    os.close(terminal)
    seen = b""
    try:
        for answer in (b"http://127.0.0.1:9\n", b"a7\n", b"\n", b"\n"):  # url, agent, owner (default), keys (none)
            deadline = time.monotonic() + 30
            prompts = seen.count(b": ")
            while seen.count(b": ") == prompts and time.monotonic() < deadline:
                if select.select([controller], [], [], 0.5)[0]:
                    seen += os.read(controller, 4096)
            os.write(controller, answer)
        assert process.wait(timeout=60) == 0
        while select.select([controller], [], [], 0.5)[0]:
            try:
                seen += os.read(controller, 4096)
            except OSError:
                break
    finally:
        process.kill()
        os.close(controller)
    text = seen.decode()
    assert "Honcho server URL (empty: local-only, nothing is sent):" in text
    assert "The owner's name, as chats name them [kyle]:" in text
    written = config_of(owner_env).read_text()
    assert 'agent = "a7"' in written and 'owner = "kyle"' in written and 'url = "http://127.0.0.1:9"' in written


def test_a_home_named_in_the_shell_and_another_given_to_init_is_said(owner_env, tmp_path, monkeypatch):
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "shell-home"))
    result = bxmem_inprocess("init", "--local-only", "--home", str(tmp_path / "given"))
    assert result.returncode == 0
    assert (
        f"note: $BOXMAKER_HOME in this shell names {tmp_path / 'shell-home'}, which wins over the home written "
        "here for every command run with it: unset it, or run bxmem init without --home"
    ) in result.stdout.splitlines()
    assert f'home = "{tmp_path / "given"}"' in config_of(owner_env).read_text()
