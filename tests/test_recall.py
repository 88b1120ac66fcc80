"""The read path: the local index, `bxmem recall` and `bxmem ask`."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from helpers import bxmem_main, honcho_config, write_log

from bxmem.commands import decide, mirror, recall
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal

FETCHED = [{"untrusted": True, "class": "public"}]


def load():
    return config_module.load()


def edit(n, op, session="s1", **fields):
    return {"id": n, "ts": "2026-09-27T10:00:00Z", "session": session, "op": op, **fields}


@pytest.fixture
def agent_home(home, brokerd, honcho, configure):
    configure(honcho.url)
    write_log(home, "clean", turn_lines(1, "what about the restic backups", "nightly restic snapshots"))
    write_log(home, "tainted", turn_lines(1, "read the restic page", "restic 0.17 is out", results=FETCHED))
    write_log(home, "secretive", turn_lines(1, "the restic password", "it is in the vault"))
    brokerd.states["secretive"] = ("secret", False)
    write_journal(
        home,
        [
            edit("i1", "identity_add", file="user.md", entry="Kyle keeps restic repos on the NAS"),
            edit("n1", "note", trust="untrusted", entry="a forum says restic prune is slow"),
        ],
    )
    decide.run(load())
    mirror.run(load())
    return home


def by_text(result):
    return {hit.text: hit for hit in result.hits}


def test_local_hits_carry_their_exact_labels(agent_home, honcho):
    honcho.stop()
    result = recall.recall(load(), "restic", k=10)
    hits = by_text(result)
    assert hits["what about the restic backups\nnightly restic snapshots"].tag == "memory"
    assert hits["read the restic page\nrestic 0.17 is out"].tag == "memory-tainted"
    assert hits["the restic password\nit is in the vault"].trust_class == "secret"  # stays local, labelled
    assert hits["Kyle keeps restic repos on the NAS"].tag == "identity"
    assert hits["a forum says restic prune is slow"].tag == "memory-tainted"
    assert result.untrusted and result.trust_class == "secret"
    assert result.answered == ["local"] and set(result.unavailable) == {"fleet"}


def test_index_follows_replace_remove_and_undo(agent_home):
    from bxmem.commands import undo

    write_journal(
        agent_home,
        [
            edit(
                "i2",
                "identity_replace",
                file="user.md",
                old="Kyle keeps restic repos on the NAS",
                entry="Kyle keeps restic repos offsite",
            )
        ],
    )
    mirror.run(load())
    texts = set(by_text(recall.recall(load(), "restic repos")))
    assert "Kyle keeps restic repos offsite" in texts and "Kyle keeps restic repos on the NAS" not in texts
    undo.run(load(), "i2")
    texts = set(by_text(recall.recall(load(), "restic repos")))
    assert "Kyle keeps restic repos on the NAS" in texts and "Kyle keeps restic repos offsite" not in texts


def _docs(home: Path) -> list[tuple]:
    db = sqlite3.connect(home / "memory" / "bxmem" / "index.sqlite3")
    rows = sorted(db.execute("SELECT key, kind, tag, class, file, session, text FROM docs").fetchall())
    db.close()
    return rows


def test_rebuild_gives_the_same_index(agent_home):
    write_journal(
        agent_home, [edit("c1", "consolidate", file="user.md", dropped=["Kyle keeps restic repos on the NAS"])]
    )
    mirror.run(load())
    before = _docs(agent_home)
    result = bxmem_main("index", "rebuild")
    assert result.returncode == 0, result.stderr
    assert _docs(agent_home) == before and before


def test_query_syntax_is_never_obeyed(agent_home, honcho):
    honcho.stop()
    for query in [
        'restic" OR "x',
        "NEAR(restic backups)",
        "text:restic",
        "restic*",
        "-restic",
        '""',
        "AND OR NOT",
        "^restic",
    ]:
        result = recall.recall(load(), query)
        assert "local" in result.answered, (query, result.unavailable)


def test_empty_and_huge_queries_are_one_clear_line(agent_home):
    for args, message in ((["recall", "  "], "the query is empty"), (["recall", "x" * 10_001], "at most 10000")):
        result = bxmem_main(*args)
        assert result.returncode == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_corrupt_index_is_answered_without_then_rebuilt(agent_home, honcho):
    path = agent_home / "memory" / "bxmem" / "index.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database" * 100)
    result = recall.recall(load(), "restic")
    assert "local" in result.unavailable
    write_log(agent_home, "clean", turn_lines(2, "more restic", "sure"))
    out = bxmem_main("decide")
    assert "moved aside" in out.stderr
    assert "local" in recall.recall(load(), "restic").answered


def test_local_only_without_an_index_exits_7(home, configure):
    result = bxmem_main("recall", "anything")
    assert result.returncode == 7 and "local: unavailable (no local index yet" in result.stdout


# --- two agents, one Honcho -----------------------------------------------------------


@pytest.fixture
def fleet(tmp_path, honcho, brokerd, home, monkeypatch):
    """Agent A (this test's home) and agent B (a second home and config), one fake Honcho."""
    b_home = tmp_path / "b-home"
    b_config = tmp_path / "b.toml"
    b_config.write_text(
        f'[paths]\nhome = "{b_home}"\n[honcho]\nurl = "{honcho.url}"\nagent = "boxmaker1"\nowner = "kyle"\n'
        'trusted = "bm1-trusted"\nuntrusted = "bm1-untrusted"\nfleet = "fleet"\n'
    )

    def as_b(fn):
        monkeypatch.setenv("BOXMAKER_HOME", str(b_home))
        try:
            return fn(config_module.load(b_config))
        finally:
            monkeypatch.setenv("BOXMAKER_HOME", str(home))

    return b_home, as_b


def test_a_fleet_note_by_another_agent_is_found_tainted(fleet, configure, honcho, home):
    b_home, as_b = fleet
    configure(honcho.url)
    write_journal(
        b_home, [edit("b1", "note", "sb", trust="untrusted", entry="the vendor api rate limit is 100 per minute")]
    )
    write_journal(home, [edit("a1", "note", "sa", trust="untrusted", entry="the vendor api is flaky")])
    as_b(mirror.run)
    as_b(send.run)
    mirror.run(load())
    send.run(load())
    result = bxmem_main("recall", "vendor api", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    fleet_hits = [h for h in data["hits"] if h["source"] == "fleet"]
    assert [(h["peer"], h["tag"], h["class"]) for h in fleet_hits] == [("boxmaker1", "memory-tainted", "private")]
    assert data["label"] == {"untrusted": True, "class": "private"}


def test_read_sources_their_tags_and_that_own_workspaces_are_not_searched(fleet, config_file, honcho, home, brokerd):
    from bxmem.demo.brokerd import StubBrokerd

    b_home, as_b = fleet
    write_log(b_home, "sb", turn_lines(1, "the staging cluster is k3s", "noted"))
    write_journal(b_home, [edit("b2", "note", "sb", trust="trusted", entry="staging cluster runs k3s")])
    with StubBrokerd(b_home / "run" / "memory-broker" / "state.sock"):
        as_b(decide.run)
    as_b(mirror.run)
    as_b(send.run)
    for trust, tag in (("trusted", "memory"), ("untrusted", "memory-tainted")):
        config_file.write_text(
            honcho_config(honcho.url)
            + f'[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "bm1-trusted"\ntrust = "{trust}"\n'
        )
        honcho.requests.clear()
        result = recall.recall(load(), "staging cluster")
        read_hits = [h for h in result.hits if h.source == "boxmaker1"]
        assert {h.text for h in read_hits} >= {"the staging cluster is k3s", "staging cluster runs k3s"}
        assert {(h.tag, h.trust_class, h.agent) for h in read_hits} == {(tag, "private", "boxmaker1")}
        searched = {r.path for r in honcho.requests}
        assert not any("/bm0-" in path for path in searched)  # the agent's own workspaces
        assert all(
            r.method == "POST" and r.path.endswith(("/search", "/conclusions/query", "/conclusions/list"))
            for r in honcho.requests
        )


def test_a_slow_source_is_one_unavailable_line_and_the_rest_answer(agent_home, honcho, monkeypatch):
    monkeypatch.setattr(recall, "HONCHO_TIMEOUT_S", 0.5)
    honcho.inject("hang", match=r"/fleet/search$", seconds=5)
    started = time.monotonic()
    result = recall.recall(load(), "restic")
    assert (
        time.monotonic() - started < 3.5
    )  # well under the 5 s hang: per source, not added up; the hung thread is abandoned
    assert "local" in result.answered and result.unavailable["fleet"].startswith("no answer within")


@pytest.mark.parametrize("fault", ["malformed", "status"])
def test_a_broken_source_is_unavailable_never_a_traceback(agent_home, honcho, fault):
    honcho.inject(fault, match=r"/fleet/search$", status=500)
    result = bxmem_main("recall", "restic")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "fleet: unavailable" in result.stdout


def test_recall_creates_nothing_and_shows_a_retraction_beside_its_note(fleet, configure, honcho, home):
    from bxmem.commands import undo

    b_home, as_b = fleet
    configure(honcho.url)
    recall.recall(load(), "anything")
    assert honcho.workspaces == {} and not any(r.method == "PUT" for r in honcho.requests)
    write_journal(b_home, [edit("r1", "note", "sb", trust="untrusted", entry="the mirror is down")])
    as_b(mirror.run)
    as_b(send.run)
    as_b(lambda c: undo.run(c, "r1"))
    as_b(send.run)
    hits = [h for h in recall.recall(load(), "mirror down").hits if h.source == "fleet"]
    assert [(h.text, h.retracted) for h in hits] == [
        ("the mirror is down", True),
        ("retracted: the mirror is down", False),
    ]


def test_the_probe_connects_by_name_and_reports_a_refusal():
    import socket

    from bxmem.honcho.api import Unavailable, reach

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        reach(f"http://localhost:{port}", 2.0, "w")  # a name, resolved: connects
        reach(f"http://127.0.0.1:{port}/v3", 2.0, "w")
    with pytest.raises(Unavailable, match="connection failed") as refused:
        reach(f"http://localhost:{port}", 2.0, "w")  # closed now: refused
    assert refused.value.unsent  # nothing reached a server
    with pytest.raises(Unavailable, match="connection failed"):
        reach("http://no-such-host.invalid:80", 2.0, "w")
