"""ask on a real Honcho with workspace chat, keys on; and the two 404s (opt-in).

Skipped unless servers are given:

    BXMEM_REAL_HONCHO_CHAT_AUTH_URL=http://127.0.0.1:8101      # a build with workspace chat, auth on
    BXMEM_REAL_HONCHO_CHAT_ADMIN_JWT=/tmp/honcho-rig-chat/admin.jwt  # a file holding its admin JWT
    BXMEM_REAL_HONCHO_CHAT_URL=http://127.0.0.1:8100           # the same build, auth off (optional)
    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000                # 3.0.12, no workspace chat (optional)

Agent A and agent B each send turns and notes, each workspace with a key of its
own minted for it; then A asks over its own, its untrusted, the fleet's and
B's workspace. Every run uses workspaces of its own (`i21b-<random>-...`).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import httpx
import pytest
from helpers import register_secret, run_bxmem, write_log

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal

CHAT_AUTH_URL = os.environ.get("BXMEM_REAL_HONCHO_CHAT_AUTH_URL")
CHAT_URL = os.environ.get("BXMEM_REAL_HONCHO_CHAT_URL")
OLD_URL = os.environ.get("BXMEM_REAL_HONCHO_URL")
ADMIN_JWT = Path(os.environ.get("BXMEM_REAL_HONCHO_CHAT_ADMIN_JWT") or "/nonexistent")
keys_on = pytest.mark.skipif(
    not CHAT_AUTH_URL or not ADMIN_JWT.is_file(),
    reason="no real Honcho with workspace chat and auth given (BXMEM_REAL_HONCHO_CHAT_AUTH_URL, _ADMIN_JWT)",
)


def mint(url: str, workspace: str) -> str:
    minted = httpx.post(
        f"{url}/v3/keys",
        params={"workspace_id": workspace},
        headers={"Authorization": f"Bearer {ADMIN_JWT.read_text().strip()}"},
        timeout=30,
    )
    minted.raise_for_status()
    return register_secret(minted.json()["key"])


def agent(
    base: Path, url: str, run: str, name: str, read: str = "", keyed: bool = True, keyless: tuple[str, ...] = ()
) -> tuple[Path, dict]:
    """An agent's home and config; with `keyed`, a key minted for each of its workspaces
    (and for a read workspace, unless it is in `keyless`)."""
    home = base / f"{name}-home"
    home.mkdir(parents=True)
    own = {
        f"i21b-{run}-{name}-trusted": "honcho_trusted",
        f"i21b-{run}-{name}-untrusted": "honcho_untrusted",
        f"i21b-{run}-fleet": "honcho_fleet",
    }
    text = (
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{url}"\nagent = "{name}"\nowner = "kyle"\n'
        + "".join(f'{role} = "{ws}"\n' for ws, role in zip(own, ("trusted", "untrusted", "fleet"), strict=True))
        + read
    )
    if read:
        for line in read.split("[[honcho.read]]")[1:]:
            fields = dict(part.split(" = ") for part in line.strip().splitlines())
            other, workspace = fields["agent"].strip('"'), fields["workspace"].strip('"')
            if other not in keyless:
                own[workspace] = f"honcho_read_{other}"
    if keyed:
        for ws, secret in own.items():
            path = base / f"{ws}.key"
            path.write_text(mint(url, ws) + "\n")
            path.chmod(0o600)
            text += f'\n[secrets.{secret}]\nfile = "{path}"\n'
    config = base / f"{name}.toml"
    config.write_text(text)
    return home, {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}


def sync(home: Path, env: dict) -> None:
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        for job in ("decide", "mirror", "send"):
            result = run_bxmem(job, env=env)
            assert result.returncode == 0, (job, result.stderr)


def two_agents(tmp_path: Path, url: str, keyed: bool, keyless: tuple[str, ...] = ()) -> tuple[dict, str]:
    run = secrets.token_hex(4)
    word = f"ibis{run}"
    b_home, b_env = agent(tmp_path, url, run, "rigb", keyed=keyed)
    write_log(b_home, f"b-{run}", turn_lines(1, f"the {word} report is due friday", "noted"))
    write_journal(
        b_home,
        [
            {
                "id": f"b{run}",
                "ts": "2026-12-01T10:00:00Z",
                "session": f"b-{run}",
                "op": "note",
                "trust": "untrusted",
                "entry": f"the {word} reports move to fridays",
            }
        ],
    )
    sync(b_home, b_env)
    read = (
        f'[[honcho.read]]\nagent = "rigb"\nworkspace = "i21b-{run}-rigb-trusted"\ntrust = "trusted"\n'
        f'[[honcho.read]]\nagent = "rigc"\nworkspace = "i21b-{run}-rigc-trusted"\ntrust = "trusted"\n'
    )
    a_home, a_env = agent(tmp_path, url, run, "riga", read, keyed=keyed, keyless=keyless)
    write_log(a_home, f"a-{run}", turn_lines(1, f"remember the {word} backups run nightly", "ok"))
    write_log(
        a_home,
        f"t-{run}",
        turn_lines(1, f"read the {word} page", "done", results=[{"untrusted": True, "class": "public"}]),
    )
    write_journal(
        a_home,
        [
            {
                "id": f"a{run}",
                "ts": "2026-12-01T10:00:00Z",
                "session": f"a-{run}",
                "op": "note",
                "trust": "untrusted",
                "entry": f"a forum says the {word} cache is slow",
            }
        ],
    )
    sync(a_home, a_env)
    return a_env, word


def ask(env: dict, word: str, *names: str):
    argv = ["ask", "--json", *[w for n in names for w in ("-w", n)], "--", f"what do you know about the {word} report?"]
    result = run_bxmem(*argv, env=env, timeout=175)
    print(f"$ bxmem {' '.join(argv[:-1])} '...'\n[exit {result.returncode}]\n{result.stdout}{result.stderr}")
    return result, json.loads(result.stdout) if result.stdout.strip() else None


@keys_on
def test_ask_over_four_workspaces_by_workspace_chat_with_a_key_each(tmp_path):
    assert CHAT_AUTH_URL
    env, word = two_agents(tmp_path, CHAT_AUTH_URL, keyed=True)
    result, data = ask(env, word, "own", "untrusted", "fleet", "rigb")
    assert result.returncode == 0, result.stderr
    assert data["unavailable"] == []
    got = {a["name"]: a for a in data["answers"]}
    assert list(got) == ["own", "untrusted", "fleet", "rigb"]
    assert all(a["peers"] is None and a["note"] is None and a["text"] for a in got.values())  # workspace chat answered
    assert {n: (a["tag"], a["workspace"].split("-", 2)[-1]) for n, a in got.items()} == {
        "own": ("memory", "riga-trusted"),
        "untrusted": ("memory-tainted", "riga-untrusted"),
        "fleet": ("memory-tainted", "fleet"),
        "rigb": ("memory", "rigb-trusted"),
    }
    assert data["label"] == {"untrusted": True, "class": "private"}
    # A configured agent whose workspace holds nothing: listed empty, not created by a chat.
    result, data = ask(env, word, "rigc")
    assert result.returncode == 7
    assert [(u["name"], u["reason"]) for u in data["unavailable"]] == [("rigc", "the workspace does not exist yet")]


@keys_on
def test_a_keyless_workspace_on_a_server_with_auth_on_is_its_own_401(tmp_path):
    assert CHAT_AUTH_URL
    env, word = two_agents(tmp_path, CHAT_AUTH_URL, keyed=True, keyless=("rigb",))
    result, data = ask(env, word, "own", "rigb")
    assert result.returncode == 0, result.stderr
    assert [a["name"] for a in data["answers"]] == ["own"]
    assert [(u["name"], u["reason"]) for u in data["unavailable"]] == [("rigb", "HTTP 401")]
    check = run_bxmem("config", "check", env=env)
    assert check.returncode == 0 and "warning: keys are configured for some workspaces but not for" in check.stdout


@pytest.mark.skipif(not CHAT_URL, reason="no real Honcho with workspace chat given (BXMEM_REAL_HONCHO_CHAT_URL)")
def test_ask_by_workspace_chat_with_auth_off(tmp_path):
    assert CHAT_URL
    env, word = two_agents(tmp_path, CHAT_URL, keyed=False)
    result, data = ask(env, word, "own", "untrusted", "fleet", "rigb")
    assert result.returncode == 0 and data["unavailable"] == []
    assert [(a["name"], a["peers"]) for a in data["answers"]] == [
        ("own", None),
        ("untrusted", None),
        ("fleet", None),
        ("rigb", None),
    ]


@pytest.mark.skipif(
    not (CHAT_URL and OLD_URL), reason="both builds needed (BXMEM_REAL_HONCHO_CHAT_URL, BXMEM_REAL_HONCHO_URL)"
)
def test_the_two_404s_on_the_real_servers():
    """3.0.12 has no route ({"detail": "Not Found"}); the workspace-chat build answers
    `Workspace W not found` for a workspace it does not hold, and creates nothing."""
    from bxmem.honcho.client import Missing, ReadClient

    assert CHAT_URL and OLD_URL
    missing = f"i21b-{secrets.token_hex(4)}-nowhere"
    seen = {}
    for url in (OLD_URL, CHAT_URL):
        with ReadClient(url, missing, None) as client, pytest.raises(Missing) as raised:
            client.chat("anything?", "minimal", 30)
        seen[url] = raised.value.no_route
        with ReadClient(url, missing, None) as client:
            assert client.peer_ids() == []  # still not there
    assert seen == {OLD_URL: True, CHAT_URL: False}
