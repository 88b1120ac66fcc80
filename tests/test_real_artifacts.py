"""Artifact memory against a real Honcho (opt-in), two agents in two homes.

Skipped unless a real server with auth off is given:

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000

With the same database served with auth on and its admin JWT, the routing test
runs again through that server, a key minted for each workspace (and for B's
read of A's):

    BXMEM_REAL_HONCHO_AUTH_URL=http://127.0.0.1:8001
    BXMEM_REAL_HONCHO_ADMIN_JWT=/tmp/honcho-rig/admin.jwt

Every run uses workspaces of its own (`i27-<run>-...`). What reaches Honcho is read
back with the server's own listings, not with bxmem. `-s` prints each command and
what it printed. The 1 GiB record and resolve also runs only when asked
(BXMEM_REAL_ARTIFACT_GIB=1: it writes 2 GiB under the test's folder).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

import httpx
import pytest
from helpers import register_secret, run_bxmem, write_log

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines

URL = os.environ.get("BXMEM_REAL_HONCHO_URL")
AUTH_URL = os.environ.get("BXMEM_REAL_HONCHO_AUTH_URL")
ADMIN_JWT = Path(os.environ.get("BXMEM_REAL_HONCHO_ADMIN_JWT") or "/nonexistent")
pytestmark = pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")
keys_on = pytest.mark.skipif(
    not AUTH_URL or not ADMIN_JWT.is_file(),
    reason="no real Honcho with auth on given (BXMEM_REAL_HONCHO_AUTH_URL, _ADMIN_JWT)",
)
UNTRUSTED = [{"untrusted": True, "class": "public"}]


def key_file(path: Path, workspace: str) -> str:
    """A key minted for `workspace` by the auth server, in a file of the owner's; its [secrets] lines."""
    minted = httpx.post(
        f"{AUTH_URL}/v3/keys",
        params={"workspace_id": workspace},
        headers={"Authorization": f"Bearer {ADMIN_JWT.read_text().strip()}"},
        timeout=30,
        trust_env=False,
    )
    minted.raise_for_status()
    path.write_text(register_secret(minted.json()["key"]) + "\n")
    path.chmod(0o600)
    return f'file = "{path}"\n'


def agent_home(
    tmp_path: Path, run: str, name: str, keyed: bool = False, reads: dict[str, str] | None = None
) -> tuple[Path, dict, dict]:
    """An agent's home and configuration; `reads` (agent -> workspace) its [[honcho.read]] sources, trusted."""
    home = tmp_path / name
    (home / "memory").mkdir(parents=True)
    ws = {role: f"i27-{run}-{name}-{role}" for role in ("trusted", "untrusted")} | {"fleet": f"i27-{run}-fleet"}
    config = tmp_path / f"{name}.toml"
    text = (
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{AUTH_URL if keyed else URL}"\nagent = "i27{run}{name}"\n'
        f'owner = "kyle"\ntrusted = "{ws["trusted"]}"\nuntrusted = "{ws["untrusted"]}"\nfleet = "{ws["fleet"]}"\n'
    )
    for agent, workspace in (reads or {}).items():
        text += f'[[honcho.read]]\nagent = "{agent}"\nworkspace = "{workspace}"\ntrust = "trusted"\n'
    for role, workspace in [(role, ws[role]) for role in ws] + [(f"read_{a}", w) for a, w in (reads or {}).items()]:
        if keyed:
            text += f"[secrets.honcho_{role}]\n" + key_file(tmp_path / f"{name}-{workspace}.key", workspace)
    config.write_text(text + "[artifacts]\n")
    return home, {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}, ws


def bx(*args: str, env: dict, codes: tuple[int, ...] = (0,)):
    started = time.monotonic()
    result = run_bxmem(*args, env=env, timeout=600)
    print(
        f"$ bxmem {' '.join(args)}  -> exit {result.returncode} in {time.monotonic() - started:.2f} s\n"
        f"{result.stdout}{result.stderr}",
        end="",
    )
    assert result.returncode in codes, (args, result.returncode, result.stderr)
    return result


def exports(home: Path, session: str, untrusted: bool = False) -> Path:
    write_log(home, session, turn_lines(1, "compute it", "done", results=UNTRUSTED if untrusted else None))
    folder = home / "sessions" / session / "exports"
    folder.mkdir(parents=True)
    os.chmod(folder, 0o700)
    return folder


def server_post(path: str) -> dict:
    answer = httpx.post(f"{URL}/v3{path}", json={}, params={"page": 1, "size": 100}, timeout=30, trust_env=False)
    if answer.status_code == 404:
        return {"items": []}
    answer.raise_for_status()
    return answer.json()


def messages_in(ws: str) -> list[dict]:
    out = []
    for session in server_post(f"/workspaces/{ws}/sessions/list")["items"]:
        out += server_post(f"/workspaces/{ws}/sessions/{session['id']}/messages/list")["items"]
    return out


