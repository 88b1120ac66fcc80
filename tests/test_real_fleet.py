"""A shared fleet and a changed configuration against a real Honcho (opt-in).

Skipped unless a real server with auth off is given:

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000

Every run uses workspaces and agent names of its own (a random suffix), so it
can share a server with other users. What is checked is read back with the
server's own listings, not with bxmem.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

import httpx
import pytest
from helpers import run_bxmem, write_log

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.formats.timestamps import format_time
from bxmem.store.ledger import Ledger
from bxmem.store.ledger_events import attempt

URL = os.environ.get("BXMEM_REAL_HONCHO_URL", "")
pytestmark = pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")


def write_config(path: Path, home: Path, agent: str, trusted: str, untrusted: str, fleet: str, extra: str = "") -> dict:
    path.write_text(
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{URL}"\nagent = "{agent}"\nowner = "kyle"\n'
        f'trusted = "{trusted}"\nuntrusted = "{untrusted}"\nfleet = "{fleet}"\n{extra}'
    )
    return {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(path)}


def bx(*args: str, env: dict, codes: tuple[int, ...] = (0,)):
    result = run_bxmem(*args, env=env)
    print(f"$ bxmem {' '.join(args)}  -> exit {result.returncode}\n{result.stdout}{result.stderr}", end="")
    assert result.returncode in codes, (args, result.returncode, result.stderr)
    return result


def server_post(path: str, body: dict | None = None) -> dict:
    answer = httpx.post(
        f"{URL}/v3{path}", json=body or {}, params={"page": 1, "size": 100}, timeout=30, trust_env=False
    )
    answer.raise_for_status()
    return answer.json()


def messages_in(ws: str) -> list[dict]:
    out = []
    for session in server_post(f"/workspaces/{ws}/sessions/list")["items"]:
        out += server_post(f"/workspaces/{ws}/sessions/{session['id']}/messages/list")["items"]
    return out


def test_two_agents_with_the_same_journal_id_in_the_same_session_both_arrive_once(tmp_path):
    run = secrets.token_hex(3)
    fleet = f"i17b-{run}-fleet"
    agents = {}
    for name, text in (
        ("alpha", "alpha notes the vendor api allows 100 calls"),
        ("bravo", "bravo notes the staging cluster runs k3s"),
    ):
        agent = f"i17b{run}{name}"
        home = tmp_path / name
        (home / "memory").mkdir(parents=True)
        env = write_config(
            tmp_path / f"{name}.toml", home, agent, f"i17b-{run}-{name}-t", f"i17b-{run}-{name}-u", fleet
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
                    "entry": text,
                }
            ],
        )
        bx("mirror", env=env)
        agents[name] = (agent, home, env, text)
    # alpha's earlier run wrote its attempt line and died before the answer: in doubt,
    # long enough ago to be looked up now. Then bravo's note, same id, same session, goes in.
    _agent, a_home, a_env, _text = agents["alpha"]
    Ledger(a_home / "memory" / "honcho.jsonl").append(
        [attempt(format_time(time.time() - 600), items=["edit:j-0001"], ws=fleet, role="fleet", session="chan")]
    )
    bx("send", env=agents["bravo"][2])
    bx("send", env=a_env)

    notes = [(m["peer_id"], m["metadata"].get("bxmem_item"), m["content"]) for m in messages_in(fleet)]
    print("the fleet holds:", json.dumps(notes, indent=1))
    assert sorted(notes) == sorted((agent, "edit:j-0001", text) for agent, _h, _e, text in agents.values())
    for _agent, _home, env, _text in agents.values():
        audit = bx("audit", "--json", env=env)
        assert json.loads(audit.stdout)["discrepancies"] == []


def test_a_swapped_configuration_holds_the_items_and_writes_nothing_to_the_read_workspace(tmp_path):
    run = secrets.token_hex(3)
    agent, trusted, untrusted, fleet = f"i17b{run}", f"i17b-{run}-t", f"i17b-{run}-u", f"i17b-{run}-f"
    home = tmp_path / "home"
    (home / "memory").mkdir(parents=True)
    config = tmp_path / "bxmem.toml"
    env = write_config(config, home, agent, trusted, untrusted, fleet)
    write_log(home, f"clean-{run}", turn_lines(1, "the backups run nightly", "noted"))
    write_log(
        home,
        f"web-{run}",
        turn_lines(
            1, "summarise that page", "it says v2 is deprecated", results=[{"untrusted": True, "class": "public"}]
        ),
    )
    write_journal(
        home,
        [
            {
                "id": "j-0001",
                "ts": "2026-09-27T10:00:00Z",
                "session": f"clean-{run}",
                "op": "note",
                "trust": "trusted",
                "entry": "the owner prefers tabs",
            }
        ],
    )
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        bx("decide", env=env)
    bx("mirror", env=env)
    # The owner's mistake: the old untrusted workspace made trusted, the old trusted one a read source.
    write_config(
        config,
        home,
        agent,
        untrusted,
        f"i17b-{run}-u2",
        fleet,
        f'[[honcho.read]]\nagent = "i17b{run}other"\nworkspace = "{trusted}"\n',
    )
    sent = bx("send", "--json", env=env, codes=(4,))
    held = json.loads(sent.stdout)["held_by_config"]
    assert {(g["workspace"], g["reason"], g["turns"] + g["edits"]) for g in held} == {
        (trusted, "read-source", 2),
        (untrusted, "role-changed", 1),
    }
    status = bx("sync", "--json", env=env, codes=(4,))
    assert {g["workspace"] for g in json.loads(status.stdout)["held"]} == {trusted, untrusted}
    bx("sync", env=env, codes=(4,))

    # The server's own listings: the read workspace was never created, and no turn is in the new trusted one.
    listed = server_post("/workspaces/list", {"filters": {"id": trusted}})["items"]
    print(
        f"server: workspaces named {trusted}: {listed}; peers there:",
        server_post(f"/workspaces/{trusted}/peers/list")["items"],
        f"; messages in {untrusted}:",
        messages_in(untrusted),
    )
    assert listed == [] and server_post(f"/workspaces/{trusted}/peers/list")["items"] == []
    assert messages_in(untrusted) == []


def test_the_real_server_filters_messages_as_the_fake_does():
    from test_shared_fleet import REAL_3_0_12, _probe

    assert _probe(URL, f"i17b-{secrets.token_hex(3)}-probe") == REAL_3_0_12
