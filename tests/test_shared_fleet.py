"""Two agents on one fleet, with the same journal id in the same session name:
neither takes the other's note for its own, and neither audit reports the
other's notes."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers import ledger_events, write_log

from bxmem.commands import audit, decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.honcho.api import settle_wait_s

T0 = 2_000_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def agent(tmp_path, url: str, name: str, run_dir) -> tuple:
    home = tmp_path / f"{name}-home"
    (home / "memory").mkdir(parents=True)
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'[honcho]\nurl = "{url}"\nagent = "{name}"\nowner = "kyle"\ntrusted = "{name}-trusted"\n'
        f'untrusted = "{name}-untrusted"\nfleet = "fleet"\n[paths]\nrun = "{run_dir}"\n'
    )
    return config, home


def load(config, home):
    return config_module.load(config, home=home)


def note(entry: str, n: str = "j-0001", session: str = "chan") -> dict:
    return {
        "id": n,
        "ts": "2026-09-27T10:00:00Z",
        "session": session,
        "op": "note",
        "trust": "untrusted",
        "entry": entry,
    }


def fleet_notes(honcho) -> Counter:
    return Counter((m["peer_id"], m["metadata"]["bxmem_item"], m["content"]) for m in honcho.messages_in("fleet"))


@pytest.fixture
def two(tmp_path, home, honcho):
    a = agent(tmp_path, honcho.url, "alpha", home / "run")
    b = agent(tmp_path, honcho.url, "bravo", home / "run")
    return a, b


def test_an_in_doubt_note_is_not_taken_for_the_other_agents_note_with_the_same_id(two, honcho):
    (a_cfg, a_home), (b_cfg, b_home) = two
    write_journal(a_home, [note("alpha's note about the vendor api")])
    write_journal(b_home, [note("bravo's note about the staging cluster")])
    mirror.run(load(a_cfg, a_home))
    mirror.run(load(b_cfg, b_home))
    clock = Clock()
    # alpha's post gets no answer: in doubt. Then bravo's note, same id, same session, arrives.
    honcho.inject("status", match=r"^POST /v3/workspaces/fleet/sessions/chan/messages$", status=503)
    assert send.run(load(a_cfg, a_home), clock=clock).outage
    assert send.run(load(b_cfg, b_home), clock=clock).sent == 1
    clock.now += settle_wait_s() + 1
    report = send.run(load(a_cfg, a_home), clock=clock)
    assert report.sent == 1 and not report.outage
    assert fleet_notes(honcho) == Counter(
        {
            ("alpha", "edit:j-0001", "alpha's note about the vendor api"): 1,
            ("bravo", "edit:j-0001", "bravo's note about the staging cluster"): 1,
        }
    )
    sent = [e for e in ledger_events(a_home) if e["ev"] == "sent"]
    assert len(sent) == 1 and not sent[0].get("settled")
    ours = {m["id"] for m in honcho.messages_in("fleet") if m["peer_id"] == "alpha"}
    assert set(sent[0]["results"][0]["ids"]) == ours
    for cfg, home in two:
        result = audit.audit(load(cfg, home))
        assert result.discrepancies == [] and result.exit_code == 0, result.discrepancies


def test_both_audits_are_clean_in_a_shared_fleet_with_the_same_ids(two, honcho):
    (a_cfg, a_home), (b_cfg, b_home) = two
    for cfg, home, who in ((a_cfg, a_home, "alpha"), (b_cfg, b_home, "bravo")):
        write_journal(home, [note(f"{who} one"), note(f"{who} two", "j-0002"), note(f"{who} three", "j-0003", "other")])
        mirror.run(load(cfg, home))
        assert send.run(load(cfg, home)).sent == 3
    assert sum(fleet_notes(honcho).values()) == 6 and set(fleet_notes(honcho).values()) == {1}
    for cfg, home in two:
        result = audit.audit(load(cfg, home))
        assert (result.discrepancies, result.exit_code) == ([], 0)
    # Other agents' messages are not even listed: each audit asks for its own peer's.
    fleet_lists = [
        r
        for r in honcho.requests
        if r.path.startswith("/v3/workspaces/fleet/sessions/") and r.path.endswith("/messages/list")
    ]
    assert fleet_lists and all(r.body["filters"]["peer_id"] in ("alpha", "bravo") for r in fleet_lists)


def test_a_message_under_our_peer_that_we_never_wrote_is_still_reported(two, honcho):
    (a_cfg, a_home), _ = two
    write_journal(a_home, [note("alpha's real note")])
    mirror.run(load(a_cfg, a_home))
    send.run(load(a_cfg, a_home))
    real = next(m for m in honcho.messages_in("fleet"))
    with honcho.lock:  # another fleet member writes as alpha's peer, claiming alpha's item
        honcho.messages.append(
            {**real, "id": "forged-1", "content": "forged text", "metadata": {**real["metadata"], "part": 1}}
        )
        honcho.messages.append({**real, "id": "forged-2", "metadata": {**real["metadata"], "bxmem_agent": "bravo"}})
    result = audit.audit(load(a_cfg, a_home))
    found = {(d["kind"], d.get("message")) for d in result.discrepancies}
    assert ("not-recorded", "forged-1") in found and ("foreign-agent-message", "forged-2") in found
    assert result.exit_code == 4


def test_a_lookup_takes_only_our_peer_and_our_text_and_still_finds_old_writes(two, honcho):
    (a_cfg, a_home), _ = two
    write_journal(a_home, [note("alpha's note, to be found")])
    mirror.run(load(a_cfg, a_home))
    clock = Clock()
    honcho.inject("store-then-drop", match=r"^POST /v3/workspaces/fleet/sessions/chan/messages$")
    assert send.run(load(a_cfg, a_home), clock=clock).outage
    with honcho.lock:
        stored = next(m for m in honcho.messages_in("fleet"))
        assert stored["metadata"]["bxmem_agent"] == "alpha" and len(stored["metadata"]["bxmem_sha256"]) == 64
        # As a release before agent-qualified ids wrote it: no bxmem_agent, no hash.
        stored["metadata"] = {
            k: v for k, v in stored["metadata"].items() if not k.startswith(("bxmem_agent", "bxmem_sha"))
        }
        # Decoys: the same item and part under another peer, and under ours with other text.
        honcho.messages.insert(0, {**stored, "id": "decoy-peer", "peer_id": "bravo"})
        honcho.messages.insert(0, {**stored, "id": "decoy-text", "content": "another text"})
    clock.now += settle_wait_s() + 1
    report = send.run(load(a_cfg, a_home), clock=clock)
    assert report.sent == 1
    sent = [e for e in ledger_events(a_home) if e["ev"] == "sent"]
    assert sent[-1]["results"][0]["ids"] == [stored["id"]] and sent[-1]["results"][0].get("settled") is None
    mine = [
        m["id"]
        for m in honcho.messages_in("fleet")
        if m["peer_id"] == "alpha" and m["content"] == "alpha's note, to be found"
    ]
    assert mine == [stored["id"]]  # found, not written again


def test_a_turn_lookup_takes_each_part_only_from_the_peer_that_sent_it(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "the owner asks", "the agent answers"))
    decide.run(config_module.load())
    clock = Clock()
    honcho.inject("store-then-drop", match=r"/sessions/s/messages$")
    send.run(config_module.load(), clock=clock)
    with honcho.lock:
        speaker, reply = honcho.messages_in("bm0-trusted")
        honcho.messages.remove(speaker)
        honcho.messages.append({**speaker, "id": "wrong-peer", "peer_id": "boxmaker0"})  # part 0 as the agent
    clock.now += settle_wait_s() + 1
    send.run(config_module.load(), clock=clock)
    parts = sorted(
        (m["metadata"]["part"], m["peer_id"], m["id"] == reply["id"])
        for m in honcho.messages_in("bm0-trusted")
        if m["id"] != "wrong-peer"
    )
    assert parts == [(0, "kyle", False), (1, "boxmaker0", True)]  # part 0 sent again, from the speaker; part 1 kept
    assert json.dumps([e for e in ledger_events(home) if e["ev"] == "sent"]).count("wrong-peer") == 0


def _probe(url: str, ws: str) -> dict[str, list[tuple[str, str]]]:
    """What list-messages answers for each filter the lookups and audit use, in
    a session where two peers wrote the same `bxmem_item`."""
    import httpx

    base = f"{url}/v3/workspaces/{ws}"
    with httpx.Client(trust_env=False, timeout=30) as http:
        http.post(f"{url}/v3/workspaces", json={"id": ws}).raise_for_status()
        for peer in ("alpha", "bravo"):
            http.post(f"{base}/peers", json={"id": peer}).raise_for_status()
        http.post(f"{base}/sessions", json={"id": "chan", "peers": {"alpha": {}, "bravo": {}}}).raise_for_status()
        http.post(
            f"{base}/sessions/chan/messages",
            json={
                "messages": [
                    {
                        "peer_id": "alpha",
                        "content": "a",
                        "metadata": {"bxmem_item": "edit:j-0001", "part": 0, "bxmem_agent": "alpha"},
                    },
                    {"peer_id": "bravo", "content": "b", "metadata": {"bxmem_item": "edit:j-0001", "part": 0}},
                    {"peer_id": "alpha", "content": "c", "metadata": {"bxmem_item": "edit:j-0002", "part": 0}},
                ]
            },
        ).raise_for_status()
        filters = {
            "item": {"metadata": {"bxmem_item": "edit:j-0001"}},
            "item and peer": {"metadata": {"bxmem_item": "edit:j-0001"}, "peer_id": "alpha"},
            "peer": {"peer_id": "alpha"},
            "item and agent": {"metadata": {"bxmem_item": "edit:j-0001", "bxmem_agent": "alpha"}},
        }
        out = {}
        for name, f in filters.items():
            answer = http.post(
                f"{base}/sessions/chan/messages/list", json={"filters": f}, params={"page": 1, "size": 100}
            )
            answer.raise_for_status()
            out[name] = sorted((m["peer_id"], m["content"]) for m in answer.json()["items"])
    return out


# As Honcho 3.0.12 answered on the rig (2026-12-01, tests/test_real_fleet.py repeats it live):
# top-level filter keys are ANDed, peer_id is equality, metadata is JSONB containment.
REAL_3_0_12 = {
    "item": [("alpha", "a"), ("bravo", "b")],
    "item and peer": [("alpha", "a")],
    "peer": [("alpha", "a"), ("alpha", "c")],
    "item and agent": [("alpha", "a")],
}


def test_the_fake_filters_messages_as_the_real_server_does(honcho):
    assert _probe(honcho.url, "probe") == REAL_3_0_12
