"""Speaker peers, invisible text and a bad key file against a real Honcho (opt-in).

Skipped unless a server is given:

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000          # auth off
    BXMEM_REAL_HONCHO_AUTH_URL=http://127.0.0.1:8001     # auth on, with
    BXMEM_REAL_HONCHO_ADMIN_JWT=/tmp/honcho-rig/admin.jwt  # a file holding an admin JWT, to mint keys

Each run uses workspaces of its own (`i18c-<random>-...`), so a shared server is fine.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import httpx
import pytest
from helpers import register_secret, run_bxmem, write_log
from test_invisible_paths import HIDDEN
from test_sanitize import renders_as_nothing

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines

URL = os.environ.get("BXMEM_REAL_HONCHO_URL")
AUTH_URL = os.environ.get("BXMEM_REAL_HONCHO_AUTH_URL")
ADMIN_JWT = Path(os.environ.get("BXMEM_REAL_HONCHO_ADMIN_JWT") or "/nonexistent")


def agent(tmp_path: Path, url: str, keys: str = "") -> tuple[Path, dict, str]:
    run = secrets.token_hex(4)
    home = tmp_path / "home"  # the conftest home: checked for leaked keys after the test
    config = tmp_path / "real.toml"
    config.write_text(
        f'[honcho]\nurl = "{url}"\nagent = "boxmaker0"\nowner = "kyle"\n'
        f'trusted = "i18c-{run}-trusted"\nuntrusted = "i18c-{run}-untrusted"\nfleet = "i18c-{run}-fleet"\n' + keys
    )
    return home, {"BXMEM_CONFIG": str(config)}, run


def run_jobs(home: Path, env: dict, codes=(0,)) -> list:
    out = []
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        for job in ("decide", "send"):
            result = run_bxmem(job, env=env)
            assert result.returncode in codes and "Traceback" not in result.stderr, (job, result.stderr)
            out.append(result)
    return out


def listed(url: str, path: str, key: str | None = None) -> list[dict]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(f"{url}/v3/workspaces/{path}", json={}, headers=headers, params={"size": 100}, timeout=30)
    response.raise_for_status()
    return response.json()["items"]


@pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")
def test_speakers_become_one_peer_each_and_honcho_keeps_them_apart(tmp_path, home):
    """The rule's premise, on the server: peer ids that differ only in case are
    different peers (so `_Dot_`'s capital keeps `kyle.b` apart from `kyle_dot_b`)."""
    assert URL
    home, env, run = agent(tmp_path, URL)
    for n, speaker in enumerate(["kyle.b", "kyle_b", "KYLE", "kyle_dot_b", "BoxMaker0"], 1):
        write_log(home, f"s{n}", turn_lines(1, f"hello from {speaker} {HIDDEN} there", "hi" + HIDDEN, speaker=speaker))
    run_jobs(home, env)
    peers = {p["id"] for p in listed(URL, f"i18c-{run}-trusted/peers/list")}
    assert peers == {"boxmaker0", "kyle", "kyle_Dot_b", "kyle_b", "kyle_dot_b"}  # BoxMaker0 went nowhere
    texts = []
    for session in range(1, 5):
        texts += [
            (m["peer_id"], m["content"]) for m in listed(URL, f"i18c-{run}-trusted/sessions/s{session}/messages/list")
        ]
    by_peer = {peer: text for peer, text in texts if peer != "boxmaker0"}
    assert by_peer == {
        "kyle_Dot_b": "hello from kyle.b  there",
        "kyle_b": "hello from kyle_b  there",
        "kyle": "hello from KYLE  there",
        "kyle_dot_b": "hello from kyle_dot_b  there",
    }
    assert not [c for _peer, text in texts for c in text if renders_as_nothing(c)]


@pytest.mark.skipif(
    not AUTH_URL or not ADMIN_JWT.is_file(),
    reason="no real Honcho with auth given (BXMEM_REAL_HONCHO_AUTH_URL, _ADMIN_JWT)",
)
def test_a_key_file_with_an_escape_stops_its_workspace_only(tmp_path, home):
    assert AUTH_URL
    run = secrets.token_hex(4)
    admin = ADMIN_JWT.read_text().strip()
    files = {}
    keys = {}
    for role in ("trusted", "untrusted", "fleet"):
        ws = f"i18c-{run}-{role}"
        minted = httpx.post(
            f"{AUTH_URL}/v3/keys", params={"workspace_id": ws}, headers={"Authorization": f"Bearer {admin}"}, timeout=30
        )
        minted.raise_for_status()
        keys[ws] = register_secret(minted.json()["key"])
        path = tmp_path / f"{role}.key"
        path.write_bytes(keys[ws].encode() + (b"\x1b\n" if role == "trusted" else b"\n"))
        path.chmod(0o600)
        files[role] = path
    section = "".join(f'\n[secrets.honcho_{role}]\nfile = "{path}"\n' for role, path in files.items())
    config = tmp_path / "real.toml"
    config.write_text(
        f'[honcho]\nurl = "{AUTH_URL}"\nagent = "i18c{run}"\nowner = "kyle"\n'
        f'trusted = "i18c-{run}-trusted"\nuntrusted = "i18c-{run}-untrusted"\nfleet = "i18c-{run}-fleet"\n' + section
    )
    env = {"BXMEM_CONFIG": str(config)}
    write_log(home, "clean", turn_lines(1, "hello", "hi"))
    write_log(home, "tainted", turn_lines(1, "fetch", "ok", results=[{"untrusted": True, "class": "public"}]))
    _decide, sent = run_jobs(home, env, codes=(0, 3))
    assert sent.returncode == 3 and "unreachable" not in sent.stderr
    assert "has a control character (0x1b)" in sent.stderr and "sends to i18c-" in sent.stderr
    untrusted = f"i18c-{run}-untrusted"
    assert [m["content"] for m in listed(AUTH_URL, f"{untrusted}/sessions/tainted/messages/list", keys[untrusted])] == [
        "fetch",
        "ok",
    ]
    files["trusted"].write_bytes(keys[f"i18c-{run}-trusted"].encode() + b"\n")
    _decide, resumed = run_jobs(home, env)
    assert "resuming" in resumed.stderr
    trusted = f"i18c-{run}-trusted"
    assert [m["content"] for m in listed(AUTH_URL, f"{trusted}/sessions/clean/messages/list", keys[trusted])] == [
        "hello",
        "hi",
    ]
