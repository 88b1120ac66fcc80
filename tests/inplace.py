"""In-place changes of a file, as the owner's hands or a stray write make them (the file
keeps its inode): for the state-file properties (tests/test_state_files_in_place.py) and
the crash suite's `--fault rewrite` (scripts/crash-suite)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import strategies as st

KINDS = ["flip", "overwrite", "cut-and-pad", "swap", "repeat", "edit", "widen"]


class Draws:
    """What one change draws, all of it up front and none of it from the bytes changed (a
    state file's inodes and times differ from one example to the next, and hypothesis needs
    the same draws to make the same change): from hypothesis (`st.data()`) or a seeded
    Random (the fast tier and the crash suite)."""

    def __init__(self, source) -> None:
        if isinstance(source, random.Random):
            ints = [source.randint(0, 1 << 16) for _ in range(4)]
            self.noise = source.randbytes(64)
        else:
            ints = [source.draw(st.integers(0, 1 << 16), label=f"fraction {n}") for n in range(4)]
            self.noise = source.draw(st.binary(min_size=64, max_size=64), label="bytes")
        self.fractions = ints

    def place(self, n: int, size: int) -> int:
        """The nth place drawn, in `size` bytes (a fraction of it: 0 to size, both ends)."""
        return self.fractions[n] * size >> 16

    def pick(self, n: int, options: list):
        return options[min(self.place(n, len(options)), len(options) - 1)]


def _numbers(value, path=()):
    """Every number in a JSON value (not a bool), with its path."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _numbers(value[key], (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _numbers(item, (*path, i))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path


def _set(value, path, new) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def _get(value, path):
    for key in path:
        value = value[key]
    return value


def _json(data: bytes):
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _widened(value, k: int) -> bool:
    """Every decided (and ended) range of turns in a decide.json made k turns longer: as
    if the owner's edit said turns were decided that never were."""
    found = False
    for cursor in (value.get("logs") or {}).values():
        for name in ("decided", "ended"):
            for r in cursor.get(name) or []:
                if isinstance(r, list) and len(r) == 2 and isinstance(r[1], int):
                    r[1] += k
                    found = True
    return found


def change(data: bytes, how: str, draw: Draws) -> bytes:
    """`data` changed the way `how` says, at places `draw` gives."""
    out = bytearray(data)
    size = len(data)
    at, to = draw.place(0, size), draw.place(1, size)
    length = 1 + draw.place(2, 199)  # 1 to 200 bytes
    if how == "flip" and size:
        out[min(at, size - 1)] ^= 1 << draw.place(2, 7)
    elif how == "overwrite":
        n = 1 + draw.place(2, 63)
        out[at : at + n] = draw.noise[:n]
        del out[max(size, at + 1) :]  # overwritten, not grown (a file of none gets a byte)
    elif how == "cut-and-pad":
        out[at:] = draw.pick(2, [b" ", b"\0", b"\n", b"}", b"0", b"]"]) * (size - at)
    elif how == "swap":
        sep = b"\n" if data.count(b"\n") > 1 else b","
        pieces = data.split(sep)
        i, j = draw.place(0, len(pieces) - 1), draw.place(1, len(pieces) - 1)
        pieces[i], pieces[j] = pieces[j], pieces[i]
        return sep.join(pieces)
    elif how == "repeat":
        piece = data[at : at + length]
        if draw.fractions[3] & 1:
            out[to:to] = piece  # a range written twice, the file longer
        else:
            out[to : to + len(piece)] = piece
            del out[size:]
    elif how in ("edit", "widen"):
        value = _json(data)
        if value is None:  # not JSON: a byte one more, as a binary number changed by one
            if size:
                out[min(at, size - 1)] = (out[min(at, size - 1)] + 1) % 256
            return bytes(out)
        if how == "widen" and _widened(value, 1 + draw.place(2, 4)):
            return dumps(value)
        paths = list(_numbers(value))
        if paths:
            path = draw.pick(0, paths)
            _set(value, path, _get(value, path) + draw.pick(1, [-2, -1, 1, 2, 3, 7, 1000]))
        return dumps(value)
    return bytes(out)


def rewrite_in_place(path: Path, data: bytes) -> None:
    with open(path, "r+b") as f:  # the file keeps its inode
        f.write(data)
        f.truncate()
