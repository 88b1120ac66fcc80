"""Which of a real Honcho's hits recall keeps, with semantic embeddings (opt-in).

Skipped unless set:

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000   # auth off; the rig's STUB_EMBED=wordllama

Another agent's workspace and a fleet are seeded over HTTP (names i19-<run>-…,
left in place); recall runs through the real CLI. A hit sharing one word with
the question is a near miss and is left out; two words (the author one of them)
keep it; a question about something never written there gets no Honcho hit.
"""

from __future__ import annotations

import json
import os
import secrets
import time

import pytest
from helpers import run_bxmem, write_log

from bxmem.commands import decide
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines

URL = os.environ.get("BXMEM_REAL_HONCHO_URL")
pytestmark = pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")


def _seed(run: str) -> tuple[str, str]:
    import httpx

    other, fleet = f"i19-{run}-b", f"i19-{run}-fleet"
    with httpx.Client(base_url=f"{URL}/v3", timeout=30) as http:

        def post(path: str, body: dict) -> None:
            http.post(path, json=body).raise_for_status()

        for ws, peers, messages in (
            (
                other,
                ["agentb", "nina", "tom"],
                [
                    ("nina", "ziggy kept me up all night, silly cat"),
                    ("agentb", "Oh no, sleep well."),
                    ("tom", "the gecko backups failed again last night"),
                    ("tom", "heads up: the gecko migration is set for june 14"),
                ],
            ),
            (fleet, ["agentc"], [("agentc", "the okapi queue is stuck, restart it before noon")]),
        ):
            post("/workspaces", {"id": ws})
            for peer in peers:
                post(f"/workspaces/{ws}/peers", {"id": peer})
            post(f"/workspaces/{ws}/sessions", {"id": "s1", "peers": {p: {} for p in peers}})
            post(
                f"/workspaces/{ws}/sessions/s1/messages",
                {"messages": [{"peer_id": p, "content": c} for p, c in messages]},
            )
    return other, fleet


def _recall(question: str) -> dict:
    result = run_bxmem("recall", "--json", "-k", "8", "--", question)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _remote(data: dict) -> list[str]:
    return [h["text"] for h in data["hits"] if h["source"] != "local"]


def test_a_near_miss_is_dropped_an_answer_kept(home, brokerd, config_file):
    run = secrets.token_hex(3)
    other, fleet = _seed(run)
    config_file.write_text(
        f'[honcho]\nurl = "{URL}"\nagent = "i19a"\nowner = "kyle"\ntrusted = "i19-{run}-a-trusted"\n'
        f'untrusted = "i19-{run}-a-untrusted"\nfleet = "{fleet}"\n'
        f'[[honcho.read]]\nagent = "agentb"\nworkspace = "{other}"\ntrust = "trusted"\n'
    )
    write_log(home, "s", turn_lines(1, "where do the marmot logs go", "to the numbat nas"))
    decide.run(config_module.load())
    deadline = time.monotonic() + 20  # semantic matches wait for the messages' embeddings
    while True:
        migration = _recall("when is the gecko migration?")
        if _remote(migration) or time.monotonic() > deadline:
            break
        time.sleep(1)
    print("gecko migration:", _remote(migration))
    assert "heads up: the gecko migration is set for june 14" in _remote(migration)
    assert "the gecko backups failed again last night" not in _remote(migration)  # one word: a near miss
    cat = _recall("what is nina's cat called?")
    print("nina's cat:", _remote(cat))
    assert "ziggy kept me up all night, silly cat" in _remote(cat)  # nina wrote it: her name is one of its words
    okapi = _recall("is the okapi queue still stuck?")
    assert [h["peer"] for h in okapi["hits"] if h["source"] == "fleet"] == ["agentc"]
    never = _recall("what did we budget for the marmoset offsite?")
    print("never said:", _remote(never))
    assert _remote(never) == [] and {"agentb", "fleet"} <= set(never["answered"])
