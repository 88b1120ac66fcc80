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
        for pos, raw in journal.lines(f, 0):
            f.seek(0)  # a reader looking up an undo's target in between
            f.read(3)
            seen.append((pos, json.loads(raw)["id"]))
        assert [i for _, i in seen] == ["a", "b"] and seen[1][0] == len(json.dumps({"id": "a", "op": "note"})) + 1
        assert [raw for _, raw in journal.lines(f, 0, tail=True)][-1] == b'{"id":"c"'
        assert journal.record_at(f, *(seen[1][0], 10)) is None  # a cut line is no record
        assert journal.record_at(f, 0, seen[1][0])["id"] == "a"


def test_find_edit_names_the_edit_and_the_undo_that_took_it_back(tmp_path):
    path = tmp_path / "journal.jsonl"
    _write(path, {"id": "a", "op": "note"}, "not an object", {"id": "u", "op": "undo", "target": "a"},
           tail=b'{"id":"late","op":"note"}')
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
    with pytest.raises(ValueError, match="shorter"):
        journal.read_field(path, journal.text_spec([0, span[1] + 5], "entry"))