@pytest.mark.parametrize("keyed", [False, pytest.param(True, marks=keys_on)], ids=["auth-off", "auth-on-minted-keys"])
def test_cards_go_where_their_sessions_turns_would_and_a_second_agent_finds_one_tainted(tmp_path, keyed):
    run = secrets.token_hex(3)
    a_home, a_env, a_ws = agent_home(tmp_path, run, "a", keyed=keyed)
    with StubBrokerd(a_home / "run" / "memory-broker" / "state.sock", {"s-secret": ("secret", False)}):
        for session, untrusted, name, summary in (
            ("s-clean", False, "cohort.csv", f"Kangaroo cohort response table {run}, clean session."),
            ("s-web", True, "vendor.txt", f"Dingo vendor price list {run}, read from a web page."),
            ("s-secret", False, "vault.txt", f"Bilby vault figures {run}, a secret session."),
        ):
            (exports(a_home, session, untrusted) / name).write_bytes(summary.encode() * 20)
            bx(
                "artifact",
                "record",
                "--session",
                session,
                "--json",
                "--",
                name,
                "--title",
                f"{session} result",
                "--summary",
                summary,
                env=a_env,
            )
    bx("artifact", "list", env=a_env)
    bx("send", env=a_env)
    cards = {
        role: [m for m in messages_in(ws) if (m.get("metadata") or {}).get("role") == "card"]
        for role, ws in a_ws.items()
    }
    print(
        "cards in Honcho:", {role: [m["content"].split("\n")[1][:60] for m in found] for role, found in cards.items()}
    )
    assert [m["content"].split("\n")[1] for m in cards["trusted"]] == [
        f"Kangaroo cohort response table {run}, clean session."
    ]
    assert [m["content"].split("\n")[1] for m in cards["untrusted"]] == [
        f"Dingo vendor price list {run}, read from a web page."
    ]
    assert cards["fleet"] == []
    everywhere = [m["content"] for ws in a_ws.values() for m in messages_in(ws)]
    assert not any("Bilby vault" in text for text in everywhere), "the secret session's card left the host"
    assert all(m["peer_id"] == f"i27{run}a" for found in cards.values() for m in found)
    assert not any("cohort.csv" in text or str(a_home) in text for text in everywhere)
    bx("audit", env=a_env)

    _b_home, b_env, _b_ws = agent_home(tmp_path, run, "b", keyed=keyed, reads={f"i27{run}a": a_ws["trusted"]})
    found: list[dict] = []
    for _ in range(30):
        out = json.loads(bx("recall", "--json", "--", "kangaroo", "cohort", "response", run, env=b_env).stdout)
        found = [h for h in out["hits"] if h["where"].startswith("artifact")]
        if found:
            break
        time.sleep(2)
    assert found and found[0]["tag"] == "memory-tainted" and found[0]["where"] == "artifact-bytes-elsewhere"
    assert out["label"]["untrusted"] is True
    clean = json.loads(bx("artifact", "list", "--json", env=a_env).stdout)["cards"]
    kangaroo = next(c for c in clean if c["title"] == "s-clean result")
    for ident in (kangaroo["experiment_id"], kangaroo["artifact_id"]):
        bx("artifact", "resolve", "--json", "--", ident, env=b_env, codes=(5,))
    got = json.loads(bx("artifact", "resolve", "--json", "--", kangaroo["experiment_id"], env=a_env).stdout)
    assert got["label"] == {"untrusted": False, "class": "private"} and Path(got["path"]).is_file()


@pytest.mark.skipif(os.environ.get("BXMEM_REAL_ARTIFACT_GIB") != "1", reason="writes 2 GiB: BXMEM_REAL_ARTIFACT_GIB=1")
def test_a_1_gib_artifact_is_recorded_resolved_and_its_card_sent(tmp_path):
    run = secrets.token_hex(3)
    home, env, ws = agent_home(tmp_path, run, "g")
    folder = exports(home, "s-big")
    piece = os.urandom(1 << 20)
    with open(folder / "big.bin", "wb") as f:
        for n in range(1024):
            f.write(n.to_bytes(8, "little") + piece[8:])
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        kept = json.loads(
            bx(
                "artifact",
                "record",
                "--session",
                "s-big",
                "--json",
                "--",
                "big.bin",
                "--summary",
                f"One GiB synthetic result {run}.",
                env=env,
            ).stdout
        )
    assert kept["bytes"] == 1 << 30 and kept["honcho_queued"]
    got = json.loads(bx("artifact", "resolve", "--json", "--", kept["experiment_id"], env=env).stdout)
    assert Path(got["path"]).stat().st_size == 1 << 30
    bx("send", env=env)
    assert [m["metadata"]["artifact"] for m in messages_in(ws["trusted"])] == [kept["artifact_id"]]
