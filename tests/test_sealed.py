"""The seal on bxmem's marshal files: a damaged one is never given to marshal.

marshal allocates whatever sizes its input declares, so one damaged byte can
make it build a billion-slot list and run for hours in C (no signal stops it).
These run the real CLI in a subprocess with a timeout, so a regression fails
here instead of hanging the suite."""

from __future__ import annotations

import marshal

import pytest
from helpers import run_bxmem, write_log
from hypothesis import given
from hypothesis import strategies as st

from bxmem.demo.sample import turn_lines
from bxmem.errors import COMMAND_EXITS
from bxmem.start.marshal_seal import seal, unseal

HUGE_LISTS = b"[" * 2544  # each '[' declares a list of 0x5b5b5b5b elements: what the fuzzer found


@given(st.binary(max_size=300))
def test_what_is_sealed_unseals_whole(data):
    assert unseal(seal(data)) == data


@given(st.binary(min_size=1, max_size=300), st.data())
def test_a_flipped_bit_or_a_cut_breaks_the_seal(data, draw):
    sealed = bytearray(seal(data))
    at = draw.draw(st.integers(0, len(sealed) - 1))
    flipped = bytes(sealed[:at]) + bytes([sealed[at] ^ (1 << draw.draw(st.integers(0, 7)))]) + bytes(sealed[at + 1 :])
    for damaged in (flipped, bytes(sealed[:at]), bytes(sealed) + b"\0"):
        with pytest.raises(ValueError, match="checksum"):
            unseal(damaged)


def test_an_unsealed_file_is_refused():
    for raw in (b"", b"abc", marshal.dumps({"version": 1}), HUGE_LISTS):
        with pytest.raises(ValueError):
            unseal(raw)


@pytest.mark.parametrize("name", ["config.marshal", "outbox.marshal", "idle-decide.marshal", "idle-send.marshal"])
def test_a_damaged_marshal_file_does_not_hang_a_job(home, configure, brokerd, honcho, name):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    for job in ("decide", "send"):
        assert run_bxmem(job).returncode == 0
    path = home / "memory" / "bxmem" / name
    assert path.exists()
    path.write_bytes(HUGE_LISTS)
    write_log(home, "s", turn_lines(2, "again", "yes"))
    said = ""
    for job in ("decide", "send", "sync"):
        result = run_bxmem(job, timeout=60)  # before the seal: still in marshal.loads an hour later
        assert result.returncode in COMMAND_EXITS[job], (job, result.returncode, result.stderr[-500:])
        assert "Traceback" not in result.stderr
        said += result.stderr
    if name in ("config.marshal", "outbox.marshal"):  # an idle summary is a cache: a miss is silent
        assert f"{path}: damaged: its checksum does not match" in said
    assert path.read_bytes() != HUGE_LISTS  # written again, sealed
    unseal(path.read_bytes())
