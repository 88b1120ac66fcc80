"""Per-workspace keys: sent to their own workspace only, never shown, refusals contained."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import PLANTED_ENV_KEY, bxmem_main, ledger_events, register_secret, write_log

from bxmem.demo.sample import turn_lines

TRUSTED_KEY = register_secret("trusted-key-5d1c7e0f9a")
UNTRUSTED_KEY = register_secret("untrusted-key-88b2e4a1c3")


def key_file(tmp_path: Path, name: str, value: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(value + "\n")
    os.chmod(path, mode)
    return path


@pytest.fixture
def two_sessions(home, brokerd):
    write_log(home, "clean", turn_lines(1, "hello", "hi"))
    write_log(home, "tainted", turn_lines(1, "fetch", "ok", results=[{"untrusted": True, "class": "public"}]))


def secrets_section(**files: Path) -> str:
    return "".join(f'\n[secrets.{name}]\nfile = "{path}"\n' for name, path in files.items())


def everything_written(home: Path) -> str:
    text = []
    for path in home.rglob("*"):
        if path.is_file() and not path.is_socket():
            text.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(text)


def test_key_is_sent_to_its_own_workspace_only(home, tmp_path, honcho, configure, two_sessions):
    honcho.keys["bm0-trusted"] = TRUSTED_KEY
    configure(honcho.url, extra=secrets_section(honcho_trusted=key_file(tmp_path, "t.key", TRUSTED_KEY)))
    outputs = [
        bxmem_main("decide"),
        bxmem_main("send"),
        bxmem_main("config", "check"),
        bxmem_main("config", "check", "--json"),
    ]
    assert all(o.returncode == 0 for o in outputs), [o.stderr for o in outputs]
    assert honcho.messages_in("bm0-trusted") and honcho.messages_in("bm0-untrusted")
    for request in honcho.requests:
        auth = request.headers.get("authorization")
        if "bm0-trusted" in request.path or (request.body or {}).get("id") == "bm0-trusted":
            assert auth == f"Bearer {TRUSTED_KEY}"
        else:
            assert auth is None, request.path  # no key configured: no header at all
    for output in outputs:
        assert TRUSTED_KEY not in output.stdout + output.stderr
    assert TRUSTED_KEY not in everything_written(home)
    assert PLANTED_ENV_KEY not in everything_written(home)


def test_a_refused_key_stops_that_workspace_only_logged_once_and_resumes(
    home, tmp_path, honcho, configure, two_sessions
):
    honcho.keys["bm0-untrusted"] = UNTRUSTED_KEY
    wrong = key_file(tmp_path, "u.key", register_secret("not-the-right-key-00"))
    configure(honcho.url, extra=secrets_section(honcho_untrusted=wrong))
    bxmem_main("decide")
    first = bxmem_main("send", "--json")
    assert first.returncode == 3
    assert json.loads(first.stdout)["stopped"] == ["bm0-untrusted"]
    assert "refused the key for workspace bm0-untrusted (HTTP 401)" in first.stderr
    assert "honcho-key-refused" in first.stderr
    assert "not-the-right-key" not in first.stderr + first.stdout
    assert honcho.messages_in("bm0-trusted") and not honcho.messages_in("bm0-untrusted")

    calls = len(honcho.requests)
    second = bxmem_main("send")
    assert "honcho-key-refused" not in second.stderr
    assert len(honcho.requests) == calls  # the stopped workspace is not tried again

    key_file(tmp_path, "u.key", UNTRUSTED_KEY)  # the owner fixes the key
    third = bxmem_main("send", "--json")
    assert third.returncode == 0, third.stderr
    assert "resuming" in third.stderr
    assert [m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-untrusted")] == ["turn:tainted:1"] * 2
    assert [e["ev"] for e in ledger_events(home) if e["ev"].startswith("key_")] == ["key_refused", "key_resumed"]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_key_file_others_can_read_is_refused(tmp_path, honcho, configure, mode, two_sessions):
    configure(honcho.url, extra=secrets_section(honcho_trusted=key_file(tmp_path, "t.key", TRUSTED_KEY, mode)))
    bxmem_main("decide")
    result = bxmem_main("send")
    assert result.returncode == 3  # that workspace stops; the others go on
    assert (
        f"has mode {mode:04o}: group or others can read it" in result.stderr and "honcho-key-refused" in result.stderr
    )
    assert TRUSTED_KEY not in result.stderr
    assert len([line for line in result.stderr.splitlines() if "error" in line]) == 1
    assert honcho.messages_in("bm0-untrusted") and not honcho.messages_in("bm0-trusted")


def test_an_unreadable_key_file_is_one_clear_line(tmp_path, honcho, configure, two_sessions):
    configure(honcho.url, extra=secrets_section(honcho_trusted=tmp_path / "missing.key"))
    result = bxmem_main("config", "check")
    assert result.returncode == 78
    assert (
        f"secrets.honcho_trusted: key file {tmp_path / 'missing.key'} cannot be read: No such file or directory"
        in result.stderr
    )


def test_the_environment_never_supplies_a_key(home, honcho, configure, two_sessions):
    honcho.keys["bm0-trusted"] = PLANTED_ENV_KEY  # only the environment's key would pass
    configure(honcho.url)
    bxmem_main("decide")
    result = bxmem_main("send", "--json")
    assert json.loads(result.stdout)["stopped"] == ["bm0-trusted"]
    assert not honcho.messages_in("bm0-trusted")
