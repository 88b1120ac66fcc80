"""A real Honcho's answers pass bxmem's checks and fit its caps (opt-in).

Skipped unless a real server with auth off is given:

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000

Every answer bxmem reads (created ids, pages of messages, conclusions,
sessions and peers, search, conclusion query, chat) is parsed by
honcho/answers.py: none may be refused as unusable. The largest messages the
server takes (25,000 characters of 4-byte and of escaped characters) must
fit the per-message size the caps assume. Workspaces are this run's own.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import httpx
import pytest
from helpers import run_bxmem, write_log

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.formats.timestamps import format_time
from bxmem.honcho.client import WorkspaceClient
from bxmem.honcho.http import MESSAGE_BYTES, cap_messages
from bxmem.store.ledger import Ledger
from bxmem.store.ledger_events import attempt

URL = os.environ.get("BXMEM_REAL_HONCHO_URL", "")
pytestmark = pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")


def agent(base: Path, name: str, run: str, read: str = "") -> dict:
    home = base / f"{name}-home"
    home.mkdir(parents=True)
    config = base / f"{name}.toml"
    config.write_text(
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{URL}"\nagent = "{name}"\nowner = "kyle"\n'
        f'trusted = "i18b-{run}-{name}-t"\nuntrusted = "i18b-{run}-{name}-u"\nfleet = "i18b-{run}-fleet"\n{read}'
    )
    return {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config), "home": str(home)}


def bx(*args: str, env: dict, codes: tuple[int, ...] = (0,)):
    result = run_bxmem(*args, env={k: v for k, v in env.items() if k != "home"}, timeout=170)
    print(f"$ bxmem {' '.join(args)}  -> exit {result.returncode}\n{result.stdout}{result.stderr}", end="")
    assert "not usable" not in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert result.returncode in codes, (args, result.returncode, result.stderr)
    return result


def test_every_answer_bxmem_reads_from_a_real_honcho_is_usable(tmp_path):
    run = secrets.token_hex(3)
    word = f"axolotl{run}"
    a = agent(tmp_path, "rigA", run)
    home = Path(a["home"])
    write_log(
        home,
        "s1",
        turn_lines(1, f"remember the {word} backups run nightly", "noted")
        + turn_lines(2, "and they go to the NAS", "ok"),
    )
    write_journal(
        home,
        [
            {
                "id": "e1",
                "ts": "2026-12-01T10:00:00Z",
                "session": "s1",
                "op": "identity_add",
                "file": "user.md",
                "entry": f"Kyle keeps the {word} backups on the NAS",
            },
            {
                "id": "e2",
                "ts": "2026-12-01T10:01:00Z",
                "session": "s1",
                "op": "note",
                "trust": "untrusted",
                "entry": f"the {word} vendor api allows 100 calls a minute",
            },
        ],
    )
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        bx("decide", env=a)
    bx("mirror", env=a)
    sent = json.loads(bx("send", "--json", env=a).stdout)  # created ids of messages and conclusions, parsed
    assert sent["sent"] == 4 and sent["failed"] == 0

    # An in-doubt turn and an in-doubt edit, looked up in real pages before anything is sent again.
    write_log(home, "s1", turn_lines(3, f"the {word} restore test passed", "good"))
    write_journal(
        home,
        [
            {
                "id": "e3",
                "ts": "2026-12-01T10:02:00Z",
                "session": "s1",
                "op": "identity_add",
                "file": "user.md",
                "entry": f"Kyle tests {word} restores monthly",
            }
        ],
    )
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        bx("decide", env=a)
    bx("mirror", env=a)
    ledger = Ledger(home / "memory" / "honcho.jsonl")
    old = format_time(1e9)  # an attempt long ago: looked up at once
    ledger.append(
        [
            {
                **attempt(
                    old,
                    items=["turn:s1:3"],
                    ws=f"i18b-{run}-rigA-t",
                    role="trusted",
                    session="s1",
                    hsession="s1",
                    parts={"turn:s1:3": 2},
                )
            }
        ]
    )
    ledger.close()
    sent = json.loads(bx("send", "--json", env=a).stdout)
    assert sent["sent"] == 2 and sent["failed"] == 0
    bx("undo", "e1", env=a)
    assert json.loads(bx("send", "--json", env=a).stdout)["sent"] == 1  # a real conclusion id, deleted by path
    audited = json.loads(bx("audit", "--json", env=a).stdout)  # sessions, messages, conclusions: real pages
    assert audited["discrepancies"] == [] and audited["messages"] >= 6

    read = f'[[honcho.read]]\nagent = "rigA"\nworkspace = "i18b-{run}-rigA-t"\ntrust = "trusted"\n'
    b = agent(tmp_path, "rigB", run, read)
    recalled = json.loads(bx("recall", "--json", "-k", "8", "--", word, env=b).stdout)  # schema-checked (conftest)
    real = [h for h in recalled["hits"] if h["source"] == "rigA"]
    assert real and all(h["peer"] in ("kyle", "rigA") and h["date"] and h["date"].endswith("Z") for h in real)
    assert "(invalid id)" not in json.dumps(recalled)
    asked = json.loads(bx("ask", "--json", "-w", "rigA", "--", f"what about {word}?", env=b).stdout)
    assert [x["peers"] for x in asked["answers"]] == [["rigA", "kyle"]] or asked["answers"][0]["peers"] is None


@pytest.mark.parametrize("char", ["\U0001f4e6", "\x01"], ids=["4-byte", "escaped"])
def test_the_largest_messages_a_real_honcho_takes_fit_the_caps(char):
    """25,000 characters each, as many as the server allows of the widest kinds: each
    answered message is within MESSAGE_BYTES, and bxmem reads the page back whole."""
    ws = f"i18b-{secrets.token_hex(3)}-caps"
    base = f"{URL}/v3/workspaces"
    with httpx.Client(trust_env=False, timeout=120) as http:
        http.post(base, json={"id": ws}).raise_for_status()
        http.post(f"{base}/{ws}/sessions", json={"id": "s", "peers": {"p": {}}}).raise_for_status()
        answer = http.post(
            f"{base}/{ws}/sessions/s/messages",
            json={"messages": [{"peer_id": "p", "content": char * 25_000, "metadata": {"n": n}} for n in range(4)]},
        )
        answer.raise_for_status()
    per_message = len(answer.content) / 4
    print(f"{char!r} x 25,000: {per_message:,.0f} bytes a message answered (the caps allow {MESSAGE_BYTES:,})")
    assert per_message <= MESSAGE_BYTES
    with WorkspaceClient(URL, ws, None) as client:
        listed = list(client.list_messages("s"))
    assert [len(m["content"]) for m in listed] == [25_000] * 4
    assert 4 * per_message < cap_messages(4)
