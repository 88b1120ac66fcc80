"""The seal on the JSON state files (store/state_json.py): any byte changed is seen, a file
without one is never believed, and what is sealed reads back as it was written."""

from __future__ import annotations

import json

import pytest

from bxmem.formats.shapes import anything, integer, list_of, record
from bxmem.store.state_json import CHANGED, UNSEALED, load_json, seal_json, write_json

SHAPE = record({"v": integer(0), "decided": list_of(list_of(integer(1)))}, {"note": anything})
VALUE = {"v": 2, "decided": [[1, 2], [5, 9]], "note": "é \ud800"}


def written(tmp_path, value=VALUE, name="decide.json"):
    path = tmp_path / name
    write_json(path, value)
    return path


def test_what_is_written_reads_back_and_is_still_json(tmp_path):
    path = written(tmp_path)
    assert load_json(path, SHAPE) == (VALUE, None)
    data = path.read_bytes()
    assert data.startswith(b'{"seal":"') and json.loads(data)["decided"] == VALUE["decided"]  # jq reads it
    empty = written(tmp_path, {}, "empty.json")
    assert load_json(empty, record({})) == ({}, None)


def test_every_bit_of_every_byte_flipped_is_seen(tmp_path):
    path = written(tmp_path)
    data = path.read_bytes()
    for at in range(len(data)):
        for bit in range(8):
            changed = bytearray(data)
            changed[at] ^= 1 << bit
            path.write_bytes(bytes(changed))
            value, why = load_json(path, SHAPE)
            assert value is None and why is not None, (at, bit, bytes(changed))


@pytest.mark.parametrize(
    "how", ["widened", "digits swapped", "cut and padded", "range repeated", "seal of another file"]
)
def test_a_change_that_keeps_the_shape_is_seen(tmp_path, how):
    path = written(tmp_path)
    data = path.read_bytes()
    if how == "widened":
        changed = data.replace(b"[5,9]", b"[5,12]")
    elif how == "digits swapped":
        changed = data.replace(b"[1,2],[5,9]", b"[5,9],[1,2]")
    elif how == "cut and padded":
        changed = data[: data.index(b',"note"')] + b"}" + b" " * (len(data) - data.index(b',"note"') - 1)
    elif how == "range repeated":
        changed = data.replace(b"[[1,2],", b"[[1,2],[1,2],")
    else:
        changed = written(tmp_path, VALUE, "mirror.json").read_bytes()  # another state file's bytes, put here
    assert json.loads(changed)["v"] == 2 and changed != data  # still JSON, still the shape
    path.write_bytes(changed)
    assert load_json(path, SHAPE) == (None, CHANGED)


def test_a_file_without_a_seal_is_not_believed(tmp_path):
    path = tmp_path / "decide.json"
    path.write_bytes(json.dumps(VALUE, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    assert load_json(path, SHAPE) == (None, UNSEALED)  # as 0.1.0 wrote it: rebuilt, said at info
    path.write_bytes(b'{"v":2,"decided":"no"}')
    assert load_json(path, SHAPE)[1] == "decided: not a list"  # no seal, and not a shape bxmem wrote: said as that


def test_a_damaged_seal_is_a_seal(tmp_path):
    """A change to the seal's own name or quotes is not taken for a file without one."""
    path = written(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'{"seal":', b'{"sebl":', 1))
    assert load_json(path, SHAPE) == (None, CHANGED)


def test_an_object_with_a_seal_of_its_own_is_refused():
    with pytest.raises(ValueError):
        seal_json("decide.json", {"seal": "x"})
