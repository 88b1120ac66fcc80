"""recall and ask against a real Honcho with auth on, one key per workspace (opt-in).

Skipped unless both are set:

    BXMEM_REAL_HONCHO_AUTH_URL=http://127.0.0.1:8001
    BXMEM_REAL_HONCHO_KEYS=/tmp/honcho-keys   # <workspace>.key for rigA-trusted, rigA-untrusted,
                                              # fleet-rig, rigB-trusted, rigB-untrusted (mode 600)

Agent rigA and agent rigB each send a turn and notes; then rigA recalls and
asks over its own, its untrusted, the fleet's and rigB's workspace, each with
that workspace's key only.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
from helpers import register_secret, run_bxmem, write_log

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal

URL = os.environ.get("BXMEM_REAL_HONCHO_AUTH_URL")
KEYS = Path(os.environ.get("BXMEM_REAL_HONCHO_KEYS") or "/nonexistent")
pytestmark = pytest.mark.skipif(
    not URL or not KEYS.is_dir(), reason="no real Honcho given (BXMEM_REAL_HONCHO_AUTH_URL, _KEYS)"
)


def agent(base: Path, name: str, read: str = "") -> tuple[Path, dict]:
    home = base / f"{name}-home"
    home.mkdir(parents=True)
    config = base / f"{name}.toml"
    text = (
        f'[paths]\nhome = "{home}"\n[honcho]\nurl = "{URL}"\nagent = "{name}"\nowner = "kyle"\n'
        f'trusted = "{name}-trusted"\nuntrusted = "{name}-untrusted"\nfleet = "fleet-rig"\n{read}'
    )
    secret_for = {
        f"{name}-trusted": "honcho_trusted",
        f"{name}-untrusted": "honcho_untrusted",
        "fleet-rig": "honcho_fleet",
    }
    if read:
        secret_for["rigB-trusted"] = "honcho_read_rigB"
    for ws, secret in secret_for.items():
        register_secret((KEYS / f"{ws}.key").read_text().strip())
        text += f'\n[secrets.{secret}]\nfile = "{KEYS / f"{ws}.key"}"\n'
    config.write_text(text)
    return home, {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}


def sync(home: Path, env: dict) -> None:
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        for job in ("decide", "mirror", "send"):
            result = run_bxmem(job, env=env)
            assert result.returncode == 0, (job, result.stderr)


def test_recall_and_ask_over_every_workspace_with_its_own_key(tmp_path):
    run = secrets.token_hex(4)
    word = f"zebrafish{run}"
    b_home, b_env = agent(tmp_path, "rigB")
    write_log(b_home, f"b-{run}", turn_lines(1, f"the staging cluster {word} runs k3s", "noted"))
    write_journal(
        b_home,
        [
            {
                "id": f"b{run}",
                "ts": "2026-09-27T10:00:00Z",
                "session": f"b-{run}",
                "op": "note",
                "trust": "untrusted",
                "entry": f"the vendor api {word} allows 100 calls a minute",
            }
        ],
    )
    sync(b_home, b_env)
    read = '[[honcho.read]]\nagent = "rigB"\nworkspace = "rigB-trusted"\ntrust = "trusted"\n'
    a_home, a_env = agent(tmp_path, "rigA", read)
    write_log(a_home, f"a-{run}", turn_lines(1, f"remember {word} backups run nightly", "ok"))
    write_log(
        a_home,
        f"t-{run}",
        turn_lines(1, f"read the {word} page", "done", results=[{"untrusted": True, "class": "public"}]),
    )
    sync(a_home, a_env)

    recalled = run_bxmem("recall", "--json", "-k", "8", "--", word, env=a_env)
    print("$ bxmem recall --json -k 8 --", word, "\n" + recalled.stdout, recalled.stderr)
    assert recalled.returncode == 0, recalled.stderr
    data = json.loads(recalled.stdout)
    assert data["unavailable"] == [] and set(data["answered"]) == {"local", "rigB", "fleet"}
    assert any(h["source"] == "local" for h in data["hits"])

    asked = run_bxmem(
        "ask",
        "--json",
        "--deadline",
        "150",
        "-w",
        "own",
        "-w",
        "untrusted",
        "-w",
        "fleet",
        "-w",
        "rigB",
        "--",
        f"what do you know about {word}?",
        env=a_env,
        timeout=170,
    )
    print("$ bxmem ask --json -w own -w untrusted -w fleet -w rigB -- ...\n" + asked.stdout, asked.stderr)
    answers = json.loads(asked.stdout)
    assert not [u for u in answers["unavailable"] if u["reason"].startswith("HTTP 4")], answers["unavailable"]
    assert {a["name"] for a in answers["answers"]} | {u["name"] for u in answers["unavailable"]} == {
        "own",
        "untrusted",
        "fleet",
        "rigB",
    }
    assert answers["label"]["untrusted"] is True or not answers["answers"]
