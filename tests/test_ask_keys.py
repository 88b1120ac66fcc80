"""ask with per-workspace keys: a workspace with no key, in a configuration
where workspaces have keys (the server wants them), is refused before any
request (issue 13, eval case 11)."""

from __future__ import annotations

import os

import pytest
from conftest import honcho_config

from bxmem import ask
from bxmem import config as config_module
from bxmem.errors import UsageError

READ = '[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "bm1-trusted"\ntrust = "trusted"\n'


def _key(tmp_path, name: str) -> str:
    path = tmp_path / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"k" * 40 + b"\n")
    os.close(fd)
    return f'\n[secrets.{name.removesuffix(".key")}]\nfile = "{path}"\n'


def test_a_keyless_workspace_is_refused_before_any_request_when_others_have_keys(honcho, config_file, tmp_path):
    config_file.write_text(honcho_config(honcho.url) + READ + _key(tmp_path, "honcho_trusted.key"))
    honcho.requests.clear()
    with pytest.raises(UsageError, match=r"no key for workspace 'boxmaker1' \(\[secrets.honcho_read_boxmaker1\]"):
        ask.ask(config_module.load(config_file), "when is it due?", ["boxmaker1"])
    assert honcho.requests == []


def test_with_no_keys_at_all_no_workspace_needs_one(honcho, config_file):
    config_file.write_text(honcho_config(honcho.url) + READ)  # a server with auth off
    assert [t.name for t in ask.targets(config_module.load(config_file), ["own", "boxmaker1"])] == ["own", "boxmaker1"]
