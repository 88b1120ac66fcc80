"""The owner's way out of stuck states, against a real Honcho (opt-in).

Skipped unless a real server is given (auth off); with auth on too (the same
database served with auth on, and a file holding its admin JWT), it runs again
with bxmem going through the auth server, a key minted for each workspace:

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000
    BXMEM_REAL_HONCHO_AUTH_URL=http://127.0.0.1:8001
    BXMEM_REAL_HONCHO_ADMIN_JWT=/tmp/honcho-rig/admin.jwt

Two agents with their own homes on one fleet, one stuck state each: alpha's
Honcho session is deleted on the server (its later turns fail with 404 for
good: one is re-sent to a new session, one dropped), bravo's trusted workspace is renamed in its configuration after a
turn was decided (held). Each owner's `sync` and `audit` before and after,
and the commands that get them out (`outbox drop`, `outbox resend`, `outbox reroute`,
`audit --accept`). Workspaces and agents are named for the run, so it shares
the server with others; what is checked is read back with the server's own
listings.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import httpx
import pytest
from helpers import register_secret, write_log
from test_real_fleet import bx, messages_in, server_post

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal

URL = os.environ.get("BXMEM_REAL_HONCHO_URL")
AUTH_URL = os.environ.get("BXMEM_REAL_HONCHO_AUTH_URL")
ADMIN_JWT = Path(os.environ.get("BXMEM_REAL_HONCHO_ADMIN_JWT") or "/nonexistent")
pytestmark = pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")
keys_on = pytest.mark.skipif(
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


def write_config(path: Path, home: Path, agent: str, trusted: str, untrusted: str, fleet: str, keyed: bool) -> dict:
    """An owner's configuration: through the auth server with a key minted per workspace
    (`keyed`), or keyless to the auth-off one."""
    text = (
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{AUTH_URL if keyed else URL}"\nagent = "{agent}"\n'
        f'owner = "kyle"\ntrusted = "{trusted}"\nuntrusted = "{untrusted}"\nfleet = "{fleet}"\n'
    )
    for role, ws in (("trusted", trusted), ("untrusted", untrusted), ("fleet", fleet)) if keyed else ():
        key = path.parent / f"{path.stem}-{ws}.key"
        key.write_text(mint(ws) + "\n")
        key.chmod(0o600)
        text += f'[secrets.honcho_{role}]\nfile = "{key}"\n'
    path.write_text(text)
    return {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(path)}


def parts(ws: str, session: str | None = None) -> list[str]:
    sessions = [session] if session else [s["id"] for s in server_post(f"/workspaces/{ws}/sessions/list")["items"]]
    return [
        m["metadata"]["bxmem_item"]
        for s in sessions
        for m in server_post(f"/workspaces/{ws}/sessions/{s}/messages/list")["items"]
        if m["metadata"].get("part") == 0
    ]


@pytest.mark.parametrize("keyed", [False, pytest.param(True, marks=keys_on)], ids=["auth-off", "auth-on-minted-keys"])
def test_a_shared_fleet_two_owners_one_stuck_state_each_both_resolved(tmp_path, keyed):
    run = secrets.token_hex(3)
    fleet = f"i21a-{run}-fleet"
    agents = {}
    for name in ("alpha", "bravo"):
        home = tmp_path / name
        (home / "memory").mkdir(parents=True)
        names = {"agent": f"i21a{run}{name}", "trusted": f"i21a-{run}-{name}-t", "untrusted": f"i21a-{run}-{name}-u"}
        env = write_config(
            tmp_path / f"{name}.toml", home, names["agent"], names["trusted"], names["untrusted"], fleet, keyed
        )
        write_journal(
            home,
            [
                {
                    "id": "j-0001",
                    "ts": "2026-09-27T10:00:00Z",
                    "session": "chan",
                    "op": "note",
                    "trust": "untrusted",
                    "entry": f"{name} notes the vendor api allows 100 calls",
                }
            ],
        )
        agents[name] = (home, env, names)
    alpha_home, alpha, a = agents["alpha"]
    bravo_home, bravo, b = agents["bravo"]
    session = f"s-{run}"

    # alpha: two turns sent, then the owner deletes the Honcho session on the server.
    write_log(alpha_home, session, turn_lines(1, "the backups run nightly", "noted") + turn_lines(2, "at 2am", "ok"))
    with StubBrokerd(alpha_home / "run" / "memory-broker" / "state.sock"):
        bx("decide", env=alpha)
    bx("mirror", env=alpha)
    bx("send", env=alpha)
    # Through the server bxmem uses: another server process on the same database may
    # still hold the session in its cache, and accept turns for it for a while.
    base, auth = (AUTH_URL, {"Authorization": f"Bearer {ADMIN_JWT.read_text().strip()}"}) if keyed else (URL, {})
    deleted = httpx.delete(
        f"{base}/v3/workspaces/{a['trusted']}/sessions/{session}", headers=auth, timeout=30, trust_env=False
    )
    print(
        f"server: DELETE {base}/v3/workspaces/{a['trusted']}/sessions/{session} -> {deleted.status_code} {deleted.text}"
    )
    assert deleted.status_code == 202
    write_log(alpha_home, session, turn_lines(3, "and on sundays", "got it") + turn_lines(4, "scratch that", "ok"))
    with StubBrokerd(alpha_home / "run" / "memory-broker" / "state.sock"):
        bx("decide", env=alpha)
    bx("send", env=alpha)
    failed = bx("sync", env=alpha, codes=(4,))
    assert "failed because Honcho deleted their session" in failed.stdout
    bx("outbox", "list", env=alpha)

    # bravo: a turn decided, then the owner renames the trusted workspace in the configuration.
    write_log(bravo_home, session, turn_lines(1, "staging runs k3s", "noted"))
    with StubBrokerd(bravo_home / "run" / "memory-broker" / "state.sock"):
        bx("decide", env=bravo)
    bx("mirror", env=bravo)
    renamed = f"i21a-{run}-bravo-home"
    bravo = write_config(tmp_path / "bravo.toml", bravo_home, b["agent"], renamed, b["untrusted"], fleet, keyed)
    bx("send", env=bravo, codes=(4,))
    held = bx("sync", env=bravo, codes=(4,))
    assert "held: 1 turn(s) and 0 edit(s) that would write to" in held.stdout
    bx("outbox", "list", env=bravo)

    # The ways out.
    bx("outbox", "drop", f"turn:{session}:4", "--reason", "the owner took it back", env=alpha)
    bx("outbox", "resend", "--all-failed", "--dry-run", env=alpha)
    bx("outbox", "resend", "--all-failed", env=alpha)
    bx("send", env=alpha)
    dropped = [
        json.loads(line)
        for line in (alpha_home / "memory" / "honcho.jsonl").read_text().splitlines()
        if '"ev":"dropped"' in line
    ]
    assert [(e["item"], e["reason"]) for e in dropped] == [(f"turn:{session}:4", "the owner took it back")]
    bx("outbox", "reroute", "--all-held", "--dry-run", env=bravo)
    bx("outbox", "reroute", "--all-held", env=bravo)
    bx("send", env=bravo)
    assert parts(a["trusted"], f"{session}-2") == [f"turn:{session}:3"]
    assert (
        parts(renamed) == [f"turn:{session}:1"]
        and server_post("/workspaces/list", {"filters": {"id": b["trusted"]}})["items"] == []
    )

    # Each owner's audit: alpha's deleted turns are missing, accepted as meant; bravo's is clean.
    found = json.loads(bx("audit", "--json", env=alpha, codes=(4,)).stdout)["discrepancies"]
    assert {(d["kind"], d["item"]) for d in found} == {
        ("missing", f"turn:{session}:1"),
        ("missing", f"turn:{session}:2"),
    }
    bx("audit", env=alpha, codes=(4,))
    bx("audit", *[f"--accept={d['id']}" for d in found], "--reason", "deleted on the server on purpose", env=alpha)
    bx("audit", env=bravo)
    bx("sync", env=alpha)
    bx("sync", env=bravo)
    notes = sorted((m["peer_id"], m["metadata"]["bxmem_item"]) for m in messages_in(fleet))
    assert notes == [(a["agent"], "edit:j-0001"), (b["agent"], "edit:j-0001")]
