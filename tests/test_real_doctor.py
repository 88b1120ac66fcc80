"""`bxmem doctor` and `bxmem metrics` against a real Honcho with auth on (opt-in):

    BXMEM_REAL_HONCHO_AUTH_URL=http://127.0.0.1:8001
    BXMEM_REAL_HONCHO_ADMIN_JWT=/tmp/honcho-rig/admin.jwt

Keys are minted for workspaces named for the run: the right keys pass, a wrong
key is refused, a key minted for another workspace is refused and named, the
keyless read tells auth is on; the queue is read for each workspace and nothing
is created. With BXMEM_REAL_HONCHO_URL (the same server, auth off) the keyless
read is answered and doctor warns. The real CLI, as a subprocess.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import httpx
import pytest
from helpers import register_secret, run_bxmem

from bxmem.demo.brokerd import StubBrokerd

URL = os.environ.get("BXMEM_REAL_HONCHO_URL")
AUTH_URL = os.environ.get("BXMEM_REAL_HONCHO_AUTH_URL")
ADMIN_JWT = Path(os.environ.get("BXMEM_REAL_HONCHO_ADMIN_JWT") or "/nonexistent")
pytestmark = pytest.mark.skipif(
    not AUTH_URL or not ADMIN_JWT.is_file(),
    reason="no real Honcho with auth on given (BXMEM_REAL_HONCHO_AUTH_URL, _ADMIN_JWT)",
)


def mint(workspace: str) -> str:
    minted = httpx.post(
        f"{AUTH_URL}/v3/keys",
        params={"workspace_id": workspace},
        headers={"Authorization": f"Bearer {ADMIN_JWT.read_text().strip()}"},
        timeout=30,
        trust_env=False,
    )
    minted.raise_for_status()
    return register_secret(minted.json()["key"])


def workspaces_on_server(names: list[str]) -> list[str]:
    listed = httpx.post(
        f"{AUTH_URL}/v3/workspaces/list",
        json={},
        params={"size": 100},
        headers={"Authorization": f"Bearer {ADMIN_JWT.read_text().strip()}"},
        timeout=30,
        trust_env=False,
    )
    listed.raise_for_status()
    pages = listed.json()["pages"]
    found = [w["id"] for w in listed.json()["items"]]
    for page in range(2, pages + 1):
        more = httpx.post(
            f"{AUTH_URL}/v3/workspaces/list",
            json={},
            params={"size": 100, "page": page},
            headers={"Authorization": f"Bearer {ADMIN_JWT.read_text().strip()}"},
            timeout=30,
            trust_env=False,
        )
        found += [w["id"] for w in more.json()["items"]]
    return [n for n in names if n in found]


@pytest.fixture
def owner(tmp_path, monkeypatch):
    run = secrets.token_hex(3)
    names = {role: f"i29a-{run}-{role}" for role in ("trusted", "untrusted", "fleet")}
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    broker = StubBrokerd(home / "run" / "memory-broker" / "state.sock").start()

    def configure(url: str, keys: dict[str, str]) -> None:
        text = f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{url}"\nagent = "i29a{run}"\nowner = "kyle"\n' + "".join(
            f'{role} = "{ws}"\n' for role, ws in names.items()
        )
        for role, key in keys.items():
            path = tmp_path / f"{role}.key"
            path.write_text(key + "\n")
            path.chmod(0o600)
            text += f'[secrets.honcho_{role}]\nfile = "{path}"\n'
        (tmp_path / "bxmem.toml").write_text(text)

    monkeypatch.setenv("BOXMAKER_HOME", str(home))
    monkeypatch.setenv("BXMEM_CONFIG", str(tmp_path / "bxmem.toml"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the units are this machine's, not the test's: asked, not judged
    yield names, configure
    broker.stop()


def doctor() -> tuple[int, dict]:
    result = run_bxmem("doctor", "--json")
    return result.returncode, json.loads(result.stdout)


def key_line(report: dict, ws: str) -> dict:
    return next(c for c in report["checks"] if c["check"] == "key" and c["subject"] == ws)


def test_right_keys_pass_and_a_wrong_one_or_another_workspaces_is_caught(owner):
    names, configure = owner
    keys = {role: mint(ws) for role, ws in names.items()}
    configure(AUTH_URL, keys)
    code, report = doctor()
    assert all(key_line(report, ws)["status"] == "ok" for ws in names.values()), report
    assert (
        next(c for c in report["checks"] if c["check"] == "auth")["line"]
        == "Honcho's auth: on (a request without a key is refused)"
    )
    assert [c["subject"] for c in report["checks"] if c["check"] == "queue" and c["status"] == "ok"] == list(
        names.values()
    )
    assert code in (0, 4) and not [c for c in report["checks"] if c["status"] == "failed" and c["check"] != "units"]

    other = mint(f"{names['trusted']}-other")
    configure(AUTH_URL, {**keys, "trusted": other, "untrusted": register_secret(keys["untrusted"][:-4] + "AAAA")})
    code, report = doctor()
    assert code == 4
    assert key_line(report, names["trusted"])["line"] == (
        f"key for {names['trusted']} on Honcho: refused (HTTP 401): the key was minted for workspace {names['trusted']}-other"
    )
    assert key_line(report, names["untrusted"])["line"].endswith("refused (HTTP 401): the key is wrong or expired")
    assert key_line(report, names["fleet"])["status"] == "ok"
    assert workspaces_on_server([*names.values(), f"{names['trusted']}-other"]) == []  # doctor created nothing


@pytest.mark.skipif(not URL, reason="the same server with auth off not given (BXMEM_REAL_HONCHO_URL)")
def test_auth_off_is_told(owner):
    names, configure = owner
    configure(URL, {role: mint(ws) for role, ws in names.items()})
    _code, report = doctor()
    auth = next(c for c in report["checks"] if c["check"] == "auth")
    assert auth["status"] == "warning" and auth["runbook"] == "honcho-auth-off"


def test_metrics_reads_the_queue_with_each_key(owner):
    names, configure = owner
    configure(AUTH_URL, {role: mint(ws) for role, ws in names.items()})
    result = run_bxmem("metrics")
    assert result.returncode == 0, result.stderr
    for ws in names.values():
        assert f'bxmem_honcho_queue_up{{workspace="{ws}"}} 1' in result.stdout
        assert f'bxmem_honcho_queue_work_units{{workspace="{ws}",state="pending"}} 0' in result.stdout
