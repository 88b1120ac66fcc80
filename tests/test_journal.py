"""sources/journal.py: the one reader and (besides memoryd) the one writer of the journal."""

from __future__ import annotations

import json

import pytest

from bxmem.sources import journal


def _write(path, *records, tail: bytes = b""):
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail)


def test_lines_stop_at_an_unfinished_line_unless_asked_and_survive_seeks(tmp_path):
    path = tmp_path / "journal.jsonl"
    _write(path, {"id": "a", "op": "note"}, {"id": "b", "op": "note"}, tail=b'{"id":"c"')
    with open(path, "rb") as f:
        seen = []
        for pos, end, raw in journal.lines(f, 0):
            assert raw is not None  # no line here is over the bound
            assert end == pos + len(raw)
            f.seek(0)  # a reader looking up an undo's target in between
            f.read(3)
            seen.append((pos, json.loads(raw)["id"]))
        assert [i for _, i in seen] == ["a", "b"] and seen[1][0] == len(json.dumps({"id": "a", "op": "note"})) + 1
        assert [raw for _, _, raw in journal.lines(f, 0, tail=True)][-1] == b'{"id":"c"'
        assert journal.record_at(f, *(seen[1][0], 10)) is None  # a cut line is no record
        record = journal.record_at(f, 0, seen[1][0])
        assert record is not None and record["id"] == "a"


def test_find_edit_names_the_edit_and_the_undo_that_took_it_back(tmp_path):
    path = tmp_path / "journal.jsonl"
    _write(
        path,
        {"id": "a", "op": "note"},
        "not an object",
        {"id": "u", "op": "undo", "target": "a"},
        tail=b'{"id":"late","op":"note"}',
    )
    with open(path, "rb") as f:
        assert journal.find_edit(f, "a") == ({"id": "a", "op": "note"}, "u")
        assert journal.find_edit(f, "late") == ({"id": "late", "op": "note"}, None)  # an undo closes it off
        assert journal.find_edit(f, "zzz") == (None, None)


def test_append_checked_closes_off_a_torn_line_and_writes_nothing_when_the_check_refuses(tmp_path):
    path = tmp_path / "journal.jsonl"
    _write(path, {"id": "a", "op": "note"}, tail=b'{"id":"torn')
    before = path.read_bytes()

    def refuse(f):
        assert journal.find_edit(f, "a")[0] is not None  # the check reads under the lock
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        journal.append_checked(path, {"id": "u", "op": "undo", "target": "a"}, refuse)
    assert path.read_bytes() == before
    journal.append_checked(path, {"id": "u", "op": "undo", "target": "a"}, lambda f: None)
    assert path.read_bytes() == before + b'\n{"id":"u","op":"undo","target":"a"}\n'
    with pytest.raises(FileNotFoundError):  # memoryd's file is never created by bxmem
        journal.append_checked(tmp_path / "none.jsonl", {"id": "u"}, lambda f: None)
    assert not (tmp_path / "none.jsonl").exists()


def test_a_text_spec_reads_back_the_field_it_names(tmp_path):
    path = tmp_path / "journal.jsonl"
    record = {"id": "c", "op": "consolidate", "entry": "merged", "dropped": ["x", 3]}
    _write(path, record)
    span = [0, path.stat().st_size]
    assert journal.text_spec(span, "entry") == {"span": span, "field": "entry"}
    assert journal.read_field(path, journal.text_spec(span, "dropped", 0)) == "x"
    assert journal.field_of(record, journal.text_spec(span, "dropped", 1)) is None
    assert journal.field_of(record, {"field": "dropped", "index": 5}) is None
    with pytest.raises(ValueError, match="no text in old"):
        journal.read_field(path, journal.text_spec(span, "old"))
    with pytest.raises(journal.LineChanged, match="cut short"):
        journal.read_field(path, journal.text_spec([0, span[1] + 5], "entry"))


def test_read_field_checks_the_span_still_holds_the_line_decided(tmp_path):
    from bxmem.store.local_key import key_id, line_mac

    secret, other = b"k" * 32, b"o" * 32
    path = tmp_path / "journal.jsonl"
    _write(path, {"id": "e1", "op": "note", "entry": "the first"})
    raw = path.read_bytes()
    spec = journal.text_spec([0, len(raw)], "entry", mac=line_mac(secret, raw), key=key_id(secret))
    assert journal.read_field(path, spec, secret, "e1") == "the first"
    # Replaced by a line of the same length: another edit's, then the same edit's with another text.
    for record in ({"id": "e9", "op": "note", "entry": "the first"}, {"id": "e1", "op": "note", "entry": "the fir5t"}):
        _write(path, record)
        assert path.stat().st_size == len(raw)
        with pytest.raises(journal.LineChanged, match="not the one decided"):
            journal.read_field(path, spec, secret)
    # Without the key it was made with (entry.key replaced): the edit's own id is still checked.
    _write(path, {"id": "e9", "op": "note", "entry": "the first"})
    with pytest.raises(journal.LineChanged, match="not edit e1's"):
        journal.read_field(path, spec, other, "e1")
    assert journal.read_field(path, spec, other) == "the first"  # another edit's line is all it can tell
    path.write_bytes(b"[" * (len(raw) - 1) + b"\n")
    with pytest.raises(journal.LineChanged, match="unreadable: not valid JSON"):
        journal.read_field(path, journal.text_spec([0, len(raw)], "entry"))
