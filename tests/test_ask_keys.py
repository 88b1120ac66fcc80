"""A partial key set (keys for some workspaces, none for others): one rule for
every command. A workspace without a key is used without one; Honcho's auth is
on or off for the whole server, so `config check` and `sync` warn, and a
server with auth on refuses the keyless workspace (401): an unavailable line,
never a usage error (exit 2 is what the host hands the model as its bad input)."""

from __future__ import annotations

import json
import os

from helpers import bxmem_inprocess, honcho_config, register_secret

from bxmem.commands import ask, recall
from bxmem.config import loader as config_module

READ = '[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "bm1-trusted"\ntrust = "trusted"\n'
TRUSTED_KEY = register_secret("k" * 40)


def _key(tmp_path, name: str, value: str = TRUSTED_KEY) -> str:
    path = tmp_path / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, value.encode() + b"\n")
    os.close(fd)
    return f'\n[secrets.{name.removesuffix(".key")}]\nfile = "{path}"\n'


def _partial(honcho, config_file, tmp_path) -> None:
    """A key for the trusted workspace only, on a server that wants a key for both."""
    config_file.write_text(honcho_config(honcho.url) + READ + _key(tmp_path, "honcho_trusted.key"))
    honcho.keys.update({"bm0-trusted": TRUSTED_KEY, "bm1-trusted": register_secret("the-key-we-do-not-have-0b1d")})
    from bxmem.config.loader import Key
    from bxmem.honcho.client import WorkspaceClient

    for ws in ("bm0-trusted", "bm1-trusted"):
        with WorkspaceClient(honcho.url, ws, Key(honcho.keys[ws])) as client:
            client.create_peer("kyle", True)
    honcho.requests.clear()


def test_ask_uses_a_keyless_workspace_without_a_key_and_reports_the_refusal(honcho, config_file, tmp_path):
    """With keys for some workspaces, a keyless one is asked without a key and its refusal
    (HTTP 401) reported; the workspace with a key is answered, and the command succeeds."""
    _partial(honcho, config_file, tmp_path)
    result = bxmem_inprocess("ask", "--json", "-w", "own", "-w", "boxmaker1", "--", "when is it due?")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [a["name"] for a in data["answers"]] == ["own"]
    assert [(u["name"], u["reason"]) for u in data["unavailable"]] == [("boxmaker1", "HTTP 401")]
    to_b = [r for r in honcho.requests if r.path.startswith("/v3/workspaces/bm1-trusted/")]
    assert to_b and all("authorization" not in r.headers for r in to_b)


def test_ask_of_only_the_keyless_workspace_is_unavailable_not_bad_input(honcho, config_file, tmp_path):
    _partial(honcho, config_file, tmp_path)
    result = bxmem_inprocess("ask", "--json", "-w", "boxmaker1", "--", "when is it due?")
    assert (result.returncode, result.stderr) == (7, "")
    assert json.loads(result.stdout)["unavailable"] == [
        {"name": "boxmaker1", "workspace": "bm1-trusted", "reason": "HTTP 401"}
    ]


def test_recall_follows_the_same_rule(honcho, config_file, tmp_path):
    _partial(honcho, config_file, tmp_path)
    result = recall.recall(config_module.load(), "due")
    assert result.unavailable["boxmaker1"] == "HTTP 401" and "fleet" in result.answered
    assert all("authorization" not in r.headers for r in honcho.requests if "/bm1-trusted/" in r.path)


def test_config_check_and_sync_warn_and_neither_needs_attention_for_it(honcho, config_file, tmp_path, brokerd):
    """A partial key set is a warning in `config check` and `sync` (plain and --json),
    naming each keyless workspace; neither exits non-zero for it."""
    config_file.write_text(honcho_config(honcho.url) + READ + _key(tmp_path, "honcho_trusted.key"))
    warning = (
        "warning: keys are configured for some workspaces but not for bm0-untrusted ([secrets.honcho_untrusted]), "
        "fleet ([secrets.honcho_fleet]), bm1-trusted ([secrets.honcho_read_boxmaker1]): every command uses them "
        "without a key, which a Honcho server with auth on refuses (401); auth is on or off for the whole server, "
        "so add the missing keys, or remove the others if auth is off"
    )
    check = bxmem_inprocess("config", "check")
    assert (check.returncode, check.stderr) == (0, "")
    assert check.stdout.splitlines()[-1] == warning
    assert json.loads(bxmem_inprocess("config", "check", "--json").stdout)["warnings"] == [
        warning.removeprefix("warning: ")
    ]
    sync = bxmem_inprocess("sync")
    assert sync.returncode == 0, sync.stdout
    assert warning in sync.stdout.splitlines()
    assert json.loads(bxmem_inprocess("sync", "--json").stdout)["warnings"] == [warning.removeprefix("warning: ")]


def test_no_warning_when_every_workspace_or_none_has_a_key(honcho, config_file, tmp_path):
    config_file.write_text(honcho_config(honcho.url) + READ)  # a server with auth off
    assert config_module.load().keyless_among_keyed() == []
    assert not [line for line in bxmem_inprocess("config", "check").stdout.splitlines() if line.startswith("warning")]
    every = "".join(
        _key(tmp_path, f"{name}.key")
        for name in ("honcho_trusted", "honcho_untrusted", "honcho_fleet", "honcho_read_boxmaker1")
    )
    config_file.write_text(honcho_config(honcho.url) + READ + every)
    assert config_module.load().keyless_among_keyed() == []
    assert json.loads(bxmem_inprocess("config", "check", "--json").stdout)["warnings"] == []
    assert [t.name for t in ask.targets(config_module.load(), ["own", "boxmaker1"])] == ["own", "boxmaker1"]
