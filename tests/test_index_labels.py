"""Labels the local index gives memory entries (found by the eval corpus, case 06)."""

from __future__ import annotations

from helpers import write_log

from bxmem.commands import decide, mirror, recall
from bxmem.config import loader as config_module
from bxmem.demo.sample import FAKE_AWS_KEY, turn_lines, write_journal


def test_a_note_or_entry_holding_a_known_prefix_secret_is_recalled_as_secret(home, configure):
    configure(None)
    write_log(home, "s1", turn_lines(1, "hello", "hi"))
    write_journal(
        home,
        [
            {
                "id": "n1",
                "ts": "2026-09-27T10:00:00Z",
                "session": "s1",
                "op": "note",
                "trust": "untrusted",
                "entry": f"a page showed the key {FAKE_AWS_KEY}",
            },
            {
                "id": "i1",
                "ts": "2026-09-27T10:00:00Z",
                "session": "s1",
                "op": "identity_add",
                "file": "user.md",
                "entry": f"Kyle's deploy key is {FAKE_AWS_KEY}",
            },
            {
                "id": "n2",
                "ts": "2026-09-27T10:00:00Z",
                "session": "s1",
                "op": "note",
                "trust": "trusted",
                "entry": "the key rotation is monthly",
            },
        ],
    )
    decide.run(config_module.load())
    mirror.run(config_module.load())
    result = recall.recall(config_module.load(), "key", k=10)
    classes = {hit.text: hit.trust_class for hit in result.hits}
    assert classes[f"a page showed the key {FAKE_AWS_KEY}"] == "secret"
    assert classes[f"Kyle's deploy key is {FAKE_AWS_KEY}"] == "secret"
    assert classes["the key rotation is monthly"] == "private"
    assert result.trust_class == "secret"


def test_a_turn_holding_a_known_prefix_key_goes_nowhere_yet_is_recalled_as_secret(home, brokerd, configure):
    """What README and the threat model say "goes nowhere" means: sent to no workspace,
    and recalled on the host with the key's text, labelled secret."""
    configure("http://127.0.0.1:9")
    write_log(home, "s1", turn_lines(1, f"the deploy key is {FAKE_AWS_KEY}", "stored"))
    write_log(home, "s2", turn_lines(1, "the deploy runs at noon", "ok"))
    decide.run(config_module.load())
    from helpers import decisions

    assert decisions(home)["turn:s1:1"]["ws"] is None and decisions(home)["turn:s2:1"]["ws"] == "bm0-trusted"
    result = recall.recall(config_module.load(), "deploy", k=10)
    classes = {hit.text: hit.trust_class for hit in result.hits if hit.source == "local"}
    assert classes == {f"the deploy key is {FAKE_AWS_KEY}\nstored": "secret", "the deploy runs at noon\nok": "private"}
    assert result.trust_class == "secret"


def test_a_label_the_index_holds_damaged_in_place_counts_against_trust(home, brokerd, configure):
    """A byte of index.sqlite3 changed in place (SQLite keeps no checksum of a row): a tag
    or a class that is none bxmem writes is memory-tainted and secret, never a clean hit."""
    import sqlite3

    configure(None)
    write_log(
        home,
        "web",
        turn_lines(
            1, "read the restic page", "it says prune weekly", results=[{"untrusted": True, "class": "private"}]
        ),
    )
    decide.run(config_module.load())
    index = home / "memory" / "bxmem" / "index.sqlite3"
    db = sqlite3.connect(index)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the main file, where a stray write meets it
    db.close()
    data = index.read_bytes()
    # The row's tag and class, not the schema's comments that name them.
    data = data.replace(b"memory | memory-tainted", b"-").replace(b"public | private", b"-")
    assert data.count(b"memory-tainted") == 1 and data.count(b"private") == 1
    data = index.read_bytes()
    tag, label = data.rindex(b"memory-tainted"), data.rindex(b"private")
    with open(index, "r+b") as f:  # in place: one letter of the tag, one of the class
        f.seek(tag + len("memory-tainted") - 1)
        f.write(b"D")
        f.seek(label + len("private") - 1)
        f.write(b"E")
    result = recall.recall(config_module.load(), "restic", k=10)
    assert [(hit.tag, hit.trust_class) for hit in result.hits] == [("memory-tainted", "secret")]
    assert result.untrusted and result.trust_class == "secret"
